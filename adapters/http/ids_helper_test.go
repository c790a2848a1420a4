package http

import "github.com/ai-device/ota/domain"

// asUUID types an id as pathUUID does: an id that is not a UUID becomes
// the zero UUID, which the stores answer with domain.ErrNotFound.
func asUUID(s string) domain.UUID {
	id, _ := domain.ParseUUID("id", s)
	return id
}
