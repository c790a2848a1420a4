-- The audit log: one record per operator's change, written in the
-- transaction of the change it records (docs/DOMAIN.md, audit log), so a
-- change and its record commit or roll back together.
--
-- Records are only added. A trigger refuses UPDATE and DELETE, so a bug in
-- the service (or a statement typed by hand) cannot rewrite history;
-- retention drops whole months (DROP TABLE of a partition, which no row
-- trigger sees), as for task_events (00051): partitioned by the record's
-- time, a DEFAULT partition catching anything outside the monthly ones,
-- which ota_ensure_audit_partitions(ahead) creates (otad migrate up, serve
-- at start, and `otad partitions`).
--
-- seq orders records written in the same microsecond: the listing pages by
-- (at, seq), newest first. The actor is stored as its parts (kind, user,
-- token) so that a filter by user finds both their sessions and their
-- tokens. before and after are JSON of the fields an operator reviews,
-- never a secret or a hash of one.

-- +goose Up
CREATE TABLE audit_log (
    seq         bigint GENERATED ALWAYS AS IDENTITY,
    at          timestamptz NOT NULL,
    actor_kind  text        NOT NULL,
    actor_user  text        NULL,
    actor_token uuid        NULL,
    action      text        NOT NULL,
    target      text        NOT NULL,
    before      jsonb       NULL,
    after       jsonb       NULL,
    request_id  text        NOT NULL DEFAULT '',
    source      text        NOT NULL DEFAULT '',
    CONSTRAINT audit_log_pkey PRIMARY KEY (at, seq),
    CONSTRAINT audit_log_actor_check CHECK (
        (actor_kind = 'root' AND actor_user IS NULL AND actor_token IS NULL) OR
        (actor_kind = 'user' AND actor_user IS NOT NULL AND actor_token IS NULL) OR
        (actor_kind = 'token' AND actor_user IS NOT NULL AND actor_token IS NOT NULL))
) PARTITION BY RANGE (at);

CREATE TABLE audit_log_default PARTITION OF audit_log DEFAULT;

-- The filters: by user (sessions and tokens), by target, by action; each
-- newest first.
CREATE INDEX audit_log_actor_user_idx ON audit_log (actor_user, at DESC, seq DESC);
CREATE INDEX audit_log_target_idx ON audit_log (target, at DESC, seq DESC);
CREATE INDEX audit_log_action_idx ON audit_log (action, at DESC, seq DESC);
-- A token's records (GET /admin/audit?actor=<token id>): only token rows
-- have one.
CREATE INDEX audit_log_actor_token_idx ON audit_log (actor_token, at DESC, seq DESC) WHERE actor_token IS NOT NULL;

-- +goose StatementBegin
CREATE FUNCTION ota_audit_log_append_only() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'audit_log is append-only: % refused', TG_OP USING ERRCODE = 'insufficient_privilege';
END $$;
-- +goose StatementEnd

CREATE TRIGGER audit_log_append_only BEFORE UPDATE OR DELETE ON audit_log
    FOR EACH ROW EXECUTE FUNCTION ota_audit_log_append_only();

-- Monthly partitions of any table partitioned by a timestamptz range
-- (00051 has task_events' own, older pair): parent_YYYY_MM, for each month
-- from the current one to ahead months beyond it.
-- +goose StatementBegin
CREATE FUNCTION ota_create_month_partition(parent text, month date) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    first date := date_trunc('month', month)::date;
    name  text := parent || '_' || to_char(first, 'YYYY_MM');
BEGIN
    IF to_regclass(name) IS NOT NULL THEN
        RETURN false;
    END IF;
    EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES FROM (%L) TO (%L)',
        name, parent, to_char(first, 'YYYY-MM-DD') || ' 00:00:00+00',
        to_char((first + interval '1 month')::date, 'YYYY-MM-DD') || ' 00:00:00+00');
    RETURN true;
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION ota_ensure_month_partitions(parent text, ahead integer) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    made integer := 0;
BEGIN
    FOR i IN 0..ahead LOOP
        IF ota_create_month_partition(parent, (date_trunc('month', now() AT TIME ZONE 'UTC') + make_interval(months => i))::date) THEN
            made := made + 1;
        END IF;
    END LOOP;
    RETURN made;
END $$;
-- +goose StatementEnd

CREATE FUNCTION ota_create_audit_partition(month date) RETURNS boolean
LANGUAGE sql AS $$ SELECT ota_create_month_partition('audit_log', month) $$;

CREATE FUNCTION ota_ensure_audit_partitions(ahead integer) RETURNS integer
LANGUAGE sql AS $$ SELECT ota_ensure_month_partitions('audit_log', ahead) $$;

SELECT ota_ensure_audit_partitions(3);

-- +goose Down
DROP TABLE audit_log;
DROP FUNCTION ota_audit_log_append_only();
DROP FUNCTION ota_ensure_audit_partitions(integer);
DROP FUNCTION ota_create_audit_partition(date);
DROP FUNCTION ota_ensure_month_partitions(text, integer);
DROP FUNCTION ota_create_month_partition(text, date);
