-- Operators' accounts and their API tokens (docs/DOMAIN.md, accounts).
--
-- A user's password is stored as an argon2id PHC string, never in clear.
-- A token is stored as the SHA-256 of its secret (shown once, at
-- creation): a leaked table does not let anyone act as an operator. A
-- token belongs to its user: removing the user deletes its tokens in the
-- same statement (ON DELETE CASCADE), and authentication reads a token
-- through its user, so a removed user's token fails on its next request.

-- +goose Up
CREATE TABLE users (
    username      text        NOT NULL,
    role          text        NOT NULL,
    password_hash text        NOT NULL,
    created_at    timestamptz NOT NULL,
    CONSTRAINT users_pkey PRIMARY KEY (username),
    CONSTRAINT users_role_check CHECK (role IN ('viewer', 'releaser', 'rollout_manager', 'device_admin', 'admin')),
    CONSTRAINT users_password_hash_check CHECK (password_hash LIKE '$argon2id$%')
);

CREATE TABLE api_tokens (
    id           uuid        NOT NULL,
    username     text        NOT NULL,
    name         text        NOT NULL,
    token_hash   bytea       NOT NULL,
    scopes       text[]      NOT NULL,
    created_at   timestamptz NOT NULL,
    expires_at   timestamptz NOT NULL,
    last_used_at timestamptz NULL,
    revoked_at   timestamptz NULL,
    CONSTRAINT api_tokens_pkey PRIMARY KEY (id),
    CONSTRAINT api_tokens_token_hash_key UNIQUE (token_hash),
    CONSTRAINT api_tokens_username_fkey FOREIGN KEY (username) REFERENCES users (username) ON DELETE CASCADE,
    CONSTRAINT api_tokens_token_hash_check CHECK (octet_length(token_hash) = 32)
);
-- The cascade and a user's token listing find tokens by owner.
CREATE INDEX api_tokens_username_idx ON api_tokens (username);

-- +goose Down
DROP TABLE api_tokens;
DROP TABLE users;
