-- A device row is rewritten when a check reports a new version or when its
-- last_seen_at is OTA_LAST_SEEN_RESOLUTION old. Neither column is indexed,
-- so the update can be heap-only (HOT: no index entry written) — but only
-- if the new row version fits in the same page. At the default fillfactor
-- of 100 a freshly loaded page has no room, and every first update of a
-- device moves it to another page and writes an entry in both of the
-- table's indexes. Leaving a fifth of each page free makes those updates
-- HOT: measured with TestWALPerThousandPolls (docs/SCALING.md), 247 instead
-- of 390 WAL bytes per written check.
--
-- This applies to pages written from now on; an existing table gets it
-- when rewritten (VACUUM FULL, or pg_repack online).

-- +goose Up
ALTER TABLE devices SET (fillfactor = 80);

-- +goose Down
ALTER TABLE devices RESET (fillfactor);
