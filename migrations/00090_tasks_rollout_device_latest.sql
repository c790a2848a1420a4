-- A rollout's stats, failure threshold and stage gates count each device
-- once (in a stage, among its tasks created in the stage): by its latest
-- task with an outcome (succeeded or failed), or its latest task if none
-- has one — a retry in flight or a cancel does not undo an outcome, a later
-- outcome replaces an earlier one. The adapter's statement is
--   SELECT DISTINCT ON (device_id) status … WHERE rollout_id = $1
--   ORDER BY device_id, (status IN ('succeeded', 'failed')) DESC,
--            created_at DESC, action_id DESC
-- and this index is in that order for one rollout (the expression written
-- exactly as there) and carries the status, so the count is one pass over
-- the rollout's entries, with no sort and no heap visit where the
-- visibility map allows — as the plain count over tasks_rollout_status_idx
-- was. A stage's count reads tasks_rollout_created_idx and sorts the
-- stage's tasks only.
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
    ON tasks (rollout_id, device_id, (status IN ('succeeded', 'failed')) DESC, created_at DESC, action_id DESC)
    INCLUDE (status);

-- +goose Down
DROP INDEX CONCURRENTLY IF EXISTS tasks_rollout_device_latest_idx;
