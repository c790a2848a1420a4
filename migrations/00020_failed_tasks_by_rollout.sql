-- The rollout page shows a rollout's most recently failed tasks. Without
-- this index Postgres would read every failed task of the rollout through
-- tasks_rollout_status_idx and sort them; with it, the newest 50 are the
-- first 50 entries. Only failed tasks are in it, and a task enters it once
-- (failed is final), so it costs the check and event paths almost nothing.
--
-- No index serves the fleet view's counts of devices by version and last
-- poll: devices.last_seen_at and current_version are rewritten by every
-- check (written behind), and an index on either would turn those
-- heap-only updates into index updates on the hottest table. The fleet view
-- is one sequential scan, read by a person, not a device.
--
-- CONCURRENTLY so that a live fleet's tasks table is not locked against
-- writes while the index builds; that cannot run in a transaction.

-- +goose NO TRANSACTION
-- +goose Up
CREATE INDEX CONCURRENTLY IF NOT EXISTS tasks_failed_rollout_updated_idx
    ON tasks (rollout_id, updated_at DESC, id DESC) WHERE status = 'failed';

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS tasks_failed_rollout_updated_idx;
