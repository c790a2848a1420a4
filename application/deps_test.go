package application_test

import (
	"testing"
	"time"

	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/tests/testenv"
)

// TestDepsRequireTheTargetingStores: the attribute and tag stores are
// required like every other port, so a check reporting attributes or an
// operator's device view can never meet a missing store at a request.
func TestDepsRequireTheTargetingStores(t *testing.T) {
	t.Parallel()
	full := testenv.NewMemoryService(t, testenv.MemoryOptions{}).Deps
	if _, err := application.NewDevices(full, application.PollInterval(time.Hour)); err != nil {
		t.Fatalf("every port given: %v", err)
	}
	for name, drop := range map[string]func(*application.Deps){
		"attributes": func(d *application.Deps) { d.Attributes = nil },
		"directory":  func(d *application.Deps) { d.Directory = nil },
		"tasks":      func(d *application.Deps) { d.Tasks = nil },
	} {
		deps := full
		drop(&deps)
		if _, err := application.NewDevices(deps, application.PollInterval(time.Hour)); err == nil {
			t.Errorf("devices without %s: built, want an error", name)
		}
		if _, err := application.NewAdmin(deps); err == nil {
			t.Errorf("admin without %s: built, want an error", name)
		}
	}
}
