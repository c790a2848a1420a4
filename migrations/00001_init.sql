-- The initial schema of the OTA service. Times are timestamptz, written in
-- UTC with microsecond precision (the adapter truncates before writing, so a
-- value read back equals the value written and keyset cursors round-trip).
-- Optional text is NULL rather than ''.

-- +goose Up

-- Registered devices. Only the SHA-256 of a device's token is kept.
CREATE TABLE devices (
    device_id       text        NOT NULL,
    model           text        NOT NULL,
    current_version text        NULL,
    token_hash      bytea       NOT NULL,
    last_seen_at    timestamptz NULL,
    created_at      timestamptz NOT NULL,
    CONSTRAINT devices_pkey PRIMARY KEY (device_id),
    CONSTRAINT devices_token_hash_key UNIQUE (token_hash),
    CONSTRAINT devices_token_hash_check CHECK (octet_length(token_hash) = 32),
    CONSTRAINT devices_current_version_check CHECK (current_version <> '')
);

-- Published firmware. version is kept as published (build metadata
-- included, for display); version_key drops the build metadata and is the
-- identity: 1.2.0+a and 1.2.0+b are the same version of a model.
CREATE TABLE firmwares (
    id                 uuid        NOT NULL,
    model              text        NOT NULL,
    version            text        NOT NULL,
    version_key        text        NOT NULL,
    url                text        NOT NULL,
    size_bytes         bigint      NOT NULL,
    sha256             text        NOT NULL,
    sha1               text        NULL,
    md5                text        NULL,
    signature          text        NULL,
    release_notes      text        NULL,
    mandatory          boolean     NOT NULL DEFAULT false,
    min_source_version text        NULL,
    status             text        NOT NULL DEFAULT 'released',
    created_at         timestamptz NOT NULL,
    updated_at         timestamptz NOT NULL,
    CONSTRAINT firmwares_pkey PRIMARY KEY (id),
    CONSTRAINT firmwares_model_version_key UNIQUE (model, version_key),
    CONSTRAINT firmwares_size_bytes_check CHECK (size_bytes > 0),
    CONSTRAINT firmwares_sha256_check CHECK (sha256 ~ '^[0-9a-f]{64}$'),
    CONSTRAINT firmwares_sha1_check CHECK (sha1 ~ '^[0-9a-f]{40}$'),
    CONSTRAINT firmwares_md5_check CHECK (md5 ~ '^[0-9a-f]{32}$'),
    CONSTRAINT firmwares_status_check CHECK (status IN ('released', 'revoked')),
    CONSTRAINT firmwares_version_key_check CHECK (version_key <> '' AND position('+' IN version_key) = 0)
);

-- The admin listing (newest first, optionally by model).
CREATE INDEX firmwares_model_created_idx ON firmwares (model, created_at DESC, id DESC);
CREATE INDEX firmwares_created_idx ON firmwares (created_at DESC, id DESC);
-- The offers of a model: only released firmware is ever offered.
CREATE INDEX firmwares_released_model_idx ON firmwares (model) WHERE status = 'released';

-- Rollouts of firmware to a percentage of a model's fleet. (id, firmware_id)
-- is unique so that tasks can reference the pair: a task's rollout is always
-- a rollout of the task's firmware.
CREATE TABLE rollouts (
    id                        uuid        NOT NULL,
    firmware_id               uuid        NOT NULL,
    percentage                integer     NOT NULL,
    max_attempts              integer     NOT NULL DEFAULT 3,
    failure_threshold_percent integer     NULL,
    min_sample                integer     NOT NULL DEFAULT 20,
    status                    text        NOT NULL DEFAULT 'active',
    paused_reason             text        NULL,
    created_at                timestamptz NOT NULL,
    updated_at                timestamptz NOT NULL,
    CONSTRAINT rollouts_pkey PRIMARY KEY (id),
    CONSTRAINT rollouts_id_firmware_key UNIQUE (id, firmware_id),
    CONSTRAINT rollouts_firmware_fkey FOREIGN KEY (firmware_id) REFERENCES firmwares (id),
    CONSTRAINT rollouts_percentage_check CHECK (percentage BETWEEN 0 AND 100),
    CONSTRAINT rollouts_max_attempts_check CHECK (max_attempts >= 1),
    CONSTRAINT rollouts_failure_threshold_check CHECK (failure_threshold_percent BETWEEN 0 AND 100),
    CONSTRAINT rollouts_min_sample_check CHECK (min_sample >= 1),
    CONSTRAINT rollouts_status_check CHECK (status IN ('active', 'paused', 'cancelled')),
    CONSTRAINT rollouts_paused_reason_check CHECK (paused_reason IN ('manual', 'auto')),
    -- A reason is kept only while paused.
    CONSTRAINT rollouts_paused_reason_status_check CHECK (paused_reason IS NULL OR status = 'paused')
);

