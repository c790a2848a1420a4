package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/ai-device/ota/tests/testenv"
)

// TestRolloutsVerifyOfAnUnknownRolloutSaysSo: `otad rollouts verify
// --rollout ID` checks one rollout (docs/CONFIGURATION.md: exit 0 "with
// `the counters of N rollouts match their tasks`", 1 on drift). An id
// that names no rollout — a typo, or the firmware's id pasted instead —
// recounts nothing; answering "the counters of 0 rollouts match their
// tasks" and exit 0 tells the operator the rollout they asked about is
// sound when nothing was checked at all.
func TestRolloutsVerifyOfAnUnknownRolloutSaysSo(t *testing.T) {
	db, dbURL := testenv.PostgresDB(t)
	seedRollout(t, db, false)
	var stdout, stderr bytes.Buffer
	env := map[string]string{"OTA_DATABASE_URL": dbURL}
	unknown := uuid.NewString()
	code := run(context.Background(), []string{"rollouts", "verify", "--rollout", unknown}, func(k string) string { return env[k] }, &stdout, &stderr)
	out := stdout.String() + stderr.String()
	if code != 1 || strings.Contains(out, "match their tasks") || !strings.Contains(out, "not found") {
		t.Fatalf("verify --rollout %s (no such rollout): exit %d, %q; want a failure saying there is no such rollout", unknown, code, out)
	}
}
