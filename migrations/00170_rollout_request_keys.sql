-- A rollout's Idempotency-Key (docs/DOMAIN.md, Rollout): the key an
-- operator started it with and the fingerprint of that request, written in
-- the rollout's own insert, so that a start retried after its answer was
-- lost finds the rollout instead of starting a second one. The unique
-- index makes racing retries, on any replica, insert one row; the others
-- fail on it and read the winner.

-- +goose Up
ALTER TABLE rollouts ADD COLUMN request_key text, ADD COLUMN request_fingerprint text,
    ADD CONSTRAINT rollouts_request_key_check CHECK ((request_key IS NULL) = (request_fingerprint IS NULL));
CREATE UNIQUE INDEX rollouts_request_key_key ON rollouts (request_key) WHERE request_key IS NOT NULL;

-- +goose Down
DROP INDEX rollouts_request_key_key;
ALTER TABLE rollouts DROP CONSTRAINT rollouts_request_key_check, DROP COLUMN request_key, DROP COLUMN request_fingerprint;
