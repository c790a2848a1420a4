package ports

import (
	"context"
	"errors"
	"io"
	"time"
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
