// Package ports holds only what the core owns and shares: the clock, ids,
// the lock, metrics and rate limits; the stores several use cases share
// (devices, firmware, rollouts, device attributes) and the task
// transaction's primitives (TaskTx); the records the store adapters hand
// back, which they must name and so cannot take from package application;
// and the use-case interfaces the edges call. A store interface only one
// use case calls is declared next to that use case
// (application.CheckStore, application.FleetReader, ddi.TaskActions,
// mender.AuthRequests and the like), and a device protocol's words live
// with its use cases (application/ddi, application/mender). Adapters
// implement them structurally.
package ports

import (
	"context"
	"time"

	"github.com/ai-device/ota/domain"
)

// Locker runs a function while holding a named distributed lock.
//
// WithLock waits for the lock at most the adapter's bounded wait; when the
// lock cannot be had in that time, or the lock service cannot be reached, it
// returns a *BusyError (errors.Is(err, domain.ErrServiceBusy)) without calling
// fn. fn receives a context that is cancelled when the lock is lost, so work
// bound to it (a database transaction) rolls back instead of committing
// without the lock; such a loss is reported as a BusyError with reason
// LockLost. Releasing is owner-checked and never fails the call: the lock's
// validity bounds a release that did not happen.
type Locker interface {
	WithLock(ctx context.Context, name string, fn func(ctx context.Context) error) error
}

// Reasons a lock could not serve a request, as reported in BusyError and metrics.
const (
	LockTimeout     = "timeout"     // held by someone else for the whole wait
	LockUnavailable = "unavailable" // the lock service could not be reached
	LockLost        = "lost"        // the lock expired or was taken while fn ran
)

// BusyError reports why a lock-guarded call was refused. It matches both
// domain.ErrServiceBusy and the underlying cause with errors.Is.
type BusyError struct {
	Reason string
	Err    error
}

// Error names the reason without internal detail.
func (e *BusyError) Error() string {
	if e.Err != nil {
		return "lock " + e.Reason + ": " + e.Err.Error()
	}
	return "lock " + e.Reason
}

// Unwrap matches domain.ErrServiceBusy and the cause.
func (e *BusyError) Unwrap() []error {
	if e.Err == nil {
		return []error{domain.ErrServiceBusy}
	}
	return []error{domain.ErrServiceBusy, e.Err}
}

// LockMetrics receives what a Locker observes, for dashboards. A nil
// LockMetrics is never passed to adapters; use NopLockMetrics.
type LockMetrics interface {
	// LockAcquired records how long the caller waited for a lock it got.
	LockAcquired(wait time.Duration)
	// LockFailed records a refused or lost lock by reason (LockTimeout, ...).
	LockFailed(reason string)
}

// NopLockMetrics discards lock observations.
type NopLockMetrics struct{}

// LockAcquired discards the observation.
func (NopLockMetrics) LockAcquired(time.Duration) {}

// LockFailed discards the observation.
func (NopLockMetrics) LockFailed(string) {}
