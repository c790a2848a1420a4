// Package blobstore keeps artifacts' bytes in a gocloud.dev/blob bucket:
// a directory (fileblob, the default, so one otad needs nothing else) or
// S3-compatible object storage (s3blob) that several replicas share. It
// implements ports.ArtifactBlobs.
package blobstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"syscall"
	"time"

	"gocloud.dev/blob"
	_ "gocloud.dev/blob/fileblob" // file:// buckets
	_ "gocloud.dev/blob/s3blob"   // s3:// buckets
	"gocloud.dev/gcerrors"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// Store is ports.ArtifactBlobs on one bucket.
type Store struct {
	bucket *blob.Bucket
	scheme string
}

var _ ports.ArtifactBlobs = (*Store)(nil)

// Open opens the bucket a store URL names: file:///dir (or file://./dir,
// relative to the working directory) or s3://bucket?endpoint=…&region=….
// A file:// store creates its directory, writes no metadata sidecar files,
// and keeps an upload's temporary file next to its final name — not in
// os.TempDir, which may be another file system (no atomic rename) or too
// small for an image. Credentials for s3:// come from the AWS_* environment.
func Open(ctx context.Context, storeURL string) (*Store, error) {
	u, err := url.Parse(storeURL)
	if err != nil {
		return nil, fmt.Errorf("artifact store URL: %w", err)
	}
	switch u.Scheme {
	case "file":
		q := u.Query()
		for k, v := range map[string]string{"create_dir": "1", "no_tmp_dir": "1", "metadata": "skip"} {
			if !q.Has(k) {
				q.Set(k, v)
			}
		}
		u.RawQuery = q.Encode()
	case "s3":
	default:
		return nil, fmt.Errorf("artifact store URL: scheme %q is not file or s3", u.Scheme)
	}
	b, err := blob.OpenBucket(ctx, u.String())
	if err != nil {
		return nil, fmt.Errorf("opening artifact store: %w", err)
	}
	return &Store{bucket: b, scheme: u.Scheme}, nil
}

// Close releases the bucket.
func (s *Store) Close() error { return s.bucket.Close() }

// Put streams r to key. The writer's context is cancelled on any failure
// before Close, which makes every driver discard what it wrote: fileblob
// removes its temporary file, s3blob aborts the (multipart) upload. So an
// object appears under key only when all of r was written.
func (s *Store) Put(ctx context.Context, key string, r io.Reader) (int64, error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := s.bucket.NewWriter(wctx, key, &blob.WriterOptions{
		// A fixed type: no sniffing, which would buffer the first bytes.
		ContentType: "application/octet-stream",
	})
	if err != nil {
		return 0, s.wrap("writing", key, err)
	}
	n, err := io.Copy(w, markedReader{r})
	if err != nil {
		cancel()
		_ = w.Close()
		return n, s.wrap("writing", key, err)
	}
	if err := w.Close(); err != nil {
		return n, s.wrap("writing", key, err)
	}
	return n, nil
}

// Open reads key's attributes (so a missing key is answered at once) and
// returns an object that opens a range read only when first read, and
// again only after a Seek moved it: nothing it skips is fetched.
func (s *Store) Open(ctx context.Context, key string) (ports.BlobObject, error) {
	a, err := s.bucket.Attributes(ctx, key)
	if err != nil {
		return nil, s.wrap("opening", key, err)
	}
	return &object{ctx: ctx, s: s, key: key, size: a.Size, modTime: a.ModTime}, nil
}

// Delete removes key; a missing key is not an error.
func (s *Store) Delete(ctx context.Context, key string) error {
	err := s.bucket.Delete(ctx, key)
	if err != nil && gcerrors.Code(err) != gcerrors.NotFound {
		return s.wrap("deleting", key, err)
	}
	return nil
}

// Presign signs a GET URL for key, valid for ttl, where the store can
// (S3); a directory cannot and answers ports.ErrPresignUnsupported.
func (s *Store) Presign(ctx context.Context, key string, ttl time.Duration) (string, error) {
	if s.scheme != "s3" {
		return "", ports.ErrPresignUnsupported
	}
	u, err := s.bucket.SignedURL(ctx, key, &blob.SignedURLOptions{Expiry: ttl, Method: "GET"})
	if err != nil {
		if gcerrors.Code(err) == gcerrors.Unimplemented {
			return "", ports.ErrPresignUnsupported
		}
		return "", s.wrap("signing", key, err)
	}
	return u, nil
}

