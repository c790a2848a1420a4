package domain_test

import (
	"errors"
	"testing"

	"github.com/ai-device/ota/domain"
)

// The enums' refusals name the values they accept, as operators read them
// in the API's error body.
func TestEnumRefusalNamesTheValues(t *testing.T) {
	cases := []struct {
		parse func(string) error
		want  string
	}{
		{func(s string) error { _, err := domain.ParseFirmwareStatus(s); return err }, "must be released or revoked"},
		{func(s string) error { _, err := domain.ParseRolloutStatus(s); return err }, "must be active, paused or cancelled"},
		{func(s string) error { _, err := domain.ParseAttributeMode(s); return err }, "must be merge, replace or remove"},
		{func(s string) error { _, err := domain.ParseTaskStatus(s); return err },
			"must be one of pending, downloading, downloaded, installing, succeeded, failed, cancelled"},
	}
	for _, c := range cases {
		var v *domain.ValidationError
		if err := c.parse("bogus"); !errors.As(err, &v) || v.Reason != c.want {
			t.Errorf("refusal %v, want reason %q", err, c.want)
		}
	}
	if s, err := domain.ParseTaskStatus("failed"); err != nil || s != domain.TaskFailed {
		t.Errorf("domain.ParseTaskStatus(failed) = %v, %v", s, err)
	}
}
