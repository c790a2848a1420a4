package postgres

import (
	"context"
	"fmt"

	"github.com/jmoiron/sqlx"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// FleetReader answers the operator's fleet views (application.FleetReader), each
// with one prepared statement: the rollout listing with every rollout's task
// counts, the devices counted by model and version, a rollout's newest
// failures.
type FleetReader struct {
	rollouts *sqlx.Stmt
	versions *sqlx.Stmt
	failures *sqlx.Stmt
}

// listRolloutsSQL picks the page of rollouts first and only then reads
// their counters (the whole rollout's, countersSQL), so old rollouts
// beyond the limit cost nothing and a rollout's size costs nothing.
var listRolloutsSQL = `WITH page AS (
		SELECT ` + columns("r", rolloutFields) + `, f.model AS model, f.version AS version
		FROM rollouts r JOIN firmwares f ON f.id = r.firmware_id
		WHERE ($1 = '' OR f.model = $1)
		ORDER BY r.created_at DESC, r.id DESC
		LIMIT $2)
	SELECT page.*, s.pending, s.downloading, s.downloaded, s.installing, s.succeeded, s.failed, s.cancelled
	FROM page LEFT JOIN LATERAL (
		SELECT coalesce(sum(c.devices) FILTER (WHERE c.status = 'pending'), 0)::bigint AS pending,
			coalesce(sum(c.devices) FILTER (WHERE c.status = 'downloading'), 0)::bigint AS downloading,
			coalesce(sum(c.devices) FILTER (WHERE c.status = 'downloaded'), 0)::bigint AS downloaded,
			coalesce(sum(c.devices) FILTER (WHERE c.status = 'installing'), 0)::bigint AS installing,
			coalesce(sum(c.devices) FILTER (WHERE c.status = 'succeeded'), 0)::bigint AS succeeded,
			coalesce(sum(c.devices) FILTER (WHERE c.status = 'failed'), 0)::bigint AS failed,
			coalesce(sum(c.devices) FILTER (WHERE c.status = 'cancelled'), 0)::bigint AS cancelled
		FROM rollout_counters c
		WHERE c.rollout_id = page."r.id" AND c.stage_started_at = '0001-01-01 00:00:00+00') s ON true
	ORDER BY page."r.created_at" DESC, page."r.id" DESC`

// versionCountsSQL is one sequential scan of devices (see migration 00020
// for why no index serves it).
const versionCountsSQL = `SELECT model, coalesce(current_version, ''), count(*),
		count(*) FILTER (WHERE last_seen_at >= $2), count(*) FILTER (WHERE last_seen_at >= $3)
	FROM devices WHERE ($1 = '' OR model = $1)
	GROUP BY model, current_version`

// recentFailuresSQL walks tasks_failed_rollout_updated_idx from its newest end.
const recentFailuresSQL = `SELECT ` + taskColumns + ` FROM tasks
	WHERE rollout_id = $1 AND status = 'failed'
	ORDER BY updated_at DESC, id DESC LIMIT $2`

// NewFleetReader reads through the given pool, preparing its statements; it
// fails when they cannot be prepared (no schema).
func NewFleetReader(db *sqlx.DB) (*FleetReader, error) {
	return prepared(db, "fleet reader", func(p *statements) *FleetReader {
		return &FleetReader{
			rollouts: p.prepare(listRolloutsSQL),
			versions: p.prepare(versionCountsSQL),
			failures: p.prepare(recentFailuresSQL),
		}
	})
}

// ListRollouts returns rollouts newest first with their firmware's model
// and version and their task counts.
func (s *FleetReader) ListRollouts(ctx context.Context, f ports.RolloutFilter) ([]ports.RolloutSummary, error) {
	limit := positiveOr(f.Limit, ports.DefaultRolloutLimit)
	rows, err := s.rollouts.QueryxContext(ctx, f.Model, limit)
	if err != nil {
		return nil, fmt.Errorf("listing rollouts: %w", unavailable(err))
	}
	defer rows.Close()
	out := []ports.RolloutSummary{}
	for rows.Next() {
		// By name, as every read of rolloutRow is: a column added to the
		// table is read here with no second list to keep in step.
		var row struct {
			R              rolloutRow `db:"r"`
			Model, Version string
			domain.TaskStats
		}
		if err := rows.StructScan(&row); err != nil {
			return nil, fmt.Errorf("listing rollouts: %w", unavailable(err))
		}
		ro, err := row.R.toDomain()
		if err != nil {
			return nil, err
		}
		out = append(out, ports.RolloutSummary{Rollout: ro, Model: row.Model, Version: row.Version, Stats: row.TaskStats})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing rollouts: %w", unavailable(err))
	}
	return out, nil
}

// VersionCounts counts devices by (model, current version as stored).
func (s *FleetReader) VersionCounts(ctx context.Context, q ports.VersionCountQuery) ([]ports.VersionCount, error) {
	rows, err := s.versions.QueryContext(ctx, q.Model, dbTime(q.HourAgo), dbTime(q.DayAgo))
	if err != nil {
		return nil, fmt.Errorf("counting devices by version: %w", unavailable(err))
	}
	defer rows.Close()
	out := []ports.VersionCount{}
	for rows.Next() {
		var c ports.VersionCount
		if err := rows.Scan(&c.Model, &c.Version, &c.Devices, &c.SeenSinceHour, &c.SeenSinceDay); err != nil {
			return nil, fmt.Errorf("counting devices by version: %w", unavailable(err))
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("counting devices by version: %w", unavailable(err))
	}
	return out, nil
}

// RecentFailures returns a rollout's failed tasks, most recently failed
// first, at most limit. The zero id has none.
func (s *FleetReader) RecentFailures(ctx context.Context, rolloutID domain.UUID, limit int) ([]domain.Task, error) {
	out := []domain.Task{}
	uid, ok := rolloutID.String(), !rolloutID.IsZero()
	if !ok || limit <= 0 {
		return out, nil
	}
	rows, err := s.failures.QueryContext(ctx, uid, limit)
	if err != nil {
		return nil, fmt.Errorf("listing failures of rollout %s: %w", uid, unavailable(err))
	}
	defer rows.Close()
	for rows.Next() {
		var r taskRow
		if err := r.scan(rows); err != nil {
			return nil, fmt.Errorf("listing failures of rollout %s: %w", uid, unavailable(err))
		}
		t, err := r.toDomain()
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing failures of rollout %s: %w", uid, unavailable(err))
	}
	return out, nil
}
