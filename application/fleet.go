package application

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// Fleet implements ports.FleetService: the operators' views across many
// resources (the rollout listing, a rollout's recent failures, who runs
// what), read through a FleetReader.
type Fleet struct {
	reader    FleetReader
	firmwares ports.FirmwareRepository
	rollouts  ports.RolloutRepository
	clock     ports.Clock
}

var _ ports.FleetService = (*Fleet)(nil)

// FleetReader is the read side the operator's fleet views need beyond the
// repositories: aggregates the store computes in one query rather than
// row by row. It is read-only, so every adapter may answer from a replica.
type FleetReader interface {
	// ListRollouts returns rollouts newest first (created_at, then id), each
	// with its firmware's model and version and its task counts.
	ListRollouts(ctx context.Context, f ports.RolloutFilter) ([]ports.RolloutSummary, error)
	// VersionCounts counts devices by (model, current version), in no
	// particular order.
	VersionCounts(ctx context.Context, q ports.VersionCountQuery) ([]ports.VersionCount, error)
	// RecentFailures returns a rollout's failed tasks, the most recently
	// failed first (updated_at, then id, descending), at most limit. An
	// unknown rollout has none.
	RecentFailures(ctx context.Context, rolloutID domain.UUID, limit int) ([]domain.Task, error)
}

// NewFleet builds the fleet views on reader, with the firmware and rollouts
// they resolve and the clock that says what "the last hour" is.
func NewFleet(reader FleetReader, firmwares ports.FirmwareRepository, rollouts ports.RolloutRepository, clock ports.Clock) (*Fleet, error) {
	if reader == nil {
		return nil, errors.New("application: the fleet reader is required")
	}
	if err := required(firmwares, rollouts, clock); err != nil {
		return nil, err
	}
	return &Fleet{reader: reader, firmwares: firmwares, rollouts: rollouts, clock: clock}, nil
}

// Listing bounds: a screenful of rollouts, the rollout page's 50 failures.
const (
	defaultRolloutLimit = 100
	maxRolloutLimit     = 500
	defaultFailureLimit = 50
	maxFailureLimit     = 500
)

// ListRollouts lists rollouts newest first with their firmware's model and
// version and their task counts.
func (f *Fleet) ListRollouts(ctx context.Context, q ports.RolloutQuery) ([]ports.RolloutSummary, error) {
	if q.Model != "" {
		if err := domain.ValidateIdentifier("model", q.Model); err != nil {
			return nil, err
		}
	}
	limit, err := parseLimit(q.Limit, defaultRolloutLimit, maxRolloutLimit)
	if err != nil {
		return nil, err
	}
	list, err := f.reader.ListRollouts(ctx, ports.RolloutFilter{Model: q.Model, Limit: limit})
	if err != nil {
		return nil, fmt.Errorf("listing rollouts: %w", err)
	}
	return list, nil
}

// RecentFailures returns a rollout's most recently failed tasks with the
// firmware they install, so an operator sees the error codes a bad image
// produces before (or after) the rollout pauses itself.
func (f *Fleet) RecentFailures(ctx context.Context, rolloutID domain.UUID, limit string) ([]ports.TaskView, error) {
	n, err := parseLimit(limit, defaultFailureLimit, maxFailureLimit)
	if err != nil {
		return nil, err
	}
	if _, err := f.rollouts.Get(ctx, rolloutID); err != nil {
		return nil, fmt.Errorf("loading rollout: %w", err)
	}
	tasks, err := f.reader.RecentFailures(ctx, rolloutID, n)
	if err != nil {
		return nil, fmt.Errorf("listing failures: %w", err)
	}
	known := map[domain.UUID]domain.Firmware{}
	out := make([]ports.TaskView, 0, len(tasks))
	for _, t := range tasks {
		v, err := taskView(ctx, f.firmwares, known, t)
		if err != nil {
			return nil, fmt.Errorf("loading firmware of task %s: %w", t.ID(), err)
		}
		out = append(out, v)
	}
	return out, nil
}

