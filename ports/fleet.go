package ports

import (
	"context"
	"time"

	"github.com/ai-device/ota/domain"
)

// RolloutSummary is one row of the rollout listing: the rollout, what it
// rolls out, and its tasks counted by status.
type RolloutSummary struct {
	Rollout domain.Rollout
	// Model and Version are the firmware's (the version as published,
	// build metadata included).
	Model   string
	Version string
	Stats   domain.TaskStats
}

// RolloutFilter selects rollouts for the listing. Empty fields match all.
type RolloutFilter struct {
	Model string
	// Limit caps the rows returned, newest first (the store's default when 0).
	Limit int
}

// VersionCount is how many devices of a model report one version, and how
// many of them polled since two instants.
type VersionCount struct {
	Model string
	// Version is as last reported ("" for devices that never reported one).
	Version string
	Devices int
	// SeenSinceHour and SeenSinceDay count the devices whose last poll is at
	// or after the query's HourAgo and DayAgo.
	SeenSinceHour int
	SeenSinceDay  int
}

// VersionCountQuery selects the devices counted by VersionCounts.
type VersionCountQuery struct {
	// Model restricts the counts to one model ("" for every model).
	Model   string
	HourAgo time.Time
	DayAgo  time.Time
}

// Count adds to c, the count of its model and version, one device last
// seen at lastSeen (zero: never), as the query counts it: for a store
// that counts in Go rather than in SQL.
func (q VersionCountQuery) Count(c VersionCount, lastSeen time.Time) VersionCount {
	c.Devices++
	if !lastSeen.IsZero() && !lastSeen.Before(q.HourAgo) {
		c.SeenSinceHour++
	}
	if !lastSeen.IsZero() && !lastSeen.Before(q.DayAgo) {
		c.SeenSinceDay++
	}
	return c
}

// RolloutQuery is the rollout listing's filter, as received.
type RolloutQuery struct {
	Model string
	Limit string
}

// VersionShare is how many devices of a model run one version.
type VersionShare struct {
	// Version is as reported; "" stands for devices that never reported one.
	Version string
	Devices int
}

// ModelFleet is a model's fleet at a glance.
type ModelFleet struct {
	Model   string
	Devices int
	// PolledLastHour and PolledLastDay count devices by their last poll.
	PolledLastHour int
	PolledLastDay  int
	// NewestVersion is the newest released firmware of the model ("" when
	// none is released); OnNewest counts the devices that run it.
	NewestVersion string
	OnNewest      int
	// Versions lists the versions devices run, newest first, devices that
	// never reported a version last.
	Versions []VersionShare
}

// FleetService is what operators can see of the fleet beyond single
// resources: the rollout listing, a rollout's recent failures, and the
// per-model picture of who runs what.
type FleetService interface {
	// ListRollouts lists rollouts newest first with their task counts.
	ListRollouts(ctx context.Context, q RolloutQuery) ([]RolloutSummary, error)
	// RecentFailures returns a rollout's most recently failed tasks
	// (limit as received: default 50, at most 500); domain.ErrNotFound for
	// an unknown rollout.
	RecentFailures(ctx context.Context, rolloutID domain.UUID, limit string) ([]TaskView, error)
	// FleetOverview summarises every model's fleet (one model's when model
	// is not ""), models in name order.
	FleetOverview(ctx context.Context, model string) ([]ModelFleet, error)
}
