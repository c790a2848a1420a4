package artifacts

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ai-device/ota/adapters/artifactfile"
	"github.com/ai-device/ota/adapters/blobstore"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
	"github.com/ai-device/ota/tests/testenv"
)

// countingBlobs counts the bytes read from the objects it opens.
type countingBlobs struct {
	ports.ArtifactBlobs
	read *int64
}

func (c countingBlobs) Open(ctx context.Context, key string) (ports.BlobObject, error) {
	o, err := c.ArtifactBlobs.Open(ctx, key)
	return countingObject{o, c.read}, err
}

type countingObject struct {
	ports.BlobObject
	read *int64
}

func (c countingObject) Read(p []byte) (int, error) {
	n, err := c.BlobObject.Read(p)
	*c.read += int64(n)
	return n, err
}

// TestInspectorOverEveryStore: the inspector reads a real .mender file
// stored in a directory and in an S3 bucket through the store's seekable
// object — its 8 MiB payload skipped by seeking, not read — and a copy cut
// short in the payload is refused as truncated on both.
func TestInspectorOverEveryStore(t *testing.T) {
	if _, err := exec.LookPath("mender-artifact"); err != nil {
		testenv.Skip(t, "mender-artifact", "mender-artifact is not installed (apt-get install -y mender-artifact)")
	}
	dir := t.TempDir()
	payload := make([]byte, 8<<20)
	_, _ = rand.Read(payload)
	if err := os.WriteFile(filepath.Join(dir, "rootfs.img"), payload, 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "a.mender")
	if b, err := exec.Command("mender-artifact", "write", "rootfs-image", "-t", "cam-x1", "-n", "stores-1",
		"-f", filepath.Join(dir, "rootfs.img"), "-o", out, "--no-progress").CombinedOutput(); err != nil {
		t.Fatalf("mender-artifact: %v\n%s", err, b)
	}
	file, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	stores := map[string]func(t *testing.T) string{
		"file": func(t *testing.T) string { return "file://" + filepath.ToSlash(t.TempDir()) },
		"s3": func(t *testing.T) string {
			return testenv.S3(t).NewBucket(t) // its store URL
		},
	}
	for name, storeURL := range stores {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			store, err := blobstore.Open(ctx, storeURL(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = store.Close() })
			var read int64
			blobs := countingBlobs{store, &read}
			for key, data := range map[string][]byte{"artifacts/whole": file, "artifacts/cut": file[:len(file)-4096]} {
				if _, err := blobs.Put(ctx, key, bytes.NewReader(data)); err != nil {
					t.Fatal(err)
				}
			}
			inspect := func(key string) (domain.ArtifactMeta, error) {
				obj, err := blobs.Open(ctx, key)
				if err != nil {
					t.Fatal(err)
				}
				defer obj.Close()
				return artifactfile.Inspector{}.Inspect(ctx, "a.mender", obj)
			}
			meta, err := inspect("artifacts/whole")
			if err != nil || meta.ArtifactName != "stores-1" || len(meta.DeviceTypes) != 1 || meta.DeviceTypes[0] != "cam-x1" {
				t.Fatalf("inspect: %+v, %v", meta, err)
			}
			if read > 256<<10 {
				t.Errorf("read %d bytes of a %d-byte file", read, len(file))
			}
			var fe *domain.ArtifactFormatError
			if _, err := inspect("artifacts/cut"); !errors.As(err, &fe) || !strings.HasPrefix(fe.Reason, "truncated: ") {
				t.Errorf("a copy cut in its payload: %v", err)
			}
		})
	}
}
