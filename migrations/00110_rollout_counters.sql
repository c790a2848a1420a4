-- Per-rollout counters (docs/DOMAIN.md event rule 5, "Counters").
--
-- A rollout's stats, failure threshold and stage gates count devices, each
-- once, by the task domain.CountsOver picks among its tasks of the rollout
-- (or of one stage). Counting them at every final event read all of the
-- rollout's tasks under the rollout's row lock; rollout_counters holds the
-- counts instead, changed in the transaction of every task insert and
-- status change (application.ReplaceActive, ApplyEvent, UpdateTask), so a
-- final event reads a few rows whatever the rollout's size.
--
-- tasks.stage_started_at is the start of the stage the task counts in
-- (domain.Task.JoinStage), fixed at its insert; NULL for a rollout without
-- stages. A stage's counters are keyed by that start; the whole rollout's
-- by the zero time of Go (0001-01-01 UTC), which no stage starts at.
--
-- A scope's count of a status is spread over shards (a hash of the
-- device id) and read as their sum: final events of a rollout without a
-- judgement, which do not lock the rollout's row, and progress events of
-- any rollout, change counter rows of several devices at once; one row
-- per status would queue them all behind each other's transactions. The
-- sum does not depend on which shard a device's change went to, so the
-- backfill writes shard 0.
--
-- Backfill: a staged rollout's existing tasks join the stage of its history
-- that had started when they were created (the latest started_at at or
-- before created_at), which is what the gate counted before; then every
-- rollout's counters are the recount (otad rollouts verify's statement).
-- Both read every task once; on a large fleet run it in a quiet hour.

-- +goose Up
ALTER TABLE tasks ADD COLUMN stage_started_at timestamptz NULL;

UPDATE tasks t SET stage_started_at = (
        SELECT max((h->>'started_at')::timestamptz)
        FROM rollouts r CROSS JOIN LATERAL jsonb_array_elements(r.policy->'history') h
        WHERE r.id = t.rollout_id AND (h->>'started_at')::timestamptz <= t.created_at)
    WHERE t.rollout_id IN (SELECT id FROM rollouts WHERE jsonb_typeof(policy->'history') = 'array');

CREATE TABLE rollout_counters (
    rollout_id       uuid        NOT NULL,
    stage_started_at timestamptz NOT NULL,
    status           text        NOT NULL,
    shard            smallint    NOT NULL,
    devices          bigint      NOT NULL,
    CONSTRAINT rollout_counters_pkey PRIMARY KEY (rollout_id, stage_started_at, status, shard),
    CONSTRAINT rollout_counters_rollout_fkey FOREIGN KEY (rollout_id) REFERENCES rollouts (id),
    CONSTRAINT rollout_counters_status_check CHECK (status IN
        ('pending', 'downloading', 'downloaded', 'installing', 'succeeded', 'failed', 'cancelled'))
);

INSERT INTO rollout_counters (rollout_id, stage_started_at, status, shard, devices)
SELECT rollout_id, '0001-01-01 00:00:00+00', status, 0, count(*) FROM (
        SELECT DISTINCT ON (rollout_id, device_id) rollout_id, status FROM tasks
        ORDER BY rollout_id, device_id, (status IN ('succeeded', 'failed')) DESC, created_at DESC, action_id DESC) c
    GROUP BY rollout_id, status
UNION ALL
SELECT rollout_id, stage_started_at, status, 0, count(*) FROM (
        SELECT DISTINCT ON (rollout_id, stage_started_at, device_id) rollout_id, stage_started_at, status FROM tasks
        WHERE stage_started_at IS NOT NULL
        ORDER BY rollout_id, stage_started_at, device_id, (status IN ('succeeded', 'failed')) DESC, created_at DESC, action_id DESC) c
    GROUP BY rollout_id, stage_started_at, status;

-- +goose Down
DROP TABLE rollout_counters;
ALTER TABLE tasks DROP COLUMN stage_started_at;
