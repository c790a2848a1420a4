package application_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ai-device/ota/adapters/local"
	"github.com/ai-device/ota/adapters/memory"
	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// mapBlobs is ports.ArtifactBlobs in a map, with Put's contract: an
// object appears only once all of its body was read.
type mapBlobs struct {
	mu      sync.Mutex
	objects map[string][]byte
	failDel error
}

func (m *mapBlobs) Put(ctx context.Context, key string, r io.Reader) (int64, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return int64(len(b)), err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.objects[key] = b
	return int64(len(b)), nil
}

func (m *mapBlobs) Open(ctx context.Context, key string) (ports.BlobObject, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.objects[key]
	if !ok {
		return nil, domain.ErrNotFound
	}
	return mapObject{bytes.NewReader(b)}, nil
}

func (m *mapBlobs) Delete(ctx context.Context, key string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failDel != nil {
		return m.failDel
	}
	delete(m.objects, key)
	return nil
}

func (m *mapBlobs) Presign(context.Context, string, time.Duration) (string, error) {
	return "", ports.ErrPresignUnsupported
}

func (m *mapBlobs) keys() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for k := range m.objects {
		out = append(out, k)
	}
	return out
}

type mapObject struct{ *bytes.Reader }

func (mapObject) Close() error       { return nil }
func (o mapObject) Size() int64      { return o.Reader.Size() }
func (mapObject) ModTime() time.Time { return time.Time{} }

// inspectorFunc is an ArtifactInspector; raw reads every file as opaque
// (adapters/artifactfile reads .mender and .swu files).
type inspectorFunc func(name string, obj ports.BlobObject) (domain.ArtifactMeta, error)

func (f inspectorFunc) Inspect(_ context.Context, name string, obj ports.BlobObject) (domain.ArtifactMeta, error) {
	return f(name, obj)
}

var raw = inspectorFunc(func(string, ports.BlobObject) (domain.ArtifactMeta, error) {
	return domain.ArtifactMeta{Format: domain.ArtifactRaw}, nil
})

type failingRepo struct {
	ports.ArtifactRepository
	err error
}

func (f failingRepo) Create(context.Context, domain.Artifact, domain.AuditRecord) (domain.Artifact, bool, error) {
	return domain.Artifact{}, false, f.err
}

type artifactEnv struct {
	store *memory.Store
	blobs *mapBlobs
	repo  ports.ArtifactRepository
	svc   *application.Artifacts
}

func newArtifactEnv(t *testing.T, inspect application.ArtifactInspector, repo func(ports.ArtifactRepository) ports.ArtifactRepository) artifactEnv {
	t.Helper()
	store := memory.NewStore()
	var r ports.ArtifactRepository = memory.NewArtifacts(store)
	if repo != nil {
		r = repo(r)
	}
	blobs := &mapBlobs{objects: map[string][]byte{}}
	svc, err := application.NewArtifacts(blobs, r, inspect, local.NewClock(), local.NewUUIDs(), 1000)
	if err != nil {
		t.Fatal(err)
	}
	return artifactEnv{store: store, blobs: blobs, repo: r, svc: svc}
}

// nothingLeft asserts the failed upload left no object and no row.
func (e artifactEnv) nothingLeft(t *testing.T) {
	t.Helper()
	if k := e.blobs.keys(); len(k) > 0 {
		t.Errorf("objects left behind: %v", k)
	}
	if l, _ := e.repo.List(context.Background()); len(l) > 0 {
		t.Errorf("rows left behind: %d", len(l))
	}
}

