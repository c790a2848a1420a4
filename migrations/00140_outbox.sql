-- The outbox and webhook subscriptions (docs/DOMAIN.md, events).
--
-- An event is written in the transaction of the change it reports, so it
-- is never lost when the change commits and never invented when it rolls
-- back. The same statement fans it out: one delivery row per enabled
-- subscription that wants its type (an empty event_types wants every
-- type), so a subscription added later is not sent what happened before
-- it. Any replica delivers: a worker claims due deliveries with FOR UPDATE
-- SKIP LOCKED and leases them (next_attempt_at moves past the lease), so
-- a replica killed mid-delivery leaves its claims to be retried.
--
-- A subscription's secret signs its deliveries (HMAC-SHA256), so it is
-- kept as given, not hashed, and never shown after its creation; during a
-- rotation the previous secret signs too, until previous_secret_until.

-- +goose Up
CREATE TABLE outbox_events (
    id         uuid        NOT NULL DEFAULT gen_random_uuid(),
    seq        bigint      GENERATED ALWAYS AS IDENTITY,
    type       text        NOT NULL,
    at         timestamptz NOT NULL,
    payload    jsonb       NOT NULL,
    CONSTRAINT outbox_events_pkey PRIMARY KEY (id),
    CONSTRAINT outbox_events_seq_key UNIQUE (seq)
);

CREATE TABLE webhook_subscriptions (
    id                    uuid        NOT NULL,
    url                   text        NOT NULL,
    event_types           text[]      NOT NULL,
    secret                text        NOT NULL,
    previous_secret       text        NULL,
    previous_secret_until timestamptz NULL,
    enabled               boolean     NOT NULL,
    disabled_reason       text        NOT NULL DEFAULT '',
    failing_since         timestamptz NULL,
    created_at            timestamptz NOT NULL,
    updated_at            timestamptz NOT NULL,
    CONSTRAINT webhook_subscriptions_pkey PRIMARY KEY (id)
);

CREATE TABLE webhook_deliveries (
    id               bigint      GENERATED ALWAYS AS IDENTITY,
    subscription_id  uuid        NOT NULL,
    event_id         uuid        NOT NULL,
    status           text        NOT NULL DEFAULT 'pending',
    attempts         integer     NOT NULL DEFAULT 0,
    next_attempt_at  timestamptz NOT NULL,
    last_attempt_at  timestamptz NULL,
    last_status_code integer     NULL,
    last_error       text        NOT NULL DEFAULT '',
    created_at       timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT webhook_deliveries_pkey PRIMARY KEY (id),
    CONSTRAINT webhook_deliveries_once UNIQUE (subscription_id, event_id),
    CONSTRAINT webhook_deliveries_subscription_fkey FOREIGN KEY (subscription_id) REFERENCES webhook_subscriptions (id) ON DELETE CASCADE,
    CONSTRAINT webhook_deliveries_event_fkey FOREIGN KEY (event_id) REFERENCES outbox_events (id) ON DELETE CASCADE,
    CONSTRAINT webhook_deliveries_status_check CHECK (status IN ('pending', 'delivered', 'failed'))
);
-- What a worker claims: due pending deliveries, oldest due first.
CREATE INDEX webhook_deliveries_due_idx ON webhook_deliveries (next_attempt_at) WHERE status = 'pending';
-- A subscription's delivery log, newest first.
CREATE INDEX webhook_deliveries_subscription_idx ON webhook_deliveries (subscription_id, id DESC);

-- +goose Down
DROP TABLE webhook_deliveries;
DROP TABLE webhook_subscriptions;
DROP TABLE outbox_events;
