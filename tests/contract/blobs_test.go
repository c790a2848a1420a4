package contract_test

import (
	"context"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ai-device/ota/adapters/blobstore"
	"github.com/ai-device/ota/ports"
	"github.com/ai-device/ota/tests/contract"
	"github.com/ai-device/ota/tests/testenv"
)

func openBlobs(t *testing.T, storeURL string) ports.ArtifactBlobs {
	t.Helper()
	s, err := blobstore.Open(context.Background(), storeURL)
	if err != nil {
		t.Fatalf("blobstore.Open(%s): %v", blobstore.Redacted(storeURL), err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestFileArtifactBlobs runs the blob contract on a directory (fileblob),
// the default store. Leftovers are files of the key's name in the
// directory or in os.TempDir.
func TestFileArtifactBlobs(t *testing.T) {
	dir := t.TempDir()
	storeURL := "file://" + filepath.ToSlash(dir)
	contract.RunArtifactBlobs(t, func(t *testing.T) contract.BlobStore {
		return contract.BlobStore{
			Blobs:   openBlobs(t, storeURL),
			Replica: func(t *testing.T) ports.ArtifactBlobs { return openBlobs(t, storeURL) },
			Leftovers: func(t *testing.T, key string) []string {
				var left []string
				base := path.Base(key)
				for _, d := range []string{filepath.Join(dir, filepath.FromSlash(path.Dir(key))), os.TempDir()} {
					entries, _ := os.ReadDir(d)
					for _, e := range entries {
						if strings.HasPrefix(e.Name(), base) {
							left = append(left, filepath.Join(d, e.Name()))
						}
					}
				}
				return left
			},
		}
	})
}

// TestS3ArtifactBlobs runs the blob contract on a real S3-compatible server
// (SeaweedFS's S3 gateway, or OTA_TEST_S3_URL's). Leftovers are multipart
// uploads begun and not aborted.
func TestS3ArtifactBlobs(t *testing.T) {
	srv := testenv.S3(t)
	storeURL := srv.NewBucket(t)
	u, _ := url.Parse(storeURL)
	contract.RunArtifactBlobs(t, func(t *testing.T) contract.BlobStore {
		return contract.BlobStore{
			Blobs:   openBlobs(t, storeURL),
			Replica: func(t *testing.T) ports.ArtifactBlobs { return openBlobs(t, storeURL) },
			Leftovers: func(t *testing.T, key string) []string {
				left, err := srv.PendingUploads(context.Background(), u.Host, key)
				if err != nil {
					t.Fatalf("listing multipart uploads: %v", err)
				}
				return left
			},
		}
	})
}
