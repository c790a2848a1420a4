package contract

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"testing"

	"github.com/google/uuid"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// MenderRepos is one adapter's storage ports with what Mender's device API
// adds: device admissions, pending auth requests, firmware by artifact
// name and task logs.
type MenderRepos struct {
	Repos
	Admissions ports.DeviceAdmissions
	Requests   ports.AuthRequests
	Catalog    ports.ArtifactCatalog
	Logs       ports.TaskLogs
}

// RunMenderStores runs the contract of the Mender storage ports against the
// repositories newRepos returns (which may share one store with other
// suites: the data is uniquely named).
func RunMenderStores(t *testing.T, newRepos func(t *testing.T) MenderRepos) {
	t.Run("Admissions", func(t *testing.T) {
		t.Parallel()
		r := newRepos(t)
		admissionsContract(t, newRepoSuite(r.Repos), r)
	})
	t.Run("RevokedSessionsMoveTheGenerationOnWithTheSameKey", func(t *testing.T) {
		t.Parallel()
		r := newRepos(t)
		revokeSessionsContract(t, newRepoSuite(r.Repos), r)
	})
	t.Run("AuthRequests", func(t *testing.T) {
		t.Parallel()
		r := newRepos(t)
		authRequestsContract(t, newRepoSuite(r.Repos), r)
	})
	t.Run("ArtifactCatalog", func(t *testing.T) {
		t.Parallel()
		r := newRepos(t)
		artifactContract(t, newRepoSuite(r.Repos), r)
	})
	t.Run("TaskLogs", func(t *testing.T) {
		t.Parallel()
		r := newRepos(t)
		taskLogsContract(t, newRepoSuite(r.Repos), r)
	})
}

func newDeviceKey(t *testing.T) domain.DeviceKey {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKIXPublicKey(pub)
	k, err := domain.ParseDeviceKey("public_key", string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func admissionsContract(t *testing.T, s *repoSuite, r MenderRepos) {
	ctx := t.Context()
	d, err := domain.NewDevice(asDeviceID(repoName("dev")), repoName("m"), "", s.hash(t), s.at(0))
	if err != nil {
		t.Fatal(err)
	}
	k1 := newDeviceKey(t)
	a, err := domain.NewDeviceAdmission(d.ID(), k1, s.at(1))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Admissions.Get(ctx, d.ID()); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("admission of an unknown device: %v", err)
	}
	if err := r.Admissions.CreateDevice(ctx, d, a); err != nil {
		t.Fatal(err)
	}
	got, err := r.Admissions.Get(ctx, d.ID())
	if gen, gerr := r.Admissions.Generation(ctx, d.ID()); gerr != nil || gen != 1 {
		t.Fatalf("generation of a new admission: %d, %v, want 1", gen, gerr)
	}
	if err != nil || !got.Key().Equal(k1) || got.Generation() != 1 || !got.UpdatedAt().Equal(repoUs(s.at(1))) {
		t.Fatalf("stored admission: %v gen=%d at=%v", err, got.Generation(), got.UpdatedAt())
	}
	if _, err := s.Devices.Get(ctx, d.ID()); err != nil {
		t.Fatalf("the device is registered with its key: %v", err)
	}
	// Taken id: neither the device nor the key changes.
	k2 := newDeviceKey(t)
	a2, _ := domain.NewDeviceAdmission(d.ID(), k2, s.at(2))
	if err := r.Admissions.CreateDevice(ctx, d, a2); !errors.Is(err, domain.ErrDeviceExists) {
		t.Fatalf("second registration: %v, want device exists", err)
	}
	if got, _ := r.Admissions.Get(ctx, d.ID()); !got.Key().Equal(k1) {
		t.Fatal("a refused registration replaced the key")
	}
	// Admit rotates the key, moving the generation on.
	got, err = r.Admissions.Admit(ctx, d.ID(), func(cur *domain.DeviceAdmission) (domain.DeviceAdmission, error) {
		if cur == nil {
			t.Fatal("Admit did not see the current admission")
		}
		next := *cur
		next.RotateKey(k2, s.at(3))
		return next, nil
	})
	if err != nil || !got.Key().Equal(k2) || got.Generation() != 2 {
		t.Fatalf("rotated: %v gen=%d", err, got.Generation())
	}
	// The generation every session-admitted call checks follows the
	// rotation.
	if gen, err := r.Admissions.Generation(ctx, d.ID()); err != nil || gen != 2 {
		t.Fatalf("generation after rotation: %d, %v, want 2", gen, err)
	}
	if _, err := r.Admissions.Generation(ctx, asDeviceID(repoName("nobody"))); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("generation of an unknown device: %v, want not found", err)
	}
	if _, err := r.Admissions.Admit(ctx, asDeviceID(repoName("nobody")), func(*domain.DeviceAdmission) (domain.DeviceAdmission, error) {
		return a, nil
	}); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("admit an unknown device: %v", err)
	}
}

