package application

import (
	"context"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"strings"
	"time"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// ArtifactInspector reads what an uploaded file says about itself (a
// .mender file's header, a .swu file's sw-description), from the stored
// object. A file that claims a format and cannot be read as one is a
// *domain.ArtifactFormatError.
type ArtifactInspector interface {
	Inspect(ctx context.Context, fileName string, obj ports.BlobObject) (domain.ArtifactMeta, error)
}

// ArtifactMaxBytes bounds one upload (OTA_ARTIFACT_MAX_BYTES).
type ArtifactMaxBytes int64

// cleanupTimeout bounds the deletion of an upload's object after a
// failure, which runs even when the caller has gone.
const cleanupTimeout = 30 * time.Second

// Artifacts uploads, lists and deletes hosted artifacts: the bytes in the
// blob store under artifacts/<id>, the row in the artifact repository. An
// object exists only while its row does: every failure after the bytes are
// stored deletes them, and a row is written only once they are.
type Artifacts struct {
	blobs    ports.ArtifactBlobs
	repo     ports.ArtifactRepository
	inspect  ArtifactInspector
	clock    ports.Clock
	ids      ports.IDGenerator
	maxBytes int64
}

var _ ports.ArtifactService = (*Artifacts)(nil)

// NewArtifacts builds the artifact use cases.
func NewArtifacts(blobs ports.ArtifactBlobs, repo ports.ArtifactRepository, inspect ArtifactInspector,
	clock ports.Clock, ids ports.IDGenerator, maxBytes ArtifactMaxBytes) (*Artifacts, error) {
	if err := required(blobs, repo, inspect, clock, ids); err != nil {
		return nil, err
	}
	if maxBytes <= 0 {
		return nil, errors.New("application: the artifact size limit must be positive")
	}
	return &Artifacts{blobs: blobs, repo: repo, inspect: inspect, clock: clock, ids: ids, maxBytes: int64(maxBytes)}, nil
}

// Upload stores a file: its bytes are streamed to the blob store while
// their size, sha256, sha1 and md5 are computed (never the whole file in
// memory); a declared sha256 must match; the inspector reads the stored
// file; then the row is written. The same content stored before is that
// artifact (created false), and this upload's copy is deleted. On any
// failure nothing is left: no object, no row.
func (s *Artifacts) Upload(ctx context.Context, actor domain.Actor, up ports.ArtifactUpload) (domain.Artifact, bool, error) {
	if err := domain.ValidateArtifactFileName(up.FileName); err != nil {
		return domain.Artifact{}, false, err
	}
	declared := strings.ToLower(up.SHA256)
	if declared != "" && !isHex(declared, sha256.Size*2) {
		return domain.Artifact{}, false, &domain.ValidationError{Field: "sha256", Reason: "must be 64 hex characters"}
	}
	if up.Announced > s.maxBytes {
		return domain.Artifact{}, false, fmt.Errorf("the upload announces %d bytes, over %d: %w", up.Announced, s.maxBytes, domain.ErrArtifactTooLarge)
	}
	id := s.ids.NewID()
	key := domain.ArtifactStorageKey(id)
	body := newDigestReader(up.Body, s.maxBytes)
	if _, err := s.blobs.Put(ctx, key, body); err != nil {
		return domain.Artifact{}, false, fmt.Errorf("storing the upload: %w", err) // Put left nothing
	}
	d := body.digest()
	fail := func(err error) (domain.Artifact, bool, error) {
		return domain.Artifact{}, false, s.discard(ctx, key, err)
	}
	if declared != "" && declared != d.SHA256 {
		return fail(fmt.Errorf("the upload's sha256 is %s, not the declared %s: %w", d.SHA256, declared, domain.ErrChecksumMismatch))
	}
	if d.Size == 0 {
		return fail(&domain.ValidationError{Field: "file", Reason: "is empty"})
	}
	meta, err := s.inspectStored(ctx, up.FileName, key)
	if err != nil {
		return fail(err)
	}
	a, err := domain.NewArtifact(id, up.FileName, d, meta, s.clock.Now())
	if err != nil {
		return fail(err)
	}
	rec, err := actor.Record(a.CreatedAt(), domain.AuditArtifactUpload, a.ID().String(), nil, artifactFacts(a))
	if err != nil {
		return fail(err)
	}
	stored, created, err := s.repo.Create(ctx, a, rec)
	if err != nil {
		return fail(fmt.Errorf("storing the artifact: %w", err))
	}
	if !created {
		// The content is stored already, under the first upload's key.
		if err := s.discard(ctx, key, nil); err != nil {
			return domain.Artifact{}, false, err
		}
	}
	return stored, created, nil
}

func (s *Artifacts) inspectStored(ctx context.Context, fileName, key string) (domain.ArtifactMeta, error) {
	obj, err := s.blobs.Open(ctx, key)
	if err != nil {
		return domain.ArtifactMeta{}, fmt.Errorf("reading the upload back: %w", err)
	}
	defer obj.Close()
	return s.inspect.Inspect(ctx, fileName, obj)
}

// discard deletes an upload's object after cause (nil: a duplicate),
// even when the caller has gone. cause stays the error's meaning; a
// failed deletion only adds to its message, since nothing the caller
// could do about it changes.
func (s *Artifacts) discard(ctx context.Context, key string, cause error) error {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	err := s.blobs.Delete(dctx, key)
	switch {
	case err == nil:
		return cause
	case cause == nil:
		return fmt.Errorf("removing a duplicate upload: %w", err)
	}
	return fmt.Errorf("%w (and its stored bytes could not be removed: %v)", cause, err)
}

// GetArtifact loads one artifact.
func (s *Artifacts) GetArtifact(ctx context.Context, id domain.UUID) (domain.Artifact, error) {
	return s.repo.Get(ctx, id)
}

// ListArtifacts lists every artifact, newest first.
func (s *Artifacts) ListArtifacts(ctx context.Context) ([]domain.Artifact, error) {
	return s.repo.List(ctx)
}

// DeleteArtifact deletes an artifact no firmware refers to
// (domain.ErrArtifactInUse otherwise): the row first, so no device is
// offered bytes that are going away, then the object. An object whose
// deletion failed is left without a row — unreachable, never reused (keys
// are ids) — and the failure is returned so the operator hears of it.
func (s *Artifacts) DeleteArtifact(ctx context.Context, actor domain.Actor, id domain.UUID) error {
	if id.IsZero() { // an id the edge could not parse names no artifact
		return fmt.Errorf("artifact: %w", domain.ErrNotFound)
	}
	now := s.clock.Now()
	audit := func(before, _ domain.Artifact) (domain.AuditRecord, error) {
		return actor.Record(now, domain.AuditArtifactDelete, id.String(), artifactFacts(before), nil)
	}
	if err := s.repo.Delete(ctx, id, audit); err != nil {
		return fmt.Errorf("deleting artifact: %w", err)
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if err := s.blobs.Delete(dctx, domain.ArtifactStorageKey(id)); err != nil {
		return fmt.Errorf("deleting artifact %s's bytes (its row is gone): %w", id, err)
	}
	return nil
}

// digestReader reads an upload once, hashing what passes and refusing
// to pass more than max bytes: the blob store's Put then aborts, so an
// oversized body leaves nothing behind.
type digestReader struct {
	r          io.Reader
	n, max     int64
	s256, s1   hash.Hash
	m5         hash.Hash
	everything io.Writer
}

func newDigestReader(r io.Reader, max int64) *digestReader {
	d := &digestReader{r: r, max: max, s256: sha256.New(), s1: sha1.New(), m5: md5.New()}
	d.everything = io.MultiWriter(d.s256, d.s1, d.m5)
	return d
}

func (d *digestReader) Read(p []byte) (int, error) {
	n, err := d.r.Read(p)
	d.n += int64(n)
	if d.n > d.max {
		return 0, fmt.Errorf("the upload is over %d bytes: %w", d.max, domain.ErrArtifactTooLarge)
	}
	_, _ = d.everything.Write(p[:n])
	return n, err
}

func (d *digestReader) digest() domain.ArtifactDigest {
	return domain.ArtifactDigest{Size: d.n, SHA256: hex.EncodeToString(d.s256.Sum(nil)),
		SHA1: hex.EncodeToString(d.s1.Sum(nil)), MD5: hex.EncodeToString(d.m5.Sum(nil))}
}

func isHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}
