-- Hosted artifacts: a file uploaded once, kept in the artifact store under
-- artifacts/<id>, downloaded by every device offered a firmware made from
-- it. One row per content: sha256 is unique, so the same bytes uploaded
-- twice are one artifact (the later upload's object is deleted and the
-- existing row answered).
--
-- A firmware made from an artifact refers to it; ON DELETE RESTRICT lets
-- the database refuse to delete an artifact some firmware still names,
-- whatever races between the check and the delete (the adapter answers
-- domain.ErrArtifactInUse). Such a firmware keeps url '' — devices are sent
-- the service's download route.

-- +goose Up
CREATE TABLE artifacts (
    id         uuid        NOT NULL,
    file_name  text        NOT NULL,
    size_bytes bigint      NOT NULL,
    sha256     text        NOT NULL,
    sha1       text        NOT NULL,
    md5        text        NOT NULL,
    format     text        NOT NULL,
    meta       jsonb       NOT NULL DEFAULT '{}',
    created_at timestamptz NOT NULL,
    CONSTRAINT artifacts_pkey PRIMARY KEY (id),
    CONSTRAINT artifacts_sha256_key UNIQUE (sha256),
    CONSTRAINT artifacts_size_bytes_check CHECK (size_bytes > 0),
    CONSTRAINT artifacts_sha256_check CHECK (sha256 ~ '^[0-9a-f]{64}$'),
    CONSTRAINT artifacts_sha1_check CHECK (sha1 ~ '^[0-9a-f]{40}$'),
    CONSTRAINT artifacts_md5_check CHECK (md5 ~ '^[0-9a-f]{32}$'),
    CONSTRAINT artifacts_format_check CHECK (format IN ('raw', 'mender', 'swu'))
);
CREATE INDEX artifacts_created_idx ON artifacts (created_at DESC, id DESC);

ALTER TABLE firmwares ADD COLUMN artifact_id uuid NULL
    CONSTRAINT firmwares_artifact_id_fkey REFERENCES artifacts (id) ON DELETE RESTRICT;
-- The foreign key's check on deleting an artifact looks firmwares up by it.
CREATE INDEX firmwares_artifact_id_idx ON firmwares (artifact_id) WHERE artifact_id IS NOT NULL;

-- +goose Down
DROP INDEX firmwares_artifact_id_idx;
ALTER TABLE firmwares DROP COLUMN artifact_id;
DROP TABLE artifacts;
