-- task_events, partitioned by month, so that history is dropped a month at
-- a time (DROP TABLE of a partition: no DELETE, no vacuum, no bloat) and
-- an event's lookup reads one month's index, however many years are kept.
--
-- The partition key is the creation time of the event's TASK
-- (task_created_at), not of the event. A unique index on a partitioned
-- table must include the partition key; since a task's created_at never
-- changes, (task_id, event_id, task_created_at) is unique exactly when
-- (task_id, event_id) is, so the database still refuses a second copy of
-- an event — every event of a task lives in one partition. The insert
-- takes task_created_at from the task row itself (adapters/postgres), so
-- it cannot be written wrong. Retention therefore drops the events of
-- tasks created before a month (docs/SCALING.md, "History").
--
-- tasks is not partitioned: its partial unique index (one active task per
-- device) must stay one index over every task, and a partitioned table
-- cannot have a unique index without the partition key. The check reads
-- tasks only through partial indexes (active; failed), whose size does not
-- grow with finished history.
--
-- Partitions: one per month from the oldest task with events to three
-- months ahead, created by ota_ensure_task_event_partitions(ahead), which
-- otad migrate up (and serve, which migrates at start) and
-- `otad partitions` call; a DEFAULT partition catches anything outside
-- them, so an insert never fails for want of a partition.
--
-- Existing events are copied into the partitioned table in this
-- migration's transaction; events wait for it. On a database with years
-- of events, delete the history past retention first (or expect minutes).

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION ota_create_task_event_partition(month date) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    first date := date_trunc('month', month)::date;
    name  text := 'task_events_' || to_char(first, 'YYYY_MM');
BEGIN
    IF to_regclass(name) IS NOT NULL THEN
        RETURN false;
    END IF;
    EXECUTE format('CREATE TABLE %I PARTITION OF task_events FOR VALUES FROM (%L) TO (%L)',
        name, to_char(first, 'YYYY-MM-DD') || ' 00:00:00+00',
        to_char((first + interval '1 month')::date, 'YYYY-MM-DD') || ' 00:00:00+00');
    RETURN true;
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION ota_ensure_task_event_partitions(ahead integer) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    made integer := 0;
BEGIN
    FOR i IN 0..ahead LOOP
        IF ota_create_task_event_partition((date_trunc('month', now() AT TIME ZONE 'UTC') + make_interval(months => i))::date) THEN
            made := made + 1;
        END IF;
    END LOOP;
    RETURN made;
END $$;
-- +goose StatementEnd

ALTER TABLE task_events RENAME TO task_events_unpartitioned;
ALTER TABLE task_events_unpartitioned RENAME CONSTRAINT task_events_pkey TO task_events_unpartitioned_pkey;
ALTER TABLE task_events_unpartitioned RENAME CONSTRAINT task_events_task_fkey TO task_events_unpartitioned_task_fkey;

CREATE TABLE task_events (
    task_id         uuid        NOT NULL,
    event_id        text        NOT NULL,
    fingerprint     text        NOT NULL,
    created_at      timestamptz NOT NULL,
    task_created_at timestamptz NOT NULL,
    CONSTRAINT task_events_pkey PRIMARY KEY (task_id, event_id, task_created_at),
    CONSTRAINT task_events_task_fkey FOREIGN KEY (task_id) REFERENCES tasks (id) ON DELETE CASCADE
) PARTITION BY RANGE (task_created_at);

CREATE TABLE task_events_default PARTITION OF task_events DEFAULT;

SELECT ota_create_task_event_partition(m::date)
FROM (SELECT DISTINCT date_trunc('month', t.created_at AT TIME ZONE 'UTC') AS m
      FROM task_events_unpartitioned e JOIN tasks t ON t.id = e.task_id) months;
SELECT ota_ensure_task_event_partitions(3);

INSERT INTO task_events (task_id, event_id, fingerprint, created_at, task_created_at)
SELECT e.task_id, e.event_id, e.fingerprint, e.created_at, t.created_at
FROM task_events_unpartitioned e JOIN tasks t ON t.id = e.task_id;

DROP TABLE task_events_unpartitioned;

-- +goose Down
CREATE TABLE task_events_unpartitioned (
    task_id     uuid        NOT NULL,
    event_id    text        NOT NULL,
    fingerprint text        NOT NULL,
    created_at  timestamptz NOT NULL,
    CONSTRAINT task_events_unpartitioned_pkey PRIMARY KEY (task_id, event_id),
    CONSTRAINT task_events_unpartitioned_task_fkey FOREIGN KEY (task_id) REFERENCES tasks (id) ON DELETE CASCADE
);
INSERT INTO task_events_unpartitioned (task_id, event_id, fingerprint, created_at)
SELECT task_id, event_id, fingerprint, created_at FROM task_events;
DROP TABLE task_events;
ALTER TABLE task_events_unpartitioned RENAME TO task_events;
ALTER TABLE task_events RENAME CONSTRAINT task_events_unpartitioned_pkey TO task_events_pkey;
ALTER TABLE task_events RENAME CONSTRAINT task_events_unpartitioned_task_fkey TO task_events_task_fkey;
DROP FUNCTION ota_ensure_task_event_partitions(integer);
DROP FUNCTION ota_create_task_event_partition(date);
