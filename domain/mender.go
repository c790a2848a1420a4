package domain

import (
	"strings"
	"time"
	"unicode"
)

// MaxArtifactNameLen bounds a firmware's artifact name (Mender's artifact
// names are short, such as "release-1.4.0").
const MaxArtifactNameLen = 256

// ValidateArtifactName accepts an optional artifact name: empty, or 1–256
// characters of valid UTF-8 without control characters and without leading
// or trailing spaces (a Mender device reports it back verbatim, and the
// match is exact).
func ValidateArtifactName(s string) error {
	if s == "" {
		return nil
	}
	if err := ValidateText("artifact_name", s, MaxArtifactNameLen); err != nil {
		return err
	}
	if strings.TrimSpace(s) != s || strings.IndexFunc(s, unicode.IsControl) >= 0 {
		return invalid("artifact_name", "must not have control characters or leading or trailing spaces")
	}
	return nil
}

// ArtifactName is the name Mender devices know this image by ("" if the
// firmware was published without one).
func (f Firmware) ArtifactName() string { return f.artifactName }

// CheckArtifactDeliverable returns ErrNotDeliverable for a firmware without
// an artifact name: a Mender device compares the offered name with the one
// it runs, so an image without one cannot be offered to it.
func (f Firmware) CheckArtifactDeliverable() error {
	if f.artifactName != "" {
		return nil
	}
	return &TransitionError{Kind: ErrNotDeliverable,
		Detail: "firmware " + f.version.String() + " has no artifact_name, which Mender devices need"}
}

// LowestVersion sorts below every version a firmware can have (0.0.0-0 is
// the least Semantic Versioning precedence; a firmware published as exactly
// 0.0.0-0 is equal to it, not above it).
var LowestVersion = Version{raw: "0.0.0-0"}

// RunningVersion is the version a device runs when it names its software
// by artifact name (Mender): the version of the firmware of its model
// published under that name. A name no firmware carries (nil) — the image
// the device left the factory with, or one published elsewhere — counts as
// LowestVersion: below every version, so the newest eligible firmware is
// offered, except firmware that sets a min_source_version (the device's
// source is unknown, so it is not known to be at or above it).
func RunningVersion(named *Firmware) Version {
	if named == nil {
		return LowestVersion
	}
	return named.version
}

// StopBeforeInstall cancels an active task whose device has not begun
// installing (pending, downloading or downloaded) when its firmware was
// revoked or its rollout cancelled, and reports whether it did. It is
// check rule 5 extended to the download phase, for protocols whose device
// asks the server before every step (Mender's status reports) and can
// therefore be stopped safely before it writes anything: from installing
// on, the device finishes what it started.
func (t *Task) StopBeforeInstall(fw Firmware, r Rollout, now time.Time) bool {
	switch t.status {
	case TaskPending, TaskDownloading, TaskDownloaded:
	default:
		return false
	}
	return t.stopWithdrawn(fw, r, now)
}

// StopBeforeStart cancels a task still pending — its device has reported
// nothing on it — when its firmware was revoked or its rollout cancelled,
// and reports whether it did. It is check rule 5 as it stands, for
// protocols whose device does not tell a download from an install
// (hawkBit DDI: SWUpdate streams the image into its installer and reports
// both as "proceeding", which maps to downloading): a task its device
// reported any progress on may be half-written already, so it finishes
// ("a started task always finishes").
func (t *Task) StopBeforeStart(fw Firmware, r Rollout, now time.Time) bool {
	if t.status != TaskPending {
		return false
	}
	return t.stopWithdrawn(fw, r, now)
}

// stopWithdrawn cancels t when its firmware was revoked
// (FIRMWARE_REVOKED) or its rollout cancelled (ROLLOUT_CANCELLED), and
// reports whether it did; the caller has judged that t may be stopped.
func (t *Task) stopWithdrawn(fw Firmware, r Rollout, now time.Time) bool {
	code, msg := "", ""
	switch {
	case fw.Revoked():
		code, msg = CodeFirmwareRevoked, "the firmware was revoked"
	case r.Status() == RolloutCancelled:
		code, msg = CodeRolloutCancelled, "the rollout was cancelled"
	default:
		return false
	}
	t.status, t.errorCode, t.errorMessage, t.updatedAt = TaskCancelled, code, msg, stamp(now)
	return true
}
