-- A rollout's stats, failure threshold and stage gates count each device
-- once, by its latest task in the rollout (or in the stage): SELECT
-- DISTINCT ON (device_id) … ORDER BY device_id, created_at DESC, id DESC.
-- This index is in that order for one rollout and carries the status, so
-- the count is one pass over the rollout's entries, with no sort and no
-- heap visit where the visibility map allows — as the plain count over
-- tasks_rollout_status_idx was. A stage's count filters created_at inside
-- the same pass.
--
-- Cost: one more index entry per task, rewritten when its status changes
-- (a status update is never heap-only anyway: tasks_rollout_status_idx and
-- the active-task index hold the status).
--
-- CONCURRENTLY so that a live fleet's tasks table is not locked against
-- writes while the index builds; that cannot run in a transaction.

-- +goose NO TRANSACTION
-- +goose Up
CREATE INDEX CONCURRENTLY IF NOT EXISTS tasks_rollout_device_latest_idx
    ON tasks (rollout_id, device_id, created_at DESC, id DESC) INCLUDE (status);

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS tasks_rollout_device_latest_idx;
