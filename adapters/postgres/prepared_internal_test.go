package postgres

import (
	"reflect"
	"strings"
	"testing"
)

// A repository whose statements did not all prepare is not handed out: its
// constructor answers an error naming it, and no repository.
func TestRepositoriesAreNotHandedOutHalfPrepared(t *testing.T) {
	for what, build := range map[string]func() (any, error){
		"device repository":   func() (any, error) { return NewDeviceRepository(nil) },
		"firmware repository": func() (any, error) { return NewFirmwareRepository(nil) },
		"fleet reader":        func() (any, error) { return NewFleetReader(nil) },
		"rollout repository":  func() (any, error) { return NewRolloutRepository(nil) },
		"task repository":     func() (any, error) { return NewTaskRepository(nil) },
	} {
		r, err := build()
		if err == nil || !strings.HasPrefix(err.Error(), what+": ") {
			t.Errorf("%s without a pool: error %v, want one naming it", what, err)
		}
		if !reflect.ValueOf(r).IsNil() {
			t.Errorf("%s without a pool: handed out %v", what, r)
		}
	}
}
