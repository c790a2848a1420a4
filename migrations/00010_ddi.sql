-- What hawkBit's Direct Device Integration (DDI) adds to the model: the
-- attributes devices report about themselves (configData), and whether a
-- device has confirmed the cancel of a cancelled task (cancelAction).

-- +goose Up

-- One bounded map of strings per device (the domain bounds its size). A
-- device without a row never reported its attributes.
CREATE TABLE device_attributes (
    device_id  text        NOT NULL,
    attributes jsonb       NOT NULL DEFAULT '{}'::jsonb,
    updated_at timestamptz NULL,
    CONSTRAINT device_attributes_pkey PRIMARY KEY (device_id),
    CONSTRAINT device_attributes_device_fkey FOREIGN KEY (device_id) REFERENCES devices (device_id) ON DELETE CASCADE,
    CONSTRAINT device_attributes_object_check CHECK (jsonb_typeof(attributes) = 'object')
);

-- When the device confirmed the cancel of a cancelled task; NULL while it
-- has not (or for a task that was never cancelled). Tasks cancelled before
-- this migration count as confirmed: no device ever waited for them.
ALTER TABLE tasks ADD COLUMN cancel_confirmed_at timestamptz NULL;
UPDATE tasks SET cancel_confirmed_at = updated_at WHERE status = 'cancelled';

-- A device's cancelled tasks it has not confirmed, newest first (every DDI
-- poll asks). The index holds only those, so it stays tiny.
CREATE INDEX tasks_unconfirmed_cancel_idx ON tasks (device_id, updated_at DESC, id DESC)
    WHERE status = 'cancelled' AND cancel_confirmed_at IS NULL;

-- +goose Down
DROP INDEX tasks_unconfirmed_cancel_idx;
ALTER TABLE tasks DROP COLUMN cancel_confirmed_at;
DROP TABLE device_attributes;