// revokeSessionsContract: Admit storing the same key with its sessions
// revoked moves the stored generation on (a token rotation ends the
// device's Mender sessions), and keeps the key.
func revokeSessionsContract(t *testing.T, s *repoSuite, r MenderRepos) {
	ctx := t.Context()
	d, err := domain.NewDevice(asDeviceID(repoName("dev")), repoName("m"), "", s.hash(t), s.at(0))
	if err != nil {
		t.Fatal(err)
	}
	k := newDeviceKey(t)
	a, _ := domain.NewDeviceAdmission(d.ID(), k, s.at(1))
	if err := r.Admissions.CreateDevice(ctx, d, a); err != nil {
		t.Fatal(err)
	}
	for want := int64(2); want <= 3; want++ {
		got, err := r.Admissions.Admit(ctx, d.ID(), func(cur *domain.DeviceAdmission) (domain.DeviceAdmission, error) {
			next := *cur
			next.RevokeSessions(s.at(2))
			return next, nil
		})
		if err != nil || got.Generation() != want || !got.Key().Equal(k) {
			t.Fatalf("revoked: %v gen=%d, want %d with the same key", err, got.Generation(), want)
		}
		if gen, err := r.Admissions.Generation(ctx, d.ID()); err != nil || gen != want {
			t.Fatalf("stored generation after revocation: %d, %v, want %d", gen, err, want)
		}
	}
}

func authRequestsContract(t *testing.T, s *repoSuite, r MenderRepos) {
	ctx := t.Context()
	deviceID := repoName("dev")
	k := newDeviceKey(t)
	var made domain.AuthRequest
	err := r.Requests.Upsert(ctx, asDeviceID(deviceID), func(cur *domain.AuthRequest) (*domain.AuthRequest, error) {
		if cur != nil {
			t.Fatal("a request for a device that never asked")
		}
		q, err := domain.NewAuthRequest(domain.UUIDOf(uuid.New()), asDeviceID(deviceID), `{"device_id":"`+deviceID+`"}`, k, "", s.at(1))
		made = q
		return &q, err
	})
	if err != nil {
		t.Fatal(err)
	}
	n, err := r.Requests.Count(ctx)
	if err != nil || n < 1 {
		t.Fatalf("count: %d %v", n, err)
	}
	got, err := r.Requests.Get(ctx, made.ID())
	if err != nil || got.DeviceID().String() != deviceID || !got.Key().Equal(k) || got.Status() != domain.AuthRequestPending ||
		!got.CreatedAt().Equal(repoUs(s.at(1))) {
		t.Fatalf("stored request: %v %+v", err, got)
	}
	// A second Upsert sees the first; returning nil stores nothing.
	if err := r.Requests.Upsert(ctx, asDeviceID(deviceID), func(cur *domain.AuthRequest) (*domain.AuthRequest, error) {
		if cur == nil || cur.ID() != made.ID() {
			t.Fatalf("Upsert did not load the device's request: %v", cur)
		}
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	list, err := r.Requests.List(ctx, domain.AuthRequestPending, 100000)
	if err != nil || !containsRequest(list, made.ID()) {
		t.Fatalf("pending list: %v", err)
	}
	rej, err := r.Requests.Update(ctx, made.ID(), func(q *domain.AuthRequest) error { q.Reject(s.at(2)); return nil })
	if err != nil || rej.Status() != domain.AuthRequestRejected {
		t.Fatalf("reject: %v %v", err, rej.Status())
	}
	if list, _ := r.Requests.List(ctx, domain.AuthRequestPending, 100000); containsRequest(list, made.ID()) {
		t.Fatal("a rejected request is still pending")
	}
	// A rejected request is not accepted.
	d, _ := domain.NewDevice(asDeviceID(deviceID), repoName("m"), "", s.hash(t), s.at(3))
	a, _ := domain.NewDeviceAdmission(asDeviceID(deviceID), k, s.at(3))
	if err := r.Requests.Accept(ctx, made.ID(), &d, a); err == nil {
		t.Fatal("accepted a rejected request")
	}
	if _, err := s.Devices.Get(ctx, asDeviceID(deviceID)); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("a refused accept registered the device: %v", err)
	}
	// A new key makes it pending again; accepting registers the device,
	// stores the key and deletes the request.
	k2 := newDeviceKey(t)
	if err := r.Requests.Upsert(ctx, asDeviceID(deviceID), func(cur *domain.AuthRequest) (*domain.AuthRequest, error) {
		if !cur.Asked(cur.Identity(), k2, "", s.at(4)) {
			t.Fatal("a new key did not change the request")
		}
		return cur, nil
	}); err != nil {
		t.Fatal(err)
	}
	a2, _ := domain.NewDeviceAdmission(asDeviceID(deviceID), k2, s.at(5))
	if err := r.Requests.Accept(ctx, made.ID(), &d, a2); err != nil {
		t.Fatal(err)
	}
	if got, err := r.Admissions.Get(ctx, asDeviceID(deviceID)); err != nil || !got.Key().Equal(k2) {
		t.Fatalf("accepted admission: %v", err)
	}
	if _, err := r.Requests.Get(ctx, made.ID()); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("accepted request still stored: %v", err)
	}
	if _, err := r.Requests.Get(ctx, asUUID("not-a-uuid")); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("bad id: %v", err)
	}
}

