package memory

import (
	"cmp"
	"context"
	"maps"
	"slices"

	"github.com/ai-device/ota/domain"
)

// Artifacts is ports.ArtifactRepository over a Store (with the firmwares).
type Artifacts struct{ s *Store }

// NewArtifacts returns the artifact repository of s.
func NewArtifacts(s *Store) *Artifacts { return &Artifacts{s: s} }

// Create stores a, or returns the artifact already stored with its sha256.
func (r *Artifacts) Create(_ context.Context, a domain.Artifact) (domain.Artifact, bool, error) {
	a = domain.RehydrateArtifact(a.ID().String(), a.FileName(), a.Digest(), a.Meta(), stamp(a.CreatedAt()))
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	for _, have := range r.s.artifacts {
		if have.Digest().SHA256 == a.Digest().SHA256 {
			return have, false, nil
		}
	}
	r.s.artifacts[a.ID().String()] = a
	return a, true, nil
}

// Get loads an artifact by id.
func (r *Artifacts) Get(_ context.Context, id domain.UUID) (domain.Artifact, error) {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	if !r.s.hasArtifactLocked(id) {
		return domain.Artifact{}, domain.ErrNotFound
	}
	return r.s.artifacts[id.String()], nil
}

// List returns every artifact, newest first.
func (r *Artifacts) List(context.Context) ([]domain.Artifact, error) {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	out := slices.Collect(maps.Values(r.s.artifacts))
	slices.SortFunc(out, func(a, b domain.Artifact) int {
		return cmp.Or(b.CreatedAt().Compare(a.CreatedAt()), cmp.Compare(b.ID().String(), a.ID().String()))
	})
	return out, nil
}

// Delete removes the artifact unless a firmware refers to it.
func (r *Artifacts) Delete(_ context.Context, id domain.UUID) error {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	if !r.s.hasArtifactLocked(id) {
		return domain.ErrNotFound
	}
	for _, f := range r.s.firmwares {
		if f.ArtifactID() == id {
			return domain.ErrArtifactInUse
		}
	}
	delete(r.s.artifacts, id.String())
	return nil
}

func (s *Store) hasArtifactLocked(id domain.UUID) bool { _, ok := s.artifacts[id.String()]; return ok }
