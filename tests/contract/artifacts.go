package contract

import (
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// ArtifactRepos is one adapter's artifact store with the firmware store
// whose rows refer to it.
type ArtifactRepos struct {
	Artifacts ports.ArtifactRepository
	Firmwares ports.FirmwareRepository
}

// RunArtifacts runs the artifact repository contract. Subtests run in
// parallel with content of their own, so newRepos may hand all of them one
// store.
func RunArtifacts(t *testing.T, newRepos func(t *testing.T) ArtifactRepos) {
	t.Run("CreateGetList", func(t *testing.T) {
		t.Parallel()
		r := newRepos(t)
		ctx := t.Context()
		at := time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)
		meta := domain.ArtifactMeta{Format: domain.ArtifactMender, ArtifactName: "release-" + uuid.NewString(),
			DeviceTypes: []string{"cam-x1", "cam-x2"}, PayloadType: "rootfs-image",
			Provides: map[string]string{"rootfs-image.version": "1.2.3"}, Version: "1.2.3"}
		a := newArtifact(t, "image.mender", meta, at)
		got, created, err := r.Artifacts.Create(ctx, a, domain.AuditRecord{})
		if err != nil || !created {
			t.Fatalf("Create = %v, %v; want created", created, err)
		}
		wantSame(t, "Create", got, a)
		got, err = r.Artifacts.Get(ctx, a.ID())
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		wantSame(t, "Get", got, a)
		later := newArtifact(t, "later.bin", domain.ArtifactMeta{}, at.Add(time.Second))
		if _, _, err := r.Artifacts.Create(ctx, later, domain.AuditRecord{}); err != nil {
			t.Fatal(err)
		}
		list, err := r.Artifacts.List(ctx)
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		pos := map[domain.UUID]int{}
		for i, x := range list {
			pos[x.ID()] = i + 1
		}
		if pos[a.ID()] == 0 || pos[later.ID()] == 0 || pos[later.ID()] > pos[a.ID()] {
			t.Errorf("List positions: later %d, earlier %d; want both, newest first", pos[later.ID()], pos[a.ID()])
		}
		if later.Meta().Format != domain.ArtifactRaw {
			t.Errorf("an artifact without a format is %v, want raw", later.Meta().Format)
		}
	})

	t.Run("SameContentIsOneArtifact", func(t *testing.T) {
		t.Parallel()
		r := newRepos(t)
		ctx := t.Context()
		first := newArtifact(t, "a.bin", domain.ArtifactMeta{}, time.Now())
		if _, _, err := r.Artifacts.Create(ctx, first, domain.AuditRecord{}); err != nil {
			t.Fatal(err)
		}
		again := domain.RehydrateArtifact(uuid.NewString(), "b.bin", first.Digest(), domain.ArtifactMeta{Format: domain.ArtifactRaw}, time.Now())
		got, created, err := r.Artifacts.Create(ctx, again, domain.AuditRecord{})
		if err != nil || created || got.ID() != first.ID() {
			t.Fatalf("Create of stored content = %s, created %v, %v; want %s, not created", got.ID(), created, err, first.ID())
		}
		if _, err := r.Artifacts.Get(ctx, again.ID()); !errors.Is(err, domain.ErrNotFound) {
			t.Errorf("the second upload's id was stored (Get = %v)", err)
		}
	})

	t.Run("ConcurrentSameContent", func(t *testing.T) {
		t.Parallel()
		r := newRepos(t)
		base := newArtifact(t, "c.bin", domain.ArtifactMeta{}, time.Now())
		const n = 8
		ids := make([]domain.UUID, n)
		made := make([]bool, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				a := domain.RehydrateArtifact(uuid.NewString(), "c.bin", base.Digest(), domain.ArtifactMeta{Format: domain.ArtifactRaw}, time.Now())
				got, created, err := r.Artifacts.Create(t.Context(), a, domain.AuditRecord{})
				if err != nil {
					t.Errorf("Create: %v", err)
				}
				ids[i], made[i] = got.ID(), created
			})
		}
		wg.Wait()
		createdN := 0
		for i := range n {
			if made[i] {
				createdN++
			}
			if ids[i] != ids[0] {
				t.Errorf("concurrent uploads of one content got different artifacts: %s, %s", ids[0], ids[i])
			}
		}
		if createdN != 1 {
			t.Errorf("%d of %d concurrent uploads created the artifact, want 1", createdN, n)
		}
	})

	t.Run("DeleteOnlyWhileUnused", func(t *testing.T) {
		t.Parallel()
		r := newRepos(t)
		ctx := t.Context()
		a := newArtifact(t, "fw.swu", domain.ArtifactMeta{Format: domain.ArtifactSWU}, time.Now())
		if _, _, err := r.Artifacts.Create(ctx, a, domain.AuditRecord{}); err != nil {
			t.Fatal(err)
		}
		spec, err := domain.FirmwareSpec{Model: "art-" + uuid.NewString()[:8], Version: "1.0.0"}.WithArtifact(a)
		if err != nil {
			t.Fatal(err)
		}
		fw, err := domain.NewFirmware(domain.UUIDOf(uuid.New()), spec, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Firmwares.Create(ctx, fw, domain.AuditRecord{}); err != nil {
			t.Fatalf("publishing a firmware of the artifact: %v", err)
		}
		stored, err := r.Firmwares.Get(ctx, fw.ID())
		if err != nil || stored.ArtifactID() != a.ID() || stored.Spec().URL != "" {
			t.Fatalf("the firmware read back has artifact %q, url %q (%v); want %s, none", stored.ArtifactID(), stored.Spec().URL, err, a.ID())
		}
		var deleted []domain.Artifact // what each Delete handed its audit as the row before
		audit := func(before, _ domain.Artifact) (domain.AuditRecord, error) {
			deleted = append(deleted, before)
			return domain.AuditRecord{}, nil
		}
		if err := r.Artifacts.Delete(ctx, a.ID(), audit); !errors.Is(err, domain.ErrArtifactInUse) {
			t.Fatalf("Delete of an artifact a firmware refers to = %v, want ErrArtifactInUse", err)
		}
		if _, err := r.Artifacts.Get(ctx, a.ID()); err != nil {
			t.Fatalf("the refused Delete removed the artifact: %v", err)
		}
		unused := newArtifact(t, "unused.bin", domain.ArtifactMeta{}, time.Now())
		if _, _, err := r.Artifacts.Create(ctx, unused, domain.AuditRecord{}); err != nil {
			t.Fatal(err)
		}
		deleted = nil
		if err := r.Artifacts.Delete(ctx, unused.ID(), audit); err != nil {
			t.Fatalf("Delete of an unused artifact: %v", err)
		}
		if len(deleted) != 1 || deleted[0].ID() != unused.ID() || deleted[0].FileName() != unused.FileName() || deleted[0].Digest() != unused.Digest() {
			t.Errorf("the delete's audit was handed %+v as the row before, want the deleted artifact", deleted)
		}
		if _, err := r.Artifacts.Get(ctx, unused.ID()); !errors.Is(err, domain.ErrNotFound) {
			t.Errorf("Get after Delete = %v, want ErrNotFound", err)
		}
		for _, id := range []domain.UUID{unused.ID(), {}} {
			if err := r.Artifacts.Delete(ctx, id, audit); !errors.Is(err, domain.ErrNotFound) {
				t.Errorf("Delete(%q) of no artifact = %v, want ErrNotFound", id, err)
			}
		}
	})

	t.Run("FirmwareOfUnknownArtifact", func(t *testing.T) {
		t.Parallel()
		r := newRepos(t)
		ghost := newArtifact(t, "ghost.bin", domain.ArtifactMeta{}, time.Now()) // never stored
		spec, err := domain.FirmwareSpec{Model: "art-" + uuid.NewString()[:8], Version: "1.0.0"}.WithArtifact(ghost)
		if err != nil {
			t.Fatal(err)
		}
		fw, err := domain.NewFirmware(domain.UUIDOf(uuid.New()), spec, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Firmwares.Create(t.Context(), fw, domain.AuditRecord{}); !errors.Is(err, domain.ErrNotFound) {
			t.Errorf("a firmware of an artifact that does not exist = %v, want ErrNotFound", err)
		}
	})
}

// newArtifact is an artifact of unique content (its digests those of a
// fresh random string).
func newArtifact(t *testing.T, name string, meta domain.ArtifactMeta, at time.Time) domain.Artifact {
	t.Helper()
	body := []byte(uuid.NewString())
	s256, s1, m5 := sha256.Sum256(body), sha1.Sum(body), md5.Sum(body)
	a, err := domain.NewArtifact(domain.UUIDOf(uuid.New()), name, domain.ArtifactDigest{Size: int64(len(body)) + 1<<30,
		SHA256: hex.EncodeToString(s256[:]), SHA1: hex.EncodeToString(s1[:]), MD5: hex.EncodeToString(m5[:])}, meta, at)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func wantSame(t *testing.T, op string, got, want domain.Artifact) {
	t.Helper()
	if got.ID() != want.ID() || got.FileName() != want.FileName() || got.Digest() != want.Digest() ||
		!reflect.DeepEqual(got.Meta(), want.Meta()) || !got.CreatedAt().Equal(want.CreatedAt()) {
		t.Errorf("%s = %+v %s %+v %+v %s\nwant  %+v %s %+v %+v %s", op, got.ID(), got.FileName(), got.Digest(), got.Meta(), got.CreatedAt(),
			want.ID(), want.FileName(), want.Digest(), want.Meta(), want.CreatedAt())
	}
}
