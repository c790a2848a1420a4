package ports

import "github.com/ai-device/ota/domain"

// RegisteredDevice is a registered device as an auth request for its id
// is judged (domain.AuthRequest.ConflictWith): its model and its
// admission, if it has one.
type RegisteredDevice struct {
	Model     string
	Admission *domain.DeviceAdmission
}