-- Active rollouts of a firmware: with firmwares_released_model_idx, the
-- offers of a model (every check runs that query).
CREATE INDEX rollouts_active_firmware_idx ON rollouts (firmware_id, created_at) WHERE status = 'active';
CREATE INDEX rollouts_firmware_idx ON rollouts (firmware_id);

-- Upgrade tasks. action_id numbers tasks for device protocols that want an
-- integer; the database assigns it.
CREATE TABLE tasks (
    id            uuid        NOT NULL,
    action_id     bigint      GENERATED ALWAYS AS IDENTITY,
    device_id     text        NOT NULL,
    firmware_id   uuid        NOT NULL,
    rollout_id    uuid        NOT NULL,
    status        text        NOT NULL,
    progress      integer     NOT NULL DEFAULT 0,
    attempt       integer     NOT NULL DEFAULT 1,
    error_code    text        NULL,
    error_message text        NULL,
    created_at    timestamptz NOT NULL,
    updated_at    timestamptz NOT NULL,
    CONSTRAINT tasks_pkey PRIMARY KEY (id),
    CONSTRAINT tasks_action_id_key UNIQUE (action_id),
    CONSTRAINT tasks_device_fkey FOREIGN KEY (device_id) REFERENCES devices (device_id),
    CONSTRAINT tasks_firmware_fkey FOREIGN KEY (firmware_id) REFERENCES firmwares (id),
    CONSTRAINT tasks_rollout_fkey FOREIGN KEY (rollout_id, firmware_id) REFERENCES rollouts (id, firmware_id),
    CONSTRAINT tasks_action_id_check CHECK (action_id > 0),
    CONSTRAINT tasks_status_check CHECK (status IN
        ('pending', 'downloading', 'downloaded', 'installing', 'succeeded', 'failed', 'cancelled')),
    CONSTRAINT tasks_progress_check CHECK (progress BETWEEN 0 AND 100),
    CONSTRAINT tasks_attempt_check CHECK (attempt >= 1)
);

-- Check rule 2: a device has at most one active task, whatever the locks do.
-- The adapter's INSERT ... ON CONFLICT names this index's predicate verbatim.
CREATE UNIQUE INDEX tasks_one_active_per_device ON tasks (device_id)
    WHERE status IN ('pending', 'downloading', 'downloaded', 'installing');
-- A device's failed tasks by firmware (check rule 4's attempt limit).
CREATE INDEX tasks_failed_device_firmware_idx ON tasks (device_id, firmware_id) WHERE status = 'failed';
-- The admin listing in (created_at, id) keyset order, unfiltered and filtered.
CREATE INDEX tasks_created_idx ON tasks (created_at, id);
CREATE INDEX tasks_device_created_idx ON tasks (device_id, created_at, id);
CREATE INDEX tasks_rollout_created_idx ON tasks (rollout_id, created_at, id);
CREATE INDEX tasks_status_created_idx ON tasks (status, created_at, id);
-- A rollout's counts by status (GET /admin/rollouts/{id}, auto-pause).
CREATE INDEX tasks_rollout_status_idx ON tasks (rollout_id, status);

-- Events applied to tasks, by the device's event id: an (task, event_id)
-- is applied at most once, and the fingerprint of its body tells a replay
-- from a conflicting reuse of the id.
CREATE TABLE task_events (
    task_id     uuid        NOT NULL,
    event_id    text        NOT NULL,
    fingerprint text        NOT NULL,
    created_at  timestamptz NOT NULL,
    CONSTRAINT task_events_pkey PRIMARY KEY (task_id, event_id),
    CONSTRAINT task_events_task_fkey FOREIGN KEY (task_id) REFERENCES tasks (id) ON DELETE CASCADE
);

-- +goose Down
DROP TABLE task_events;
DROP TABLE tasks;
DROP TABLE rollouts;
DROP TABLE firmwares;
DROP TABLE devices;
