-- Hands-off rollouts (docs/DOMAIN.md, "Hands-off rollouts").
--
-- devices.tags are the operators' labels, read by every check with the rest
-- of the device (the check view's one statement) and matched by rollout
-- selectors. RecordSeen never writes the column, so the GIN index does not
-- stop its updates from being heap-only.
--
-- rollouts.policy holds what a rollout adds to its percentage — selector,
-- stages with their gates, the stage reached and its history, starts_at,
-- the daily window, the task timeout, allow_downgrade — as one jsonb
-- document the domain validates (domain.RolloutRecord). It travels with the
-- rollout into the offers, so the catalog cache carries it to every check
-- and no rule reads anything more per poll. '{}' is a plain rollout, as
-- every rollout made before this migration is.
--
-- The jsonb_path_ops index on device attributes serves the admin listing's
-- attribute filter (attributes @> '{"k":"v"}').

-- +goose Up
ALTER TABLE devices ADD COLUMN tags text[] NOT NULL DEFAULT '{}';
CREATE INDEX devices_tags_idx ON devices USING gin (tags);
CREATE INDEX device_attributes_values_idx ON device_attributes USING gin (attributes jsonb_path_ops);
ALTER TABLE rollouts ADD COLUMN policy jsonb NOT NULL DEFAULT '{}'::jsonb;
ALTER TABLE rollouts ADD CONSTRAINT rollouts_policy_object_check CHECK (jsonb_typeof(policy) = 'object');
-- A staged rollout's gate counts the tasks created since its stage began.
-- tasks_rollout_created_idx (rollout_id, created_at, id) already serves it.

-- +goose Down
ALTER TABLE rollouts DROP CONSTRAINT rollouts_policy_object_check;
ALTER TABLE rollouts DROP COLUMN policy;
DROP INDEX device_attributes_values_idx;
DROP INDEX devices_tags_idx;
ALTER TABLE devices DROP COLUMN tags;
