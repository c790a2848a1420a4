package memory

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// Fleet is the in-memory ports.FleetReader over a Store: each answer is
// computed under the store's lock, one consistent snapshot.
type Fleet struct{ s *Store }

var _ ports.FleetReader = (*Fleet)(nil)

func NewFleet(s *Store) *Fleet { return &Fleet{s: s} }

// DefaultRolloutLimit is how many rollouts ListRollouts returns when the
// filter sets no limit, the same as the Postgres adapter's.
const DefaultRolloutLimit = 100

// ListRollouts returns rollouts newest first, each with its firmware's
// model and version and its task counts.
func (r *Fleet) ListRollouts(ctx context.Context, f ports.RolloutFilter) ([]ports.RolloutSummary, error) {
	return locked(ctx, r.s, func() ([]ports.RolloutSummary, error) {
		out := []ports.RolloutSummary{}
		for id, ro := range r.s.rollouts {
			if fw := r.s.firmwares[ro.FirmwareID().String()]; f.Model == "" || fw.Model() == f.Model {
				out = append(out, ports.RolloutSummary{Rollout: cloneRollout(ro), Model: fw.Model(), Version: fw.Version().String(),
					Stats: r.s.rolloutStats(id, time.Time{})})
			}
		}
		return page(out, f.Limit, DefaultRolloutLimit, func(a, b ports.RolloutSummary) bool {
			return newer(a.Rollout.CreatedAt(), b.Rollout.CreatedAt(), a.Rollout.ID().String(), b.Rollout.ID().String())
		}), nil
	})
}

// VersionCounts counts devices by (model, current version as stored).
func (r *Fleet) VersionCounts(ctx context.Context, q ports.VersionCountQuery) ([]ports.VersionCount, error) {
	hourAgo, dayAgo := stamp(q.HourAgo), stamp(q.DayAgo)
	since := func(seen, t time.Time) int {
		if seen.IsZero() || seen.Before(t) {
			return 0
		}
		return 1
	}
	return locked(ctx, r.s, func() ([]ports.VersionCount, error) {
		counts := map[[2]string]ports.VersionCount{}
		for _, d := range r.s.devices {
			if k := [2]string{d.Model(), d.CurrentVersion().String()}; q.Model == "" || d.Model() == q.Model {
				c := counts[k]
				counts[k] = ports.VersionCount{Model: k[0], Version: k[1], Devices: c.Devices + 1,
					SeenSinceHour: c.SeenSinceHour + since(d.LastSeenAt(), hourAgo), SeenSinceDay: c.SeenSinceDay + since(d.LastSeenAt(), dayAgo)}
			}
		}
		return slices.AppendSeq([]ports.VersionCount{}, maps.Values(counts)), nil
	})
}

// RecentFailures returns a rollout's failed tasks, most recently failed
// first, at most limit.
func (r *Fleet) RecentFailures(ctx context.Context, rolloutID domain.UUID, limit int) ([]domain.Task, error) {
	return locked(ctx, r.s, func() ([]domain.Task, error) {
		out := where(r.s.tasks, func(t domain.Task) bool {
			return !rolloutID.IsZero() && t.RolloutID().String() == rolloutID.String() && t.Status() == domain.TaskFailed
		})
		return page(out, max(limit, 0), 0, func(a, b domain.Task) bool {
			return newer(a.UpdatedAt(), b.UpdatedAt(), a.ID().String(), b.ID().String())
		}), nil
	})
}
