package contract

import "github.com/ai-device/ota/domain"

// asUUID types an id as an edge does (adapters/rest pathUUID): parsed
// once; an id that is not a UUID becomes the zero UUID, which the stores
// answer with domain.ErrNotFound. The suites pass ids they got back from
// the stores, and deliberately bad ones, through it.
func asUUID(s string) domain.UUID {
	id, _ := domain.ParseUUID("id", s)
	return id
}

// asDeviceID types a device id as an edge does (domain.ParseDeviceID):
// parsed once; an id that breaks the rule becomes the zero DeviceID, which
// the stores answer as no device.
func asDeviceID(s string) domain.DeviceID {
	id, _ := domain.ParseDeviceID(s)
	return id
}
