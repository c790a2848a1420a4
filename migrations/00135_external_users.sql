-- Single sign-on users (docs/DOMAIN.md, accounts: OIDC users) are
-- accounts without a password: their password_hash is empty, which no
-- password ever matches. Every other account keeps an argon2id hash.

-- +goose Up
ALTER TABLE users DROP CONSTRAINT users_password_hash_check;
ALTER TABLE users ADD CONSTRAINT users_password_hash_check
    CHECK (password_hash LIKE '$argon2id$%' OR (password_hash = '' AND (username LIKE 'oidc-%' OR username LIKE 'oidc.%')));

-- +goose Down
DELETE FROM users WHERE password_hash = '';
ALTER TABLE users DROP CONSTRAINT users_password_hash_check;
ALTER TABLE users ADD CONSTRAINT users_password_hash_check CHECK (password_hash LIKE '$argon2id$%');
