// Package domain holds the OTA service's entities, value objects and rules:
// which firmware a device should run, when a task is reused or replaced, and
// how a device's progress events move a task. It does no I/O.
package domain

import (
	"errors"
	"fmt"
)

// Sentinel errors name the fixed conditions of the product contract. The HTTP
// edge maps each to one error code, so every layer wraps rather than replaces
// them.
var (
	// ErrNotFound means the thing asked for does not exist, or is not the
	// caller's to see (the two are deliberately indistinguishable).
	ErrNotFound = errors.New("not found")
	// ErrValidation is the root of every input rule violation; see ValidationError.
	ErrValidation = errors.New("validation failed")
	// ErrUnauthorized means no valid credentials were presented.
	ErrUnauthorized = errors.New("unauthorized")
	// ErrForbidden means valid credentials that do not reach this resource.
	ErrForbidden = errors.New("forbidden")
	// ErrDeviceExists means a device with that id is already registered.
	ErrDeviceExists = errors.New("device already exists")
	// ErrFirmwareExists means that (model, version) has already been published.
	ErrFirmwareExists = errors.New("firmware already exists")
	// ErrArtifactNameTaken means another firmware of the model has the
	// artifact name (a Mender device is matched to its firmware by it): a
	// firmware of that identity exists, so it is an ErrFirmwareExists,
	// told apart so that the answer names what collides.
	ErrArtifactNameTaken = fmt.Errorf("another firmware of this model has this artifact name: %w", ErrFirmwareExists)
	// ErrFirmwareRevoked means the firmware was revoked and may not be rolled out.
	ErrFirmwareRevoked = errors.New("firmware revoked")
	// ErrModelMismatch means a device reported a model other than its registered one.
	ErrModelMismatch = errors.New("model does not match the registered model")
	// ErrInvalidTransition means the requested state change is not allowed.
	ErrInvalidTransition = errors.New("invalid transition")
	// ErrTaskFinished means the task is over and the device should stop reporting on it.
	ErrTaskFinished = errors.New("task finished")
	// ErrIdempotencyConflict means an event id was reused with a different body.
	ErrIdempotencyConflict = errors.New("event id reused with a different body")
	// ErrRequestKeyConflict means an Idempotency-Key came with another
	// request than the one it was first used for (RequestKey.Repeats).
	ErrRequestKeyConflict = fmt.Errorf("an Idempotency-Key reused with another request: %w", ErrIdempotencyConflict)
	// ErrRequestKeyTaken is a store's word for a row whose Idempotency-Key
	// another row has: the use case then answers with that row.
	ErrRequestKeyTaken = errors.New("another row has this Idempotency-Key")
	// ErrServiceBusy means a dependency (the lock, Redis, Postgres) could not
	// serve the request in time; the caller should retry later.
	ErrServiceBusy = errors.New("service busy")
	// ErrArtifactStoreFull means the artifact store had no room left for an
	// upload (ENOSPC): nothing was kept. It is an ErrServiceBusy — the
	// operator's remedy, freeing space, is an outage's, and a retry then
	// succeeds — with its own words, so the uploader knows why.
	ErrArtifactStoreFull = fmt.Errorf("artifact store full: %w", ErrServiceBusy)
	// ErrArtifactStoreUnavailable means the artifact store failed
	// (unreachable, refusing): nothing was kept; an ErrServiceBusy.
	ErrArtifactStoreUnavailable = fmt.Errorf("artifact store unavailable: %w", ErrServiceBusy)
	// ErrRateLimited means the caller exceeded its request budget.
	ErrRateLimited = errors.New("rate limited")
	// ErrOfferWithdrawn means a task was not created because, by the time
	// it was to be stored, its firmware had been revoked or its rollout had
	// stopped being active. The check then answers as if the offer were
	// gone; it never reaches a caller.
	ErrOfferWithdrawn = errors.New("offer withdrawn")
)

// ValidationError says which field broke which rule. It unwraps to ErrValidation.
type ValidationError struct {
	Field  string
	Reason string
}

// Error renders the field and the rule in words safe to show a caller.
func (e *ValidationError) Error() string {
	if e.Field == "" {
		return e.Reason
	}
	return fmt.Sprintf("%s: %s", e.Field, e.Reason)
}

// Unwrap lets errors.Is(err, ErrValidation) match.
func (e *ValidationError) Unwrap() error { return ErrValidation }

func invalid(field, format string, args ...any) error {
	return &ValidationError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// TransitionError explains why a state change was refused. It unwraps to the
// sentinel given as Kind (ErrInvalidTransition or ErrTaskFinished).
type TransitionError struct {
	Kind   error
	Detail string
}

// Error renders the refusal in words safe to show a caller.
func (e *TransitionError) Error() string { return e.Detail }

// Unwrap exposes the sentinel kind.
func (e *TransitionError) Unwrap() error { return e.Kind }

func transition(kind error, format string, args ...any) error {
	return &TransitionError{Kind: kind, Detail: fmt.Sprintf(format, args...)}
}
