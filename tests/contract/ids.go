package contract

import "github.com/ai-device/ota/domain"

// asUUID types an id as an edge does (adapters/http pathUUID): parsed
// once; an id that is not a UUID becomes the zero UUID, which the stores
// answer with domain.ErrNotFound. The suites pass ids they got back from
// the stores, and deliberately bad ones, through it.
func asUUID(s string) domain.UUID {
	id, _ := domain.ParseUUID("id", s)
	return id
}
