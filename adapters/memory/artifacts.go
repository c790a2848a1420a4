package memory

import (
	"context"

	"github.com/ai-device/ota/domain"
)

// Artifacts is ports.ArtifactRepository over a Store (with the firmwares).
type Artifacts struct{ s *Store }

// NewArtifacts returns the artifact repository of s.
func NewArtifacts(s *Store) *Artifacts { return &Artifacts{s: s} }

// Create stores a, or returns the artifact already stored with its sha256.
func (r *Artifacts) Create(ctx context.Context, a domain.Artifact) (domain.Artifact, bool, error) {
	a = domain.RehydrateArtifact(a.ID().String(), a.FileName(), a.Digest(), a.Meta(), stamp(a.CreatedAt()))
	type created struct {
		a   domain.Artifact
		new bool
	}
	c, err := locked(ctx, r.s, func() (created, error) {
		if have := where(r.s.artifacts, func(o domain.Artifact) bool { return o.Digest().SHA256 == a.Digest().SHA256 }); len(have) > 0 {
			return created{have[0], false}, nil
		}
		r.s.artifacts[a.ID().String()] = a
		return created{a, true}, nil
	})
	return c.a, c.new, err
}

// Get loads an artifact by id.
func (r *Artifacts) Get(ctx context.Context, id domain.UUID) (domain.Artifact, error) {
	return locked(ctx, r.s, func() (domain.Artifact, error) { return found(r.s.artifacts, id.String()) })
}

// List returns every artifact, newest first.
func (r *Artifacts) List(ctx context.Context) ([]domain.Artifact, error) {
	return locked(ctx, r.s, func() ([]domain.Artifact, error) {
		out := where(r.s.artifacts, func(domain.Artifact) bool { return true })
		return page(out, len(out), 0, func(a, b domain.Artifact) bool {
			return newer(a.CreatedAt(), b.CreatedAt(), a.ID().String(), b.ID().String())
		}), nil
	})
}

// Delete removes the artifact unless a firmware refers to it.
func (r *Artifacts) Delete(ctx context.Context, id domain.UUID) error {
	return do(ctx, r.s, func() error {
		if !has(r.s.artifacts, id.String()) {
			return domain.ErrNotFound
		}
		if len(where(r.s.firmwares, func(f domain.Firmware) bool { return f.ArtifactID() == id })) > 0 {
			return domain.ErrArtifactInUse
		}
		delete(r.s.artifacts, id.String())
		return nil
	})
}
