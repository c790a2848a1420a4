package postgres

import (
	"io/fs"
	"strings"
	"testing"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/migrations"
)

// The ON CONFLICT arbiter must be the partial unique index: its predicate
// must list exactly the domain's active statuses, as the migration does.
func TestActiveStatusSQL(t *testing.T) {
	quoted := make([]string, 0, len(domain.ActiveTaskStatuses))
	for _, s := range domain.ActiveTaskStatuses {
		quoted = append(quoted, "'"+s.String()+"'")
	}
	want := "status IN (" + strings.Join(quoted, ", ") + ")"
	if activeStatusSQL != want {
		t.Fatalf("activeStatusSQL = %s, want %s", activeStatusSQL, want)
	}
	b, err := fs.ReadFile(migrations.FS, "00001_init.sql")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "tasks_one_active_per_device ON tasks (device_id)\n    WHERE "+activeStatusSQL+";") {
		t.Fatalf("the migration's tasks_one_active_per_device predicate differs from %s", activeStatusSQL)
	}
}

func TestDescribeNeverShowsThePassword(t *testing.T) {
	for in, want := range map[DatabaseURL]string{
		"postgres://ota:s3cret@db.example:5432/ota?sslmode=disable": `database "ota" on db.example:5432`,
		"postgresql://db.example/fleet":                             `database "fleet" on db.example`,
		"host=db.example dbname=ota password=s3cret":                `database "ota" on db.example`,
		"postgres://": `database "(default)" on localhost`,
	} {
		if got := describe(in); got != want {
			t.Errorf("describe(%q) = %q, want %q", in, got, want)
		}
		if strings.Contains(in.String(), "s3cret") {
			t.Errorf("DatabaseURL.String() shows the password: %s", in.String())
		}
	}
}

func TestCanonicalUUID(t *testing.T) {
	for in, want := range map[string]string{
		"6F9619FF-8B86-D011-B42D-00C04FC964FF": "6f9619ff-8b86-d011-b42d-00c04fc964ff",
		"6f9619ff-8b86-d011-b42d-00c04fc964ff": "6f9619ff-8b86-d011-b42d-00c04fc964ff",
		"not-a-uuid":                           "",
		"":                                     "",
		"6f9619ff8b86d011b42d00c04fc964ff":     "",
		"6f9619ff-8b86-d011-b42d-00c04fc964f\x00": "",
	} {
		got, ok := canonicalUUID(in)
		if got != want || ok != (want != "") {
			t.Errorf("canonicalUUID(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
}
