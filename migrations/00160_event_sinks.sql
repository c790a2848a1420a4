-- The event sinks' cursors (the NATS JetStream sink, OTA_EVENTS_NATS_URL).
--
-- One replica publishes at a time: it claims its sink's row FOR UPDATE
-- SKIP LOCKED, publishes the events after the cursor and moves the cursor
-- in the same transaction; a replica killed mid-batch moves nothing, and
-- the next publishes the batch again (JetStream drops the repeats by
-- their Nats-Msg-Id, the event id).
--
-- A cursor on seq alone would lose events: seq is taken at the insert,
-- not at the commit, so a transaction that commits late can hold a seq
-- below one already published. xid is the writing transaction's id: an
-- event whose xid is below the oldest transaction still running
-- (pg_snapshot_xmin) is final, and no later event can sort before it. So
-- the sink reads in (xid, seq) order, only final events, and keeps both as
-- its cursor: in seq order within a transaction, and one transaction after
-- another in the order they began writing.

-- +goose Up
ALTER TABLE outbox_events ADD COLUMN xid xid8 NOT NULL DEFAULT pg_current_xact_id();
CREATE INDEX outbox_events_xid_seq_idx ON outbox_events (xid, seq);

CREATE TABLE event_sinks (
    name     text   NOT NULL,
    last_xid xid8   NOT NULL DEFAULT '0',
    last_seq bigint NOT NULL DEFAULT 0,
    CONSTRAINT event_sinks_pkey PRIMARY KEY (name)
);

-- +goose Down
DROP TABLE event_sinks;
DROP INDEX outbox_events_xid_seq_idx;
ALTER TABLE outbox_events DROP COLUMN xid;
