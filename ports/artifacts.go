package ports

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/ai-device/ota/domain"
)

// ErrPresignUnsupported is what ArtifactBlobs.Presign answers for a store
// that cannot sign a direct URL (the file system): the caller serves the
// bytes itself.
var ErrPresignUnsupported = errors.New("blob store cannot presign")

// BlobObject is one stored artifact opened for reading: seekable, so a
// download serves Range requests without reading what it skips.
type BlobObject interface {
	io.ReadSeekCloser
	Size() int64
	ModTime() time.Time
}

// ArtifactBlobs holds artifacts' bytes (gocloud.dev/blob: a directory, or
// S3-compatible object storage shared by replicas). Keys come from
// domain.ArtifactStorageKey. A failure of the store itself wraps
// domain.ErrServiceBusy; a missing key is domain.ErrNotFound.
type ArtifactBlobs interface {
	// Put streams r to key. The object becomes visible only once all of r
	// is written; on any error (r's included) nothing is left under key.
	// It returns the bytes written.
	Put(ctx context.Context, key string, r io.Reader) (int64, error)
	// Open opens key for reading.
	Open(ctx context.Context, key string) (BlobObject, error)
	// Delete removes key; deleting a missing key is not an error.
	Delete(ctx context.Context, key string) error
	// Presign returns a URL that lets anyone GET key until ttl passes, or
	// ErrPresignUnsupported.
	Presign(ctx context.Context, key string, ttl time.Duration) (string, error)
}

// ArtifactRepository stores artifacts' rows: what each stored object is.
// Not-found is domain.ErrNotFound (the zero id included).
type ArtifactRepository interface {
	// Create stores a. When an artifact with a's sha256 is stored already,
	// it stores nothing and returns that one with created false: the same
	// bytes are one artifact, whoever uploads them, however concurrently.
	// rec, the operator's record of the upload, is stored with a new
	// artifact, and not at all when nothing is stored.
	Create(ctx context.Context, a domain.Artifact, rec domain.AuditRecord) (stored domain.Artifact, created bool, err error)
	// Get loads an artifact by id.
	Get(ctx context.Context, id domain.UUID) (domain.Artifact, error)
	// List returns every artifact, newest first.
	List(ctx context.Context) ([]domain.Artifact, error)
	// Delete removes the artifact's row: domain.ErrArtifactInUse while a
	// firmware refers to it, decided by the store at the delete itself (a
	// firmware published concurrently either lands first and blocks the
	// delete, or finds the artifact gone). audit's record of the deleted
	// artifact (before) is stored with the delete.
	Delete(ctx context.Context, id domain.UUID, audit Audit[domain.Artifact]) error
}

// ArtifactUpload is one uploaded file as it arrives: its name, its bytes
// (read once, streamed) and the sha256 its sender declared, if any.
type ArtifactUpload struct {
	FileName string
	Body     io.Reader
	SHA256   string
	// Announced is the length the sender announced (Content-Length), or
	// 0 when it announced none: an upload announced over the limit is
	// refused before a byte is stored.
	Announced int64
}

// ArtifactService is what the operators' edge calls for hosted artifacts.
type ArtifactService interface {
	// Upload stores a file and answers its artifact; created is false when
	// the same content was stored before (that artifact is answered).
	Upload(ctx context.Context, actor domain.Actor, up ArtifactUpload) (a domain.Artifact, created bool, err error)
	GetArtifact(ctx context.Context, id domain.UUID) (domain.Artifact, error)
	ListArtifacts(ctx context.Context) ([]domain.Artifact, error)
	// DeleteArtifact deletes an artifact no firmware refers to
	// (domain.ErrArtifactInUse otherwise).
	DeleteArtifact(ctx context.Context, actor domain.Actor, id domain.UUID) error
}
