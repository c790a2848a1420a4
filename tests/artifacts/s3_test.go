package artifacts

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/ai-device/ota/adapters/blobstore"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/tests/testenv"
)

// Two replicas behind one Postgres and one S3 bucket serve the same
// artifact: what one stored, the other answers (the same content uploaded
// to it is the stored artifact), and its bytes are in the bucket for any
// replica to read.
func TestReplicasShareOneBucket(t *testing.T) {
	t.Parallel()
	srv := testenv.S3(t)
	bucket := srv.NewBucket(t)
	_, dbURL := testenv.PostgresDB(t)
	otads := testenv.StartOtads(t, testenv.OtadConfig{DatabaseURL: dbURL, RedisURL: testenv.RedisURL(t), AdminToken: adminToken,
		Env: map[string]string{"OTA_ARTIFACT_STORE": bucket}}, "a", "b")
	a, b := rig{otad: otads[0]}, rig{otad: otads[1]}
	body := bytes.Repeat([]byte("replicated image "), 400_000) // 6.8 MB: a multipart upload to S3
	up := a.uploadRaw(t, "?filename=shared.bin", body, nil)
	if up.status != http.StatusCreated {
		t.Fatalf("upload to a = %d %s", up.status, up.raw)
	}
	id := up.body["id"].(string)
	if got := b.get(t, "/api/v1/admin/artifacts/"+id); got.status != 200 || got.body["sha256"] != sum(body) {
		t.Errorf("b's GET of a's artifact = %d %s", got.status, got.raw)
	}
	if again := b.uploadRaw(t, "?filename=again.bin", body, nil); again.status != http.StatusOK || again.body["id"] != id {
		t.Errorf("the same content uploaded to b = %d %s, want 200 with a's id", again.status, again.raw)
	}
	store, err := blobstore.Open(context.Background(), bucket)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	uid, _ := domain.ParseUUID("id", id)
	obj, err := store.Open(context.Background(), domain.ArtifactStorageKey(uid))
	if err != nil {
		t.Fatalf("the artifact's object: %v", err)
	}
	defer obj.Close()
	if got, err := io.ReadAll(obj); err != nil || !bytes.Equal(got, body) {
		t.Fatalf("the object in the bucket differs from the upload (%d bytes, %v)", len(got), err)
	}
}

// With the S3 server down an upload is 503 SERVICE_BUSY (with
// Retry-After) saying the store is unavailable, not a 500, and leaves no
// row; once it is back, uploads succeed again.
func TestStorageOutage(t *testing.T) {
	t.Parallel()
	t0 := time.Now()
	w := testenv.StartWeed(t)
	srv := w.Server()
	t.Logf("weed started in %v", time.Since(t0).Round(time.Millisecond))
	env := w.Credentials()
	env["OTA_ARTIFACT_STORE"] = srv.NewBucket(t)
	t.Logf("bucket made at %v", time.Since(t0).Round(time.Millisecond))
	r := startMemory(t, env)
	if a := r.uploadRaw(t, "?filename=before.bin", []byte("before the outage"), nil); a.status != http.StatusCreated {
		t.Fatalf("upload with the store up = %d %s", a.status, a.raw)
	}
	t0 = time.Now()
	w.Stop()
	t.Logf("weed stopped in %v", time.Since(t0).Round(time.Millisecond))
	t0 = time.Now()
	req, _ := http.NewRequest(http.MethodPost, r.otad.URL+"/api/v1/admin/artifacts?filename=during.bin", bytes.NewReader([]byte("during the outage")))
	req.Header.Set("Authorization", "Bearer "+adminToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	_ = res.Body.Close()
	t.Logf("the upload with the store down was answered in %v", time.Since(t0).Round(time.Millisecond))
	if res.StatusCode != http.StatusServiceUnavailable || !bytes.Contains(b, []byte(`"SERVICE_BUSY"`)) || res.Header.Get("Retry-After") == "" {
		t.Errorf("upload with the store down = %d %s (Retry-After %q), want 503 SERVICE_BUSY", res.StatusCode, b, res.Header.Get("Retry-After"))
	}
	if !bytes.Contains(b, []byte("artifact store is unavailable")) {
		t.Errorf("upload with the store down = %s, want a message saying the artifact store is unavailable", b)
	}
	if l := r.get(t, "/api/v1/admin/artifacts"); len(l.body["items"].([]any)) != 1 {
		t.Errorf("a row was written during the outage: %s", l.raw)
	}
	t0 = time.Now()
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Logf("weed restarted in %v", time.Since(t0).Round(time.Millisecond))
	t0 = time.Now()
	if a := r.uploadRaw(t, "?filename=after.bin", []byte("after the outage"), nil); a.status != http.StatusCreated {
		t.Errorf("upload once the store is back = %d %s", a.status, a.raw)
	}
	t.Logf("the upload once the store was back took %v", time.Since(t0).Round(time.Millisecond))
}
