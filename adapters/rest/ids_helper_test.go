package rest

import "github.com/ai-device/ota/domain"

// asUUID types an id as pathUUID does: an id that is not a UUID becomes
// the zero UUID, which the stores answer with domain.ErrNotFound.
func asUUID(s string) domain.UUID {
	id, _ := domain.ParseUUID("id", s)
	return id
}

// asDeviceID types a device id as pathDeviceID does; an id that breaks the
// rule becomes the zero DeviceID.
func asDeviceID(s string) domain.DeviceID {
	id, _ := domain.ParseDeviceID(s)
	return id
}
