package contract

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// BlobStore is one ports.ArtifactBlobs under test, with what lets the
// suite look behind it.
type BlobStore struct {
	Blobs ports.ArtifactBlobs
	// Replica opens a second store on the same storage, as another otad
	// replica would.
	Replica func(t *testing.T) ports.ArtifactBlobs
	// Leftovers lists what an aborted Put of key may have left besides the
	// object: temporary files (a directory's and os.TempDir's), pending
	// multipart uploads.
	Leftovers func(t *testing.T, key string) []string
}

// RunArtifactBlobs runs the blob-store contract against what newStore
// returns, once per subtest; the subtests run in parallel under keys of
// their own, so newStore may hand them all one bucket.
func RunArtifactBlobs(t *testing.T, newStore func(t *testing.T) BlobStore) {
	t.Run("PutOpenSeek", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ctx := context.Background()
		key, body := blobKey(), blobBody(3<<20+17)
		n, err := s.Blobs.Put(ctx, key, bytes.NewReader(body))
		if err != nil || n != int64(len(body)) {
			t.Fatalf("Put = %d, %v; want %d, nil", n, err, len(body))
		}
		obj, err := s.Blobs.Open(ctx, key)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		defer obj.Close()
		if obj.Size() != int64(len(body)) {
			t.Errorf("Size = %d, want %d", obj.Size(), len(body))
		}
		if obj.ModTime().IsZero() {
			t.Error("ModTime is zero")
		}
		// A middle range, then back to the start, then the tail from the end.
		for _, c := range []struct {
			off    int64
			whence int
			at, n  int64
		}{{1 << 20, io.SeekStart, 1 << 20, 4096}, {0, io.SeekStart, 0, 100}, {-10, io.SeekEnd, int64(len(body)) - 10, 10}} {
			pos, err := obj.Seek(c.off, c.whence)
			if err != nil || pos != c.at {
				t.Fatalf("Seek(%d, %d) = %d, %v; want %d", c.off, c.whence, pos, err, c.at)
			}
			got := make([]byte, c.n)
			if _, err := io.ReadFull(obj, got); err != nil {
				t.Fatalf("reading %d bytes at %d: %v", c.n, c.at, err)
			}
			if !bytes.Equal(got, body[c.at:c.at+c.n]) {
				t.Fatalf("bytes at %d differ from what was put", c.at)
			}
		}
		if n, err := obj.Read(make([]byte, 1)); n != 0 || err != io.EOF {
			t.Errorf("Read at the end = %d, %v; want 0, EOF", n, err)
		}
		if _, err := obj.Seek(0, io.SeekStart); err != nil {
			t.Fatal(err)
		}
		all, err := io.ReadAll(obj)
		if err != nil || !bytes.Equal(all, body) {
			t.Fatalf("the whole object read back differs (%d bytes, %v)", len(all), err)
		}
	})

	t.Run("MissingKeyIsNotFound", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ctx := context.Background()
		key := blobKey()
		if _, err := s.Blobs.Open(ctx, key); !errors.Is(err, domain.ErrNotFound) {
			t.Errorf("Open of a missing key = %v, want ErrNotFound", err)
		}
		if err := s.Blobs.Delete(ctx, key); err != nil {
			t.Errorf("Delete of a missing key = %v, want nil", err)
		}
	})

	t.Run("DeleteRemoves", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ctx := context.Background()
		key := blobKey()
		if _, err := s.Blobs.Put(ctx, key, bytes.NewReader(blobBody(1000))); err != nil {
			t.Fatal(err)
		}
		if err := s.Blobs.Delete(ctx, key); err != nil {
			t.Fatalf("Delete: %v", err)
		}
		if _, err := s.Blobs.Open(ctx, key); !errors.Is(err, domain.ErrNotFound) {
			t.Errorf("Open after Delete = %v, want ErrNotFound", err)
		}
	})

	// A body that fails mid-way (a client that hung up) leaves nothing:
	// no object, no temporary file, no pending multipart upload. 12 MiB
	// passes the S3 uploader's part size, so a multipart upload was begun.
	t.Run("FailedBodyLeavesNothing", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		key := blobKey()
		boom := errors.New("client went away")
		r := io.MultiReader(bytes.NewReader(blobBody(12<<20)), errReader{boom})
		if _, err := s.Blobs.Put(context.Background(), key, r); !errors.Is(err, boom) {
			t.Fatalf("Put of a failing body = %v, want the body's error", err)
		}
		assertNothingLeft(t, s, key)
	})

	t.Run("CancelledPutLeavesNothing", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		key := blobKey()
		ctx, cancel := context.WithCancel(context.Background())
		r := &cancelAfter{r: bytes.NewReader(blobBody(12 << 20)), n: 7 << 20, cancel: cancel}
		if _, err := s.Blobs.Put(ctx, key, r); err == nil {
			t.Fatal("Put whose context was cancelled mid-body succeeded")
		}
		assertNothingLeft(t, s, key)
	})

	t.Run("ReplicaReadsTheSameObject", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		ctx := context.Background()
		key, body := blobKey(), blobBody(70_000)
		if _, err := s.Blobs.Put(ctx, key, bytes.NewReader(body)); err != nil {
			t.Fatal(err)
		}
		obj, err := s.Replica(t).Open(ctx, key)
		if err != nil {
			t.Fatalf("the replica's Open: %v", err)
		}
		defer obj.Close()
		got, err := io.ReadAll(obj)
		if err != nil || !bytes.Equal(got, body) {
			t.Fatalf("the replica read %d bytes (%v), not what was put", len(got), err)
		}
	})

	t.Run("Presign", func(t *testing.T) {
		t.Parallel()
		s := newStore(t)
		u, err := s.Blobs.Presign(context.Background(), blobKey(), time.Minute)
		if err != nil && !errors.Is(err, ports.ErrPresignUnsupported) {
			t.Fatalf("Presign = %v, want a URL or ErrPresignUnsupported", err)
		}
		if err == nil && u == "" {
			t.Fatal("Presign returned an empty URL")
		}
	})
}

func assertNothingLeft(t *testing.T, s BlobStore, key string) {
	t.Helper()
	if _, err := s.Blobs.Open(context.Background(), key); !errors.Is(err, domain.ErrNotFound) {
		t.Errorf("after an aborted Put, Open = %v, want ErrNotFound", err)
	}
	if left := s.Leftovers(t, key); len(left) > 0 {
		t.Errorf("an aborted Put left %v", left)
	}
}

func blobKey() string { return "artifacts/" + uuid.NewString() }

// blobBody is n bytes that differ at every offset a test reads.
func blobBody(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i>>8 + i>>16)
	}
	return b
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// cancelAfter cancels its context once n bytes were read, and goes on
// reading: the store must notice the context, not the body.
type cancelAfter struct {
	r      io.Reader
	n      int
	read   int
	cancel context.CancelFunc
}

func (c *cancelAfter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.read += n
	if c.read >= c.n {
		c.cancel()
	}
	return n, err
}