func sum256(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

func TestUploadStoresBytesAndRow(t *testing.T) {
	e := newArtifactEnv(t, raw, nil)
	body := []byte("firmware image bytes")
	a, created, err := e.svc.Upload(context.Background(), testActor, ports.ArtifactUpload{FileName: "fw.bin", Body: bytes.NewReader(body),
		SHA256: strings.ToUpper(sum256(body))})
	if err != nil || !created {
		t.Fatalf("Upload = %v, %v", created, err)
	}
	d := a.Digest()
	s1, m5 := sha1.Sum(body), md5.Sum(body)
	if d.Size != int64(len(body)) || d.SHA256 != sum256(body) || d.SHA1 != hex.EncodeToString(s1[:]) || d.MD5 != hex.EncodeToString(m5[:]) {
		t.Errorf("digest = %+v", d)
	}
	if got := e.blobs.objects[a.StorageKey()]; !bytes.Equal(got, body) {
		t.Errorf("stored object = %q, want the body", got)
	}
	// The same bytes again, under another name: the first artifact, and
	// no second object.
	again, created, err := e.svc.Upload(context.Background(), testActor, ports.ArtifactUpload{FileName: "copy.bin", Body: bytes.NewReader(body)})
	if err != nil || created || again.ID() != a.ID() {
		t.Fatalf("the same content again = %s created %v, %v; want %s, not created", again.ID(), created, err, a.ID())
	}
	if k := e.blobs.keys(); len(k) != 1 || k[0] != a.StorageKey() {
		t.Errorf("objects after the duplicate = %v, want only %s", k, a.StorageKey())
	}
}

func TestUploadRefusalsLeaveNothing(t *testing.T) {
	body := []byte("some image")
	boom := errors.New("database down")
	for _, c := range []struct {
		name    string
		up      ports.ArtifactUpload
		inspect application.ArtifactInspector
		repo    func(ports.ArtifactRepository) ports.ArtifactRepository
		want    error
	}{
		{name: "traversal", up: ports.ArtifactUpload{FileName: "../x", Body: bytes.NewReader(body)}, want: domain.ErrValidation},
		{name: "separator", up: ports.ArtifactUpload{FileName: "a/b", Body: bytes.NewReader(body)}, want: domain.ErrValidation},
		{name: "backslash", up: ports.ArtifactUpload{FileName: `..\x`, Body: bytes.NewReader(body)}, want: domain.ErrValidation},
		{name: "dotdot", up: ports.ArtifactUpload{FileName: "..", Body: bytes.NewReader(body)}, want: domain.ErrValidation},
		{name: "bad declared sha256", up: ports.ArtifactUpload{FileName: "a.bin", Body: bytes.NewReader(body), SHA256: "xyz"}, want: domain.ErrValidation},
		{name: "wrong checksum", up: ports.ArtifactUpload{FileName: "a.bin", Body: bytes.NewReader(body), SHA256: sum256([]byte("other"))}, want: domain.ErrChecksumMismatch},
		{name: "too large", up: ports.ArtifactUpload{FileName: "a.bin", Body: bytes.NewReader(make([]byte, 1001))}, want: domain.ErrArtifactTooLarge},
		{name: "announced too large", up: ports.ArtifactUpload{FileName: "a.bin", Body: bytes.NewReader(body), Announced: 1001}, want: domain.ErrArtifactTooLarge},
		{name: "empty", up: ports.ArtifactUpload{FileName: "a.bin", Body: bytes.NewReader(nil)}, want: domain.ErrValidation},
		{name: "unreadable", up: ports.ArtifactUpload{FileName: "a.mender", Body: bytes.NewReader(body)},
			inspect: inspectorFunc(func(string, ports.BlobObject) (domain.ArtifactMeta, error) {
				return domain.ArtifactMeta{}, &domain.ArtifactFormatError{Format: domain.ArtifactMender, Reason: "truncated"}
			}), want: domain.ErrArtifactUnreadable},
		{name: "row refused", up: ports.ArtifactUpload{FileName: "a.bin", Body: bytes.NewReader(body)},
			repo: func(r ports.ArtifactRepository) ports.ArtifactRepository { return failingRepo{r, boom} }, want: boom},
	} {
		t.Run(c.name, func(t *testing.T) {
			inspect := c.inspect
			if inspect == nil {
				inspect = raw
			}
			e := newArtifactEnv(t, inspect, c.repo)
			if _, _, err := e.svc.Upload(context.Background(), testActor, c.up); !errors.Is(err, c.want) {
				t.Fatalf("Upload = %v, want %v", err, c.want)
			}
			e.nothingLeft(t)
		})
	}
}

// The limit is exact: max bytes pass, max+1 do not.
func TestUploadLimitIsInclusive(t *testing.T) {
	e := newArtifactEnv(t, raw, nil)
	if _, _, err := e.svc.Upload(context.Background(), testActor, ports.ArtifactUpload{FileName: "a.bin", Body: bytes.NewReader(bytes.Repeat([]byte{1}, 1000))}); err != nil {
		t.Fatalf("an upload of exactly the limit: %v", err)
	}
}

// A refusal whose clean-up fails keeps its meaning (the caller's error
// code) and says what was left.
func TestUploadCleanupFailureKeepsCause(t *testing.T) {
	e := newArtifactEnv(t, raw, nil)
	e.blobs.failDel = errors.New("store down")
	_, _, err := e.svc.Upload(context.Background(), testActor, ports.ArtifactUpload{FileName: "a.bin", Body: strings.NewReader("abc"), SHA256: sum256([]byte("x"))})
	if !errors.Is(err, domain.ErrChecksumMismatch) || !strings.Contains(err.Error(), "could not be removed") {
		t.Fatalf("Upload = %v, want a checksum mismatch saying the bytes were not removed", err)
	}
}

func TestDeleteArtifact(t *testing.T) {
	e := newArtifactEnv(t, raw, nil)
	ctx := context.Background()
	a, _, err := e.svc.Upload(ctx, testActor, ports.ArtifactUpload{FileName: "a.bin", Body: strings.NewReader("abc")})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.svc.DeleteArtifact(ctx, testActor, a.ID()); err != nil {
		t.Fatalf("DeleteArtifact: %v", err)
	}
	e.nothingLeft(t)
	// The delete's record says which file went: the artifact as it was.
	entries, err := e.store.ListAudit(ctx, ports.AuditFilter{Action: domain.AuditArtifactDelete})
	if err != nil || len(entries) != 1 {
		t.Fatalf("artifact.delete records: %d, %v", len(entries), err)
	}
	if b := string(entries[0].Record.Before()); !strings.Contains(b, `"file_name":"a.bin"`) || !strings.Contains(b, a.Digest().SHA256) {
		t.Errorf("artifact.delete's before = %s, want the deleted artifact's file name and sha256", b)
	}
	if err := e.svc.DeleteArtifact(ctx, testActor, a.ID()); !errors.Is(err, domain.ErrNotFound) {
		t.Errorf("deleting it again = %v, want ErrNotFound", err)
	}
}
