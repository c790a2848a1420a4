package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestBadFlagValuesAreUsageErrorsBeforeTheDatabase: docs/CONFIGURATION.md
// "a bad flag or command exits 2, a failure 1". A flag value out of its
// range is a bad flag: it must be refused as such — exit 2, naming the
// flag, with the usage — and before anything connects, so that an
// operator is told what they typed wrong rather than, with the database
// down, only that Postgres cannot be reached (or, with it up, exit 1
// after `users create` has migrated the database).
func TestBadFlagValuesAreUsageErrorsBeforeTheDatabase(t *testing.T) {
	env := map[string]string{"OTA_DATABASE_URL": "postgres://postgres@" + deadPort(t) + "/ota?sslmode=disable",
		"OTA_NEW_USER_PASSWORD": "a good long password"}
	for _, c := range []struct {
		args []string
		flag string
	}{
		{[]string{"partitions", "--ahead", "-1"}, "ahead"},
		{[]string{"partitions", "--ahead", "500"}, "ahead"},
		{[]string{"users", "create", "--username", "alice", "--role", "superuser"}, "role"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), c.args, func(k string) string { return env[k] }, &stdout, &stderr)
		if code != 2 || !strings.Contains(stderr.String(), c.flag) {
			t.Errorf("otad %s: exit %d, stderr %q; want 2 naming %s", strings.Join(c.args, " "), code, strings.TrimSpace(stderr.String()), c.flag)
		}
	}
}
