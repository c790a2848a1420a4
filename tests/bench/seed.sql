-- Seeds the benchmark database (run by tests/bench/bench.sh through psql,
-- after otad has migrated the schema). Everything is made in SQL, in one
-- transaction, so a million devices take seconds and an interrupted seed
-- leaves nothing half-made.
--
-- psql variables:
--   half     devices per fleet of the first two (bnu, bru)
--   creation devices of the creation fleet (bcr)
--   history  finished historical tasks, spread over every device
--   secret   key of the device tokens (see below)
--
-- Three fleets, so one database serves every scenario:
--   bnu-0000000 …  model bnu, nothing offered: every check is "no update"
--   bru-0000000 …  model bru, firmware 2.0.0 at a 100 % rollout, and every
--                  device already holds its pending task: every check is
--                  "reuse"
--   bcr-0000000 …  model bcr, firmware 2.0.0 at a 100 % rollout, no task
--                  yet: every device's first check creates its task
--                  (bench.sh deletes them before each run)
-- Both report current_version 1.0.0. The historical tasks belong to
-- firmware 0.0.1 of the device's model, whose rollout is cancelled (never
-- offered): ~90 % succeeded, ~8 % failed, ~2 % cancelled, over 90 days.
--
-- Device tokens are the load simulator's (tests/load, -seed): "sim_" and
-- the unpadded URL-safe base64 of HMAC-SHA256(secret, device_id); only
-- their SHA-256 is stored, as the service does. So the simulator's
-- open-loop mode can poll this database as is, and bench.sh exports the
-- tokens for wrk with the same expression.

\set ON_ERROR_STOP on
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgcrypto;
TRUNCATE task_events, rollout_counters, tasks, rollouts, firmwares, devices CASCADE;

CREATE TEMP TABLE bench_now ON COMMIT DROP AS
    SELECT date_trunc('milliseconds', now()) AS t;

INSERT INTO devices (device_id, model, current_version, token_hash, created_at)
SELECT id, model, '1.0.0',
       sha256(convert_to('sim_' || rtrim(translate(encode(hmac(id, :'secret', 'sha256'), 'base64'), '+/', '-_'), '='), 'UTF8')),
       (SELECT t FROM bench_now) - interval '180 days'
FROM (SELECT m AS model, m || '-' || lpad(i::text, 7, '0') AS id
      FROM unnest(ARRAY['bnu', 'bru']) AS m, generate_series(0, :half - 1) AS i
      UNION ALL
      SELECT 'bcr', 'bcr-' || lpad(i::text, 7, '0') FROM generate_series(0, :creation - 1) AS i) AS s
ORDER BY id;

-- Fixed ids, so that the statements below (and a reader) can name them.
INSERT INTO firmwares (id, model, version, version_key, url, size_bytes, sha256, status, created_at, updated_at)
SELECT id::uuid, model, version, version, 'https://firmware.example/' || model || '/' || version || '.bin',
       16777216, encode(sha256(convert_to(model || '@' || version, 'UTF8')), 'hex'), 'released',
       (SELECT t FROM bench_now) - interval '100 days', (SELECT t FROM bench_now) - interval '100 days'
FROM (VALUES ('00000000-0000-4000-8000-0000000000a1', 'bnu', '0.0.1'),
             ('00000000-0000-4000-8000-0000000000b1', 'bru', '0.0.1'),
             ('00000000-0000-4000-8000-0000000000b2', 'bru', '2.0.0'),
             ('00000000-0000-4000-8000-0000000000c2', 'bcr', '2.0.0')) AS f (id, model, version);

INSERT INTO rollouts (id, firmware_id, percentage, status, created_at, updated_at)
SELECT id::uuid, fw::uuid, pct, status, (SELECT t FROM bench_now) - interval '95 days', (SELECT t FROM bench_now) - interval '95 days'
FROM (VALUES ('00000000-0000-4000-9000-0000000000a1', '00000000-0000-4000-8000-0000000000a1', 100, 'cancelled'),
             ('00000000-0000-4000-9000-0000000000b1', '00000000-0000-4000-8000-0000000000b1', 100, 'cancelled'),
             ('00000000-0000-4000-9000-0000000000b2', '00000000-0000-4000-8000-0000000000b2', 100, 'active'),
             ('00000000-0000-4000-9000-0000000000c2', '00000000-0000-4000-8000-0000000000c2', 100, 'active')) AS r (id, fw, pct, status);

-- History: task k goes to device k mod (2 × half), oldest first, so the
-- created_at indexes grow at their right edge.
INSERT INTO tasks (id, device_id, firmware_id, rollout_id, status, progress, attempt, error_code, created_at, updated_at)
SELECT gen_random_uuid(), dev,
       CASE WHEN model = 'bnu' THEN '00000000-0000-4000-8000-0000000000a1'::uuid ELSE '00000000-0000-4000-8000-0000000000b1'::uuid END,
       CASE WHEN model = 'bnu' THEN '00000000-0000-4000-9000-0000000000a1'::uuid ELSE '00000000-0000-4000-9000-0000000000b1'::uuid END,
       CASE WHEN r < 8 THEN 'failed' WHEN r < 10 THEN 'cancelled' ELSE 'succeeded' END,
       CASE WHEN r < 8 THEN 40 WHEN r < 10 THEN 0 ELSE 100 END,
       1,
       CASE WHEN r < 8 THEN 'DOWNLOAD_FAILED' WHEN r < 10 THEN 'SUPERSEDED' END,
       created, created + interval '20 minutes'
FROM (SELECT k,
             CASE WHEN k % 2 = 0 THEN 'bnu' ELSE 'bru' END AS model,
             CASE WHEN k % 2 = 0 THEN 'bnu' ELSE 'bru' END || '-' || lpad(((k / 2) % :half)::text, 7, '0') AS dev,
             (k * 7919) % 100 AS r,
             (SELECT t FROM bench_now) - interval '90 days' + (k * interval '90 days') / greatest(:history, 1) AS created
      FROM generate_series(0::bigint, :history - 1) AS k) AS h;

-- The reuse fleet's active tasks: one pending task per device, an hour
-- old — well inside the rollout's task_timeout (24 h by default), past
-- which a check would fail it as TIMED_OUT and create the next attempt.
INSERT INTO tasks (id, device_id, firmware_id, rollout_id, status, progress, attempt, created_at, updated_at)
SELECT gen_random_uuid(), device_id, '00000000-0000-4000-8000-0000000000b2', '00000000-0000-4000-9000-0000000000b2',
       'pending', 0, 1, (SELECT t FROM bench_now) - interval '1 hour', (SELECT t FROM bench_now) - interval '1 hour'
FROM devices WHERE model = 'bru' ORDER BY device_id;

-- The rollouts' counters, as migration 00110 backfills them (no stages).
INSERT INTO rollout_counters (rollout_id, stage_started_at, status, shard, devices)
SELECT rollout_id, '0001-01-01 00:00:00+00', status, 0, count(*) FROM (
        SELECT DISTINCT ON (rollout_id, device_id) rollout_id, status FROM tasks
        ORDER BY rollout_id, device_id, (status IN ('succeeded', 'failed')) DESC, created_at DESC, action_id DESC) c
    GROUP BY rollout_id, status;

COMMIT;
VACUUM ANALYZE devices;
VACUUM ANALYZE tasks;
ANALYZE firmwares;
ANALYZE rollouts;
