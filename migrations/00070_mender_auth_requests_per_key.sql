-- Mender auth requests: one per device and key, not one per device (a
-- request names one key for good, so accepting it admits exactly the key
-- the operator was shown), and requests expire by their last change.

-- +goose Up
ALTER TABLE device_auth_requests DROP CONSTRAINT device_auth_requests_device_key;
-- public_key is the canonical PEM (at most ~1.5 KiB for the largest key
-- ever accepted), well within a btree entry.
ALTER TABLE device_auth_requests ADD CONSTRAINT device_auth_requests_device_key_key UNIQUE (device_id, public_key);
-- Expiry deletes by last change.
CREATE INDEX device_auth_requests_updated_idx ON device_auth_requests (updated_at);

-- +goose Down
DROP INDEX device_auth_requests_updated_idx;
-- Keep each device's newest request, as the one-per-device schema holds.
DELETE FROM device_auth_requests a USING device_auth_requests b
    WHERE a.device_id = b.device_id AND (a.updated_at, a.id) < (b.updated_at, b.id);
ALTER TABLE device_auth_requests DROP CONSTRAINT device_auth_requests_device_key_key;
ALTER TABLE device_auth_requests ADD CONSTRAINT device_auth_requests_device_key UNIQUE (device_id);