// wrap gives a driver's error the domain's meaning: a missing key is
// domain.ErrNotFound; the caller's own cancellation stays itself; a store
// out of space is domain.ErrArtifactStoreFull and any other failure of it
// (unreachable, refusing) domain.ErrArtifactStoreUnavailable — both
// domain.ErrServiceBusy: nothing was kept and a retry may succeed once the
// store is back or has room.
func (s *Store) wrap(op, key string, err error) error {
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("artifact store: %s %s: %w", op, key, err)
	case gcerrors.Code(err) == gcerrors.NotFound:
		return fmt.Errorf("artifact store: %s %s: %w", op, key, domain.ErrNotFound)
	case errors.Is(err, syscall.ENOSPC):
		return fmt.Errorf("artifact store: %s %s: %v: %w", op, key, err, domain.ErrArtifactStoreFull)
	case isReaderError(err):
		// The body the caller streams failed (a client that hung up):
		// not the store's fault, and not a retryable outage of it.
		return fmt.Errorf("artifact store: %s %s: %w", op, key, err)
	}
	return fmt.Errorf("artifact store: %s %s: %v: %w", op, key, err, domain.ErrArtifactStoreUnavailable)
}

// readerError marks a failure of the io.Reader handed to Put, which
// io.Copy cannot tell from the writer's.
type readerError struct{ err error }

func (e *readerError) Error() string { return e.err.Error() }
func (e *readerError) Unwrap() error { return e.err }

// markedReader marks its reader's failures as readerErrors.
type markedReader struct{ r io.Reader }

func (m markedReader) Read(p []byte) (int, error) {
	n, err := m.r.Read(p)
	if err != nil && err != io.EOF {
		err = &readerError{err}
	}
	return n, err
}

func isReaderError(err error) bool {
	var re *readerError
	return errors.As(err, &re)
}

// object is one stored blob opened for reading (ports.BlobObject).
type object struct {
	ctx     context.Context
	s       *Store
	key     string
	size    int64
	modTime time.Time
	off     int64
	r       *blob.Reader // nil until read, and after a Seek that moved
}

func (o *object) Read(p []byte) (int, error) {
	if o.off >= o.size {
		return 0, io.EOF
	}
	if o.r == nil {
		r, err := o.s.bucket.NewRangeReader(o.ctx, o.key, o.off, -1, nil)
		if err != nil {
			return 0, o.s.wrap("reading", o.key, err)
		}
		o.r = r
	}
	n, err := o.r.Read(p)
	o.off += int64(n)
	if err != nil && err != io.EOF {
		return n, o.s.wrap("reading", o.key, err)
	}
	return n, err
}

func (o *object) Seek(offset int64, whence int) (int64, error) {
	var abs int64
	switch whence {
	case io.SeekStart:
		abs = offset
	case io.SeekCurrent:
		abs = o.off + offset
	case io.SeekEnd:
		abs = o.size + offset
	default:
		return o.off, errors.New("blobstore: invalid whence")
	}
	if abs < 0 {
		return o.off, errors.New("blobstore: negative position")
	}
	if abs != o.off && o.r != nil {
		_ = o.r.Close()
		o.r = nil
	}
	o.off = abs
	return abs, nil
}

func (o *object) Close() error {
	if o.r == nil {
		return nil
	}
	err := o.r.Close()
	o.r = nil
	return err
}

func (o *object) Size() int64        { return o.size }
func (o *object) ModTime() time.Time { return o.modTime }

// Redacted is a store URL without credentials or query, for logs.
func Redacted(storeURL string) string {
	if i := strings.IndexAny(storeURL, "?#"); i >= 0 {
		storeURL = storeURL[:i]
	}
	if u, err := url.Parse(storeURL); err == nil {
		u.User = nil
		return u.String()
	}
	return "(unparsable)"
}
