package memory

import (
	"context"
	"time"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// Fleet is the in-memory application.FleetReader over a Store: the aggregates of
// the operator's views, computed under the store's mutex so that each
// answer is one consistent snapshot, as one Postgres statement is.
type Fleet struct{ s *Store }

// NewFleet returns the fleet reader of s.
func NewFleet(s *Store) *Fleet { return &Fleet{s: s} }

// DefaultRolloutLimit is how many rollouts ListRollouts returns when the
// filter sets no limit, the same as the Postgres adapter's.
const DefaultRolloutLimit = 100

// ListRollouts returns rollouts newest first (created_at, then id, both
// descending), each with its firmware's model and version and its task
// counts.
func (r *Fleet) ListRollouts(ctx context.Context, f ports.RolloutFilter) ([]ports.RolloutSummary, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s := r.s
	s.mu.Lock()
	out := []ports.RolloutSummary{}
	for id, ro := range s.rollouts {
		fw := s.firmwares[ro.FirmwareID().String()]
		if f.Model != "" && fw.Model() != f.Model {
			continue
		}
		out = append(out, ports.RolloutSummary{
			Rollout: cloneRollout(ro), Model: fw.Model(), Version: fw.Version().String(),
			Stats: s.rolloutStatsLocked(id, time.Time{}),
		})
	}
	s.mu.Unlock()
	return page(out, f.Limit, DefaultRolloutLimit, func(a, b ports.RolloutSummary) bool {
		return newer(a.Rollout.CreatedAt(), b.Rollout.CreatedAt(), a.Rollout.ID().String(), b.Rollout.ID().String())
	}), nil
}

// VersionCounts counts devices by (model, current version as stored).
func (r *Fleet) VersionCounts(ctx context.Context, q ports.VersionCountQuery) ([]ports.VersionCount, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// Instants at the store's precision, as the Postgres adapter compares.
	hourAgo, dayAgo := stamp(q.HourAgo), stamp(q.DayAgo)
	type key struct{ model, version string }
	counts := map[key]*ports.VersionCount{}
	s := r.s
	s.mu.Lock()
	for _, d := range s.devices {
		if q.Model != "" && d.Model() != q.Model {
			continue
		}
		k := key{d.Model(), d.CurrentVersion().String()}
		c := counts[k]
		if c == nil {
			c = &ports.VersionCount{Model: k.model, Version: k.version}
			counts[k] = c
		}
		c.Devices++
		if seen := d.LastSeenAt(); !seen.IsZero() {
			if !seen.Before(hourAgo) {
				c.SeenSinceHour++
			}
			if !seen.Before(dayAgo) {
				c.SeenSinceDay++
			}
		}
	}
	s.mu.Unlock()
	out := make([]ports.VersionCount, 0, len(counts))
	for _, c := range counts {
		out = append(out, *c)
	}
	return out, nil
}

// RecentFailures returns a rollout's failed tasks, most recently failed
// first (updated_at, then id, descending), at most limit.
func (r *Fleet) RecentFailures(ctx context.Context, rolloutID domain.UUID, limit int) ([]domain.Task, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := []domain.Task{}
	key, ok := rolloutID.String(), !rolloutID.IsZero()
	if !ok || limit <= 0 {
		return out, nil
	}
	s := r.s
	s.mu.Lock()
	for _, id := range s.byRollout[key] {
		if t := s.tasks[id]; t.Status() == domain.TaskFailed {
			out = append(out, t)
		}
	}
	s.mu.Unlock()
	return page(out, limit, 0, func(a, b domain.Task) bool {
		return newer(a.UpdatedAt(), b.UpdatedAt(), a.ID().String(), b.ID().String())
	}), nil
}
