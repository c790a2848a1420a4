package domain_test

import (
	"crypto/md5"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ai-device/ota/domain"
)

// Shared fixtures for the domain tests.

const (
	rolloutA = "3f2504e0-4f89-41d3-9a0c-0305e82c3301"
	rolloutB = "9b1deb4d-3b7d-4bad-9bdd-2b0d7b3dcb6d"
	rolloutC = "c9bf9e57-1685-4c89-bafb-ff5af830be8a"
	rolloutD = "6ba7b810-9dad-11d1-80b4-00c04fd430c8"
)

var (
	// t0 is deliberately not UTC so tests can check that times are stored in UTC.
	t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.FixedZone("CET", 3600))
	t1 = t0.Add(time.Minute)

	goodSHA256 = strings.Repeat("ab", 32)
	goodSHA1   = strings.Repeat("0f", 20)
	goodMD5    = strings.Repeat("9e", 16)
)

func intp(v int) *int { return &v }

func validSpec() domain.FirmwareSpec {
	return domain.FirmwareSpec{
		Model:     "cam-x1",
		Version:   "1.2.0",
		URL:       "https://cdn.example.com/cam-x1/1.2.0.bin",
		SizeBytes: 1 << 20,
		SHA256:    goodSHA256,
	}
}

// mustFirmware publishes a released firmware of model at version, with an
// optional min_source_version ("" for none).
func mustFirmware(t *testing.T, id, model, version, minSource string) domain.Firmware {
	t.Helper()
	spec := validSpec()
	spec.Model, spec.Version, spec.MinSourceVersion = model, version, minSource
	fw, err := domain.NewFirmware(idOf(id), spec, t0)
	if err != nil {
		t.Fatalf("NewFirmware(%s %s): %v", model, version, err)
	}
	return fw
}

func revoked(fw domain.Firmware) domain.Firmware {
	fw.Revoke(t0)
	return fw
}

func mustRollout(t *testing.T, id string, fw domain.Firmware, spec domain.RolloutSpec, created time.Time) domain.Rollout {
	t.Helper()
	r, err := domain.NewRollout(idOf(id), fw, spec, created)
	if err != nil {
		t.Fatalf("NewRollout(%s): %v", id, err)
	}
	return r
}

func mustDevice(t *testing.T, id, model, version string) domain.Device {
	t.Helper()
	d, err := domain.NewDevice(asDeviceID(id), model, version, domain.HashToken("tok-"+id), t0)
	if err != nil {
		t.Fatalf("NewDevice(%s): %v", id, err)
	}
	return d
}

func mustEvent(t *testing.T, id, status string, progress *int, code, msg string) domain.Event {
	t.Helper()
	ev, err := domain.NewEvent(id, status, progress, code, msg)
	if err != nil {
		t.Fatalf("NewEvent(%s, %s): %v", id, status, err)
	}
	return ev
}

func taskIn(st domain.TaskStatus, progress int) domain.Task {
	return domain.RehydrateTask(domain.TaskRecord{
		ID: "5c0c6f3e-4a5b-4c53-9d3e-4f1d7f9e0a11", ActionID: 7, DeviceID: "cam-0001",
		FirmwareID: idOf("fw-1").String(), RolloutID: rolloutA, Status: st, Progress: progress, Attempt: 1,
		CreatedAt: t0.UTC(), UpdatedAt: t0.UTC(),
	})
}

// wantValidation fails unless err is a *domain.ValidationError for field
// that also matches domain.ErrValidation.
func wantValidation(t *testing.T, err error, field string) {
	t.Helper()
	if err == nil {
		t.Fatalf("want validation error on %q, got nil", field)
	}
	if !errors.Is(err, domain.ErrValidation) {
		t.Fatalf("want errors.Is(err, ErrValidation), got %v", err)
	}
	var ve *domain.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("want *ValidationError, got %T: %v", err, err)
	}
	if ve.Field != field {
		t.Fatalf("want field %q, got %q (%v)", field, ve.Field, err)
	}
	if ve.Reason == "" || err.Error() == "" {
		t.Fatalf("validation error on %q has no reason", field)
	}
}

// asDeviceID types a device id as an edge does: parsed once; an id that
// breaks the rule becomes the zero DeviceID, which constructors refuse.
func asDeviceID(s string) domain.DeviceID {
	id, _ := domain.ParseDeviceID(s)
	return id
}

// taskA is a task id for tests that build tasks with NewTask.
const taskA = "7c9e6679-7425-40de-944b-e07fc1f90ae7"

// idOf types a test's label for a firmware, rollout or request: a label
// that is a UUID is parsed as an edge would; any other ("fw-120") names a
// fixed UUID derived from it, so that tests keep their readable labels.
func idOf(label string) domain.UUID {
	if id, err := domain.ParseUUID("id", label); err == nil {
		return id
	}
	return domain.UUIDOf(md5.Sum([]byte(label)))
}

// byLabel keys failure counts by the ids idOf gives the labels, as a
// store keys them by firmware id.
func byLabel(failed map[string]int) map[string]int {
	out := make(map[string]int, len(failed))
	for label, n := range failed {
		out[idOf(label).String()] = n
	}
	return out
}

// asUUID types an id as an edge does: parsed once; an id that is not a
// UUID becomes the zero UUID.
func asUUID(s string) domain.UUID {
	id, _ := domain.ParseUUID("id", s)
	return id
}