// FleetOverview summarises each model's fleet: devices per version (build
// metadata ignored, as for firmware identity), how many polled in the last
// hour and day, and how many run the newest released firmware. Models with
// released firmware but no devices are listed too.
func (f *Fleet) FleetOverview(ctx context.Context, model string) ([]ports.ModelFleet, error) {
	if model != "" {
		if err := domain.ValidateIdentifier("model", model); err != nil {
			return nil, err
		}
	}
	now := f.clock.Now()
	counts, err := f.reader.VersionCounts(ctx, ports.VersionCountQuery{
		Model: model, HourAgo: now.Add(-time.Hour), DayAgo: now.Add(-24 * time.Hour),
	})
	if err != nil {
		return nil, fmt.Errorf("counting devices by version: %w", err)
	}
	firmwares, err := f.firmwares.List(ctx, model)
	if err != nil {
		return nil, fmt.Errorf("listing firmware: %w", err)
	}

	type versionKey struct{ model, key string }
	byModel := map[string]*ports.ModelFleet{}
	versions := map[versionKey]*ports.VersionShare{}
	parsed := map[versionKey]domain.Version{}
	fleetOf := func(m string) *ports.ModelFleet {
		mf := byModel[m]
		if mf == nil {
			mf = &ports.ModelFleet{Model: m}
			byModel[m] = mf
		}
		return mf
	}
	newest := map[string]domain.Version{}
	for _, fw := range firmwares {
		if fw.Revoked() {
			continue
		}
		if cur, ok := newest[fw.Model()]; !ok || cur.Less(fw.Version()) {
			newest[fw.Model()] = fw.Version()
		}
		fleetOf(fw.Model())
	}
	for _, c := range counts {
		mf := fleetOf(c.Model)
		mf.Devices += c.Devices
		mf.PolledLastHour += c.SeenSinceHour
		mf.PolledLastDay += c.SeenSinceDay
		var v domain.Version
		if c.Version != "" {
			if v, err = domain.ParseVersion("current_version", c.Version); err != nil {
				return nil, fmt.Errorf("devices of model %q report a corrupt version: %w", c.Model, err)
			}
		}
		k := versionKey{c.Model, v.Key()}
		share := versions[k]
		if share == nil {
			share = &ports.VersionShare{Version: v.Key()}
			versions[k] = share
			parsed[k] = v
		}
		share.Devices += c.Devices
		if n, ok := newest[c.Model]; ok && !v.IsZero() && v.Equal(n) {
			mf.OnNewest += c.Devices
		}
	}
	for k, share := range versions {
		byModel[k.model].Versions = append(byModel[k.model].Versions, *share)
	}
	out := make([]ports.ModelFleet, 0, len(byModel))
	for m, mf := range byModel {
		if n, ok := newest[m]; ok {
			mf.NewestVersion = n.String()
		}
		sort.Slice(mf.Versions, func(i, j int) bool {
			a, b := parsed[versionKey{m, mf.Versions[i].Version}], parsed[versionKey{m, mf.Versions[j].Version}]
			return b.Less(a) // newest first; the zero version (never reported) sorts last
		})
		out = append(out, *mf)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Model < out[j].Model })
	return out, nil
}

// parsePage reads a listing's page size (def when not given, at most max)
// and its opaque cursor (nil when not given), which decode reads.
func parsePage[C any](limit, after string, def, max int, decode func(string) (C, error)) (int, *C, error) {
	n, err := parseLimit(limit, def, max)
	if err != nil || after == "" {
		return n, nil, err
	}
	c, err := decode(after)
	if err != nil {
		return n, nil, err
	}
	return n, &c, nil
}

// listPage lists one page of at most *limit items. It asks list for one
// more than that, which tells whether there is a next page; then next
// names the position after the page's last item. *limit is left one more.
func listPage[T any](limit *int, list func() ([]T, error), next func(last T) string) ([]T, string, error) {
	want := *limit
	*limit = want + 1
	items, err := list()
	if err != nil || len(items) <= want {
		return items, "", err
	}
	items = items[:want]
	return items, next(items[want-1]), nil
}

// parseLimit reads a listing's page size as received ("" for the default).
func parseLimit(s string, def, max int) (int, error) {
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > max {
		return 0, &domain.ValidationError{Field: "limit", Reason: fmt.Sprintf("must be an integer from 1 to %d", max)}
	}
	return n, nil
}
