package application_test

import (
	"testing"

	"github.com/ai-device/ota/application"
)

// TestEndsTaskIsTheDomainsFinalStatus: the DDI and Mender event paths
// decide "final" by TaskStatus.IsFinal, not by their own list of names.
func TestEndsTaskIsTheDomainsFinalStatus(t *testing.T) {
	for status, want := range map[string]bool{
		"succeeded": true, "failed": true, "cancelled": true,
		"pending": false, "downloading": false, "downloaded": false, "installing": false,
		"": false, "done": false,
	} {
		if got := application.EndsTask(status); got != want {
			t.Errorf("EndsTask(%q) = %v, want %v", status, got, want)
		}
	}
}
