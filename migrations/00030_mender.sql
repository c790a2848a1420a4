-- What Mender's device API adds to the model: the artifact name Mender
-- devices know firmware by, the public keys devices authenticate with,
-- the requests of devices waiting to be admitted, and the logs devices
-- upload about their tasks.

-- +goose Up

-- Optional, unique per model (Mender devices report it back to name the
-- software they run).
ALTER TABLE firmwares ADD COLUMN artifact_name text NULL;
CREATE UNIQUE INDEX firmwares_model_artifact_name_key ON firmwares (model, artifact_name)
    WHERE artifact_name IS NOT NULL;

-- A device admitted to authenticate with a key pair: its public key (PEM,
-- canonical PKIX form) and the generation of the session tokens issued to
-- it, moved on when the key is replaced.
CREATE TABLE device_admissions (
    device_id        text        NOT NULL,
    public_key       text        NOT NULL,
    token_generation bigint      NOT NULL,
    updated_at       timestamptz NOT NULL,
    CONSTRAINT device_admissions_pkey PRIMARY KEY (device_id),
    CONSTRAINT device_admissions_device_fkey FOREIGN KEY (device_id) REFERENCES devices (device_id) ON DELETE CASCADE,
    CONSTRAINT device_admissions_generation_check CHECK (token_generation > 0)
);

-- One request per device waiting for an operator (pending) or refused
-- (rejected). The device need not be registered yet.
CREATE TABLE device_auth_requests (
    id          uuid        NOT NULL,
    device_id   text        NOT NULL,
    id_data     text        NOT NULL,
    public_key  text        NOT NULL,
    device_type text        NULL,
    status      text        NOT NULL,
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL,
    CONSTRAINT device_auth_requests_pkey PRIMARY KEY (id),
    CONSTRAINT device_auth_requests_device_key UNIQUE (device_id),
    CONSTRAINT device_auth_requests_status_check CHECK (status IN ('pending', 'rejected'))
);
CREATE INDEX device_auth_requests_status_idx ON device_auth_requests (status, created_at, id);

-- The last log a device uploaded about a task (bounded by the domain).
CREATE TABLE task_logs (
    task_id    uuid        NOT NULL,
    lines      jsonb       NOT NULL,
    updated_at timestamptz NOT NULL,
    CONSTRAINT task_logs_pkey PRIMARY KEY (task_id),
    CONSTRAINT task_logs_task_fkey FOREIGN KEY (task_id) REFERENCES tasks (id) ON DELETE CASCADE,
    CONSTRAINT task_logs_array_check CHECK (jsonb_typeof(lines) = 'array')
);

-- +goose Down
DROP TABLE task_logs;
DROP TABLE device_auth_requests;
DROP TABLE device_admissions;
DROP INDEX firmwares_model_artifact_name_key;
ALTER TABLE firmwares DROP COLUMN artifact_name;
