package cluster

import "github.com/ai-device/ota/domain"

// asDeviceID types a device id as an edge does: parsed once; an id that
// breaks the rule becomes the zero DeviceID, which names no device.
func asDeviceID(s string) domain.DeviceID {
	id, _ := domain.ParseDeviceID(s)
	return id
}