func containsRequest(list []domain.AuthRequest, id domain.UUID) bool {
	for _, q := range list {
		if q.ID() == id {
			return true
		}
	}
	return false
}

func artifactContract(t *testing.T, s *repoSuite, r MenderRepos) {
	ctx := t.Context()
	model := repoName("m")
	spec := repoSpec(model, "1.0.0")
	spec.ArtifactName = "release 1"
	fw := s.firmware(t, spec, s.at(1), true)
	got, err := r.Catalog.ByArtifactName(ctx, model, "release 1")
	if err != nil || got.ID() != fw.ID() || got.ArtifactName() != "release 1" {
		t.Fatalf("by artifact name: %v %v", err, got.ID())
	}
	if stored, err := s.Firmwares.Get(ctx, fw.ID()); err != nil || stored.ArtifactName() != "release 1" {
		t.Fatalf("artifact name not kept: %v %q", err, stored.ArtifactName())
	}
	if _, err := r.Catalog.ByArtifactName(ctx, repoName("other"), "release 1"); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("another model's name: %v", err)
	}
	dup := repoSpec(model, "2.0.0")
	dup.ArtifactName = "release 1"
	f2, _ := domain.NewFirmware(domain.UUIDOf(uuid.New()), dup, s.at(2))
	if err := s.Firmwares.Create(ctx, f2); !errors.Is(err, domain.ErrFirmwareExists) {
		t.Fatalf("duplicate artifact name: %v, want firmware exists", err)
	}
	// Names are per model, and firmware without one never collide.
	other := repoSpec(repoName("m"), "1.0.0")
	other.ArtifactName = "release 1"
	s.firmware(t, other, s.at(3), true)
	s.firmware(t, repoSpec(model, "3.0.0"), s.at(4), true)
	s.firmware(t, repoSpec(model, "4.0.0"), s.at(5), true)
}

func taskLogsContract(t *testing.T, s *repoSuite, r MenderRepos) {
	ctx := t.Context()
	dev := s.device(t, repoName("m"), "1.0.0")
	o := s.offer(t, dev.Model(), "2.0.0")
	tk := s.insert(t, s.newTask(t, dev.ID(), o, 1, s.at(1)))
	if _, err := r.Logs.Get(ctx, tk.ID()); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("no log yet: %v", err)
	}
	lines := []domain.LogLine{{Level: "info", Message: "one", Timestamp: "t1"}, {Level: "error", Message: "two", Timestamp: "t2"}}
	if err := r.Logs.Put(ctx, domain.NewTaskLog(tk.ID(), lines, s.at(2))); err != nil {
		t.Fatal(err)
	}
	if err := r.Logs.Put(ctx, domain.NewTaskLog(tk.ID(), lines[1:], s.at(3))); err != nil {
		t.Fatal(err)
	}
	got, err := r.Logs.Get(ctx, tk.ID())
	if err != nil || len(got.Lines()) != 1 || got.Lines()[0] != lines[1] || !got.UpdatedAt().Equal(repoUs(s.at(3))) {
		t.Fatalf("log: %v %+v", err, got.Lines())
	}
	if err := r.Logs.Put(ctx, domain.NewTaskLog(asUUID(uuid.NewString()), lines, s.at(4))); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("log of an unknown task: %v", err)
	}
}
