// Package artifactfile reads what an uploaded file says about itself: a
// Mender artifact's (.mender) header and an SWUpdate image's (.swu)
// sw-description. The upload use case calls it once the bytes are stored,
// so an operator publishes a firmware pre-filled from the file instead of
// typing its artifact name and device types by hand.
//
// Only the head of a file is read: both formats put their description
// first, ahead of the payload. Every size read is bounded, so a hostile
// header costs at most a few MiB of memory and reading, whatever it claims.
package artifactfile

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// Limits on what is read from a file's head. Real headers are a few KiB;
// these leave room for many payloads and state scripts while keeping a
// hostile file from making the service read or allocate much.
const (
	// maxHeadBytes bounds the bytes of a .mender file read before its
	// header ends (version, manifest, signature and the header itself).
	maxHeadBytes = 16 << 20
	// maxHeaderBytes bounds a .mender header once decompressed, so a
	// small compressed header cannot expand into gigabytes.
	maxHeaderBytes = 16 << 20
	// maxEntryBytes bounds one JSON document or manifest in a .mender
	// file, and a .swu file's sw-description.
	maxEntryBytes = 1 << 20
)

// Inspector reads artifacts' metadata. It holds no state: one value serves
// every upload.
type Inspector struct{}

// FormatOf is the format a file name claims, by its suffix (any case):
// ".mender" and ".swu" are read as such, anything else is an opaque image.
func FormatOf(fileName string) domain.ArtifactFormat {
	lower := strings.ToLower(fileName)
	switch {
	case strings.HasSuffix(lower, ".mender"):
		return domain.ArtifactMender
	case strings.HasSuffix(lower, ".swu"):
		return domain.ArtifactSWU
	}
	return domain.ArtifactRaw
}

// Inspect reads obj's metadata by the format its file name claims. A file
// that is not what its name says is a *domain.ArtifactFormatError with the
// reason; a failure to read obj itself (the store, ctx) is returned
// wrapped as it is, so an outage is never blamed on the file.
func (Inspector) Inspect(ctx context.Context, fileName string, obj ports.BlobObject) (domain.ArtifactMeta, error) {
	format := FormatOf(fileName)
	if format == domain.ArtifactRaw {
		return domain.ArtifactMeta{Format: domain.ArtifactRaw}, nil
	}
	if _, err := obj.Seek(0, io.SeekStart); err != nil {
		return domain.ArtifactMeta{}, fmt.Errorf("artifactfile: rewinding %s: %w", fileName, err)
	}
	src := &sourceReader{ctx: ctx, r: obj}
	var (
		meta domain.ArtifactMeta
		err  error
	)
	if format == domain.ArtifactMender {
		meta, err = readMender(src)
	} else {
		meta, err = readSWU(src)
	}
	if src.err != nil {
		// The store or the caller failed us mid-read: whatever the parser
		// made of the short read says nothing about the file.
		return domain.ArtifactMeta{}, fmt.Errorf("artifactfile: reading %s: %w", fileName, src.err)
	}
	if err != nil {
		var fe *domain.ArtifactFormatError
		if errors.As(err, &fe) {
			fe.Format = format
		}
		return domain.ArtifactMeta{}, err
	}
	meta.Format = format
	return meta, nil
}

// sourceReader reads the stored object, stopping at a cancelled context
// and remembering any failure other than the end of the file: the parsers
// see a short read either way, and Inspect tells the two apart.
type sourceReader struct {
	ctx context.Context
	r   io.ReadSeeker
	err error
}

func (s *sourceReader) Read(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	if err := s.ctx.Err(); err != nil {
		s.err = err
		return 0, err
	}
	n, err := s.r.Read(p)
	if err != nil && err != io.EOF {
		s.err = err
	}
	return n, err
}

// Seek passes to the object, so a tar reader skips a payload without
// reading it.
func (s *sourceReader) Seek(offset int64, whence int) (int64, error) {
	if s.err != nil {
		return 0, s.err
	}
	if err := s.ctx.Err(); err != nil {
		s.err = err
		return 0, err
	}
	n, err := s.r.Seek(offset, whence)
	if err != nil {
		s.err = err
	}
	return n, err
}

// boundedReader is io.LimitedReader that fails with a format error, not a
// quiet end of file, once the limit is passed: a file over a bound is
// refused for its size rather than reported as truncated. It bounds the
// bytes read, not those skipped: Seek passes to r when r can seek.
type boundedReader struct {
	r    io.Reader
	left int64
	what string
}

func (b *boundedReader) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// One byte more tells "exactly at the limit" from "past it".
		var one [1]byte
		n, err := b.r.Read(one[:])
		if n > 0 {
			return 0, formatErrorf("%s", b.what)
		}
		return 0, err
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	return n, err
}

// Seek skips without counting, if the underlying reader can seek.
func (b *boundedReader) Seek(offset int64, whence int) (int64, error) {
	if s, ok := b.r.(io.Seeker); ok {
		return s.Seek(offset, whence)
	}
	return 0, errors.ErrUnsupported
}

// formatErrorf is a format error with a reason; Inspect fills in the
// format.
func formatErrorf(format string, args ...any) error {
	return &domain.ArtifactFormatError{Reason: fmt.Sprintf(format, args...)}
}

// readFailure words what every format's reader (a Mender archive's tar
// entries and their compressed contents, an SWUpdate image's cpio entries)
// makes of a failed read at where, so that a cut file reads alike whatever
// its format: a format error passes as it is, and a read that ended early
// says the file is truncated there. It answers nil for any other error,
// which the caller words for its own format.
func readFailure(err error, where string) error {
	var fe *domain.ArtifactFormatError
	switch {
	case errors.As(err, &fe):
		return err
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return formatErrorf("truncated: the file ends inside %s", where)
	}
	return nil
}

// readAllBounded reads all of r, refusing more than limit bytes with
// "<what> is larger than N bytes" so no claimed size is ever allocated.
func readAllBounded(r io.Reader, limit int64, what string) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, formatErrorf("%s is larger than %d bytes", what, limit)
	}
	return b, nil
}
