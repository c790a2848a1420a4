package contract

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/application/mender"
	"github.com/ai-device/ota/domain"
)

// MenderRepos is one adapter's storage ports with what Mender's device API
// adds: device admissions, pending auth requests, firmware by artifact
// name and task logs.
type MenderRepos struct {
	Repos
	Admissions AdmissionStore
	Requests   mender.AuthRequests
	Catalog    mender.ArtifactCatalog
	Logs       mender.TaskLogs
}

// AdmissionStore is an adapter's admission store as a whole: what the
// Mender use cases (mender.DeviceAdmissions) and the keyed registration
// (application.KeyedAdmissions) each take of it.
type AdmissionStore interface {
	mender.DeviceAdmissions
	application.KeyedAdmissions
}

// RunMenderStores runs the contract of the Mender storage ports against the
// repositories newRepos returns. Each call must return an empty store:
// the auth request cases count every pending request.
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
	t.Run("UpdateDeviceChangesTheDeviceAndItsAdmissionTogether", func(t *testing.T) {
		t.Parallel()
		r := newRepos(t)
		updateDeviceContract(t, newRepoSuite(r.Repos), r)
	})
	t.Run("AuthRequests", func(t *testing.T) {
		t.Parallel()
		r := newRepos(t)
		authRequestsContract(t, newRepoSuite(r.Repos), r)
	})
	t.Run("PendingCountIsOfPendingRequestsOnly", func(t *testing.T) {
		t.Parallel()
		r := newRepos(t)
		pendingCountContract(t, newRepoSuite(r.Repos), r)
	})
	t.Run("ExpiredRequestsAreDeleted", func(t *testing.T) {
		t.Parallel()
		r := newRepos(t)
		expiryContract(t, newRepoSuite(r.Repos), r)
	})
	t.Run("ConcurrentAsksHoldTheBound", func(t *testing.T) {
		t.Parallel()
		r := newRepos(t)
		concurrentCapContract(t, newRepoSuite(r.Repos), r)
	})
	t.Run("RegisteredDevicesInOneRead", func(t *testing.T) {
		t.Parallel()
		r := newRepos(t)
		registeredContract(t, newRepoSuite(r.Repos), r)
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
	if err := r.Admissions.CreateDevice(ctx, d, a, domain.AuditRecord{}); err != nil {
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
	if err := r.Admissions.CreateDevice(ctx, d, a2, domain.AuditRecord{}); !errors.Is(err, domain.ErrDeviceExists) {
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
	}, domain.AuditRecord{})
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
	}, domain.AuditRecord{}); !errors.Is(err, domain.ErrNotFound) {
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
	if err := r.Admissions.CreateDevice(ctx, d, a, domain.AuditRecord{}); err != nil {
		t.Fatal(err)
	}
	for want := int64(2); want <= 3; want++ {
		got, err := r.Admissions.Admit(ctx, d.ID(), func(cur *domain.DeviceAdmission) (domain.DeviceAdmission, error) {
			next := *cur
			next.RevokeSessions(s.at(2))
			return next, nil
		}, domain.AuditRecord{})
		if err != nil || got.Generation() != want || !got.Key().Equal(k) {
			t.Fatalf("revoked: %v gen=%d, want %d with the same key", err, got.Generation(), want)
		}
		if gen, err := r.Admissions.Generation(ctx, d.ID()); err != nil || gen != want {
			t.Fatalf("stored generation after revocation: %d, %v, want %d", gen, err, want)
		}
	}
}

// updateDeviceContract: UpdateDevice stores the device's change and, for
// a keyed device, its admission's, together; when the device's change
// fails neither is stored; a device without a key stays without one.
func updateDeviceContract(t *testing.T, s *repoSuite, r MenderRepos) {
	ctx := t.Context()
	keyed, err := domain.NewDevice(asDeviceID(repoName("keyed")), repoName("m"), "", s.hash(t), s.at(0))
	if err != nil {
		t.Fatal(err)
	}
	a, _ := domain.NewDeviceAdmission(keyed.ID(), newDeviceKey(t), s.at(1))
	if err := r.Admissions.CreateDevice(ctx, keyed, a, domain.AuditRecord{}); err != nil {
		t.Fatal(err)
	}
	plain, err := domain.NewDevice(asDeviceID(repoName("plain")), repoName("m"), "", s.hash(t), s.at(0))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Devices.Create(ctx, plain, domain.AuditRecord{}); err != nil {
		t.Fatal(err)
	}
	rotate := func(h domain.TokenHash) func(*domain.Device) error {
		return func(d *domain.Device) error { d.RotateToken(h); return nil }
	}
	revoke := func(a *domain.DeviceAdmission) { a.RevokeSessions(s.at(2)) }
	stored := func(id domain.DeviceID) (domain.TokenHash, int64) {
		t.Helper()
		d, err := r.Devices.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		gen, err := r.Admissions.Generation(ctx, id)
		if err != nil && !errors.Is(err, domain.ErrNotFound) {
			t.Fatal(err)
		}
		return d.TokenHash(), gen
	}

	refused := errors.New("refused")
	if _, err := r.Admissions.UpdateDevice(ctx, keyed.ID(), func(d *domain.Device) error {
		d.RotateToken(s.hash(t))
		return refused
	}, revoke, domain.AuditRecord{}); !errors.Is(err, refused) {
		t.Fatalf("a refused change: %v", err)
	}
	if h, gen := stored(keyed.ID()); h != keyed.TokenHash() || gen != a.Generation() {
		t.Fatalf("after a refused change: generation %d (want %d), token changed: %v", gen, a.Generation(), h != keyed.TokenHash())
	}

	h := s.hash(t)
	got, err := r.Admissions.UpdateDevice(ctx, keyed.ID(), rotate(h), revoke, domain.AuditRecord{})
	if err != nil || got.TokenHash() != h {
		t.Fatalf("UpdateDevice: %v, token stored: %v", err, got.TokenHash() == h)
	}
	if sh, gen := stored(keyed.ID()); sh != h || gen != a.Generation()+1 {
		t.Fatalf("after UpdateDevice: generation %d (want %d), token stored: %v", gen, a.Generation()+1, sh == h)
	}

	h = s.hash(t)
	if _, err := r.Admissions.UpdateDevice(ctx, plain.ID(), rotate(h), revoke, domain.AuditRecord{}); err != nil {
		t.Fatal(err)
	}
	if sh, _ := stored(plain.ID()); sh != h {
		t.Fatal("a device without a key: its change was not stored")
	}
	if _, err := r.Admissions.Get(ctx, plain.ID()); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("a device without a key has an admission after UpdateDevice: %v", err)
	}
	if _, err := r.Admissions.UpdateDevice(ctx, asDeviceID(repoName("nobody")), rotate(s.hash(t)), revoke, domain.AuditRecord{}); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("UpdateDevice of an unknown device: %v, want not found", err)
	}
}

// ask is an Ask that records a new request for (device, key) when none
// exists and there is room under max pending requests; it returns the
// request the store had (nil if none) and the pending count it was given.
func ask(t *testing.T, r MenderRepos, device domain.DeviceID, k domain.DeviceKey, at time.Time, max int) (*domain.AuthRequest, int) {
	t.Helper()
	var (
		seen    *domain.AuthRequest
		counted int
	)
	err := r.Requests.Ask(t.Context(), device, k, func(cur *domain.AuthRequest, pending int) (*domain.AuthRequest, error) {
		seen, counted = cur, pending
		if cur != nil || !domain.PendingRoom(pending, max) {
			return nil, nil
		}
		q, err := domain.NewAuthRequest(domain.UUIDOf(uuid.New()), device, `{"device_id":"`+device.String()+`"}`, k, "", at)
		return &q, err
	})
	if err != nil {
		t.Fatal(err)
	}
	return seen, counted
}

func pendingOf(t *testing.T, r MenderRepos) []domain.AuthRequest {
	t.Helper()
	list, err := r.Requests.List(t.Context(), domain.AuthRequestPending, 100000)
	if err != nil {
		t.Fatal(err)
	}
	return list
}

func authRequestsContract(t *testing.T, s *repoSuite, r MenderRepos) {
	ctx := t.Context()
	deviceID := asDeviceID(repoName("dev"))
	k := newDeviceKey(t)
	if cur, _ := ask(t, r, deviceID, k, s.at(1), 100); cur != nil {
		t.Fatal("a request for a device that never asked")
	}
	list := pendingOf(t, r)
	if len(list) != 1 {
		t.Fatalf("pending after one request: %d", len(list))
	}
	made := list[0]
	got, err := r.Requests.Get(ctx, made.ID())
	if err != nil || got.DeviceID() != deviceID || !got.Key().Equal(k) || got.Status() != domain.AuthRequestPending ||
		!got.CreatedAt().Equal(repoUs(s.at(1))) {
		t.Fatalf("stored request: %v %+v", err, got)
	}
	// The same key again finds the request.
	if cur, _ := ask(t, r, deviceID, k, s.at(2), 100); cur == nil || cur.ID() != made.ID() {
		t.Fatalf("Ask did not load the device's request with this key: %v", cur)
	}
	rej, err := r.Requests.Update(ctx, made.ID(), func(q *domain.AuthRequest) error { q.Reject(s.at(2)); return nil }, domain.AuditRecord{})
	if err != nil || rej.Status() != domain.AuthRequestRejected {
		t.Fatalf("reject: %v %v", err, rej.Status())
	}
	if containsRequest(pendingOf(t, r), made.ID()) {
		t.Fatal("a rejected request is still pending")
	}
	// The same key stays rejected.
	if cur, _ := ask(t, r, deviceID, k, s.at(3), 100); cur == nil || cur.Status() != domain.AuthRequestRejected {
		t.Fatalf("the rejected key asking again: %v", cur)
	}
	// A rejected request is not accepted.
	d, _ := domain.NewDevice(deviceID, repoName("m"), "", s.hash(t), s.at(3))
	a, _ := domain.NewDeviceAdmission(deviceID, k, s.at(3))
	if err := r.Requests.Accept(ctx, made.ID(), &d, admitAs(a), domain.AuditRecord{}); err == nil {
		t.Fatal("accepted a rejected request")
	}
	if _, err := s.Devices.Get(ctx, deviceID); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("a refused accept registered the device: %v", err)
	}
	// Another key is another request; the rejected one stays as it was.
	k2 := newDeviceKey(t)
	if cur, _ := ask(t, r, deviceID, k2, s.at(4), 100); cur != nil {
		t.Fatalf("another key found the first key's request %s", cur.ID())
	}
	list = pendingOf(t, r)
	if len(list) != 1 || list[0].ID() == made.ID() || !list[0].Key().Equal(k2) {
		t.Fatalf("pending after another key: %+v", list)
	}
	second := list[0]
	if q, err := r.Requests.Get(ctx, made.ID()); err != nil || q.Status() != domain.AuthRequestRejected || !q.Key().Equal(k) {
		t.Fatalf("the rejected request changed: %v %v", err, q.Status())
	}
	// Accepting registers the device, stores exactly the request's key and
	// deletes the request.
	a2, _ := domain.NewDeviceAdmission(deviceID, k2, s.at(5))
	if err := r.Requests.Accept(ctx, second.ID(), &d, admitAs(a2), domain.AuditRecord{}); err != nil {
		t.Fatal(err)
	}
	if got, err := r.Admissions.Get(ctx, deviceID); err != nil || !got.Key().Equal(k2) {
		t.Fatalf("accepted admission: %v", err)
	}
	if _, err := r.Requests.Get(ctx, second.ID()); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("accepted request still stored: %v", err)
	}
	// Accepting a registered device again hands admit its admission as
	// stored: domain.AdmitKey then moves its tokens' generation on when the
	// key is replaced, and leaves it when the key is the same.
	acceptAgain := func(k domain.DeviceKey, at time.Time) int64 {
		t.Helper()
		ask(t, r, deviceID, k, at, 100)
		var id domain.UUID
		for _, q := range pendingOf(t, r) {
			if q.DeviceID() == deviceID && q.Key().Equal(k) {
				id = q.ID()
			}
		}
		var handed *domain.DeviceAdmission
		admit := func(cur *domain.DeviceAdmission) (domain.DeviceAdmission, error) {
			handed = cur
			return domain.AdmitKey(cur, deviceID, k, at)
		}
		if err := r.Requests.Accept(ctx, id, nil, admit, domain.AuditRecord{}); err != nil {
			t.Fatal(err)
		}
		if handed == nil || handed.DeviceID() != deviceID {
			t.Fatalf("accepting a registered device handed admit %v, want its admission", handed)
		}
		gen, err := r.Admissions.Generation(ctx, deviceID)
		repoNoErr(t, "generation", err)
		return gen
	}
	gen0, err := r.Admissions.Generation(ctx, deviceID)
	repoNoErr(t, "generation", err)
	if gen := acceptAgain(k2, s.at(6)); gen != gen0 {
		t.Errorf("the same key accepted again: generation %d, want %d kept", gen, gen0)
	}
	if gen := acceptAgain(newDeviceKey(t), s.at(7)); gen <= gen0 {
		t.Errorf("a replaced key: generation %d, want past %d", gen, gen0)
	}
	// Delete removes a request, pending or rejected, once.
	if err := r.Requests.Delete(ctx, made.ID(), domain.AuditRecord{}); err != nil {
		t.Fatalf("delete a rejected request: %v", err)
	}
	if _, err := r.Requests.Get(ctx, made.ID()); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("deleted request still stored: %v", err)
	}
	if err := r.Requests.Delete(ctx, made.ID(), domain.AuditRecord{}); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("delete twice: %v, want not found", err)
	}
	if err := r.Requests.Delete(ctx, asUUID("not-a-uuid"), domain.AuditRecord{}); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("delete a bad id: %v, want not found", err)
	}
	if _, err := r.Requests.Get(ctx, asUUID("not-a-uuid")); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("bad id: %v", err)
	}
}

// pendingCountContract: the count Ask hands fn is of pending requests
// only, so rejected ones never hold the queue full.
func pendingCountContract(t *testing.T, s *repoSuite, r MenderRepos) {
	ctx := t.Context()
	ids := make([]domain.DeviceID, 3)
	for i := range ids {
		ids[i] = asDeviceID(repoName("dev"))
		ask(t, r, ids[i], newDeviceKey(t), s.at(i), 3)
	}
	if _, n := ask(t, r, asDeviceID(repoName("dev")), newDeviceKey(t), s.at(4), 3); n != 3 {
		t.Fatalf("pending count with 3 pending: %d", n)
	}
	if n := len(pendingOf(t, r)); n != 3 {
		t.Fatalf("a request over the bound was stored: %d pending", n)
	}
	for _, q := range pendingOf(t, r)[:2] {
		if _, err := r.Requests.Update(ctx, q.ID(), func(q *domain.AuthRequest) error { q.Reject(s.at(5)); return nil }, domain.AuditRecord{}); err != nil {
			t.Fatal(err)
		}
	}
	late := asDeviceID(repoName("dev"))
	if _, n := ask(t, r, late, newDeviceKey(t), s.at(6), 3); n != 1 {
		t.Fatalf("pending count with 1 pending and 2 rejected: %d, want 1", n)
	}
	list := pendingOf(t, r)
	if len(list) != 2 || list[1].DeviceID() != late {
		t.Fatalf("a device asking after rejections is not listed: %+v", list)
	}
}

// expiryContract: DeleteExpired deletes pending and rejected requests
// last changed before the cutoff, and only those.
func expiryContract(t *testing.T, s *repoSuite, r MenderRepos) {
	ctx := t.Context()
	old, rejected, fresh := asDeviceID(repoName("old")), asDeviceID(repoName("rejected")), asDeviceID(repoName("fresh"))
	ask(t, r, old, newDeviceKey(t), s.at(1), 100)
	ask(t, r, rejected, newDeviceKey(t), s.at(1), 100)
	ask(t, r, fresh, newDeviceKey(t), s.at(1), 100)
	for _, q := range pendingOf(t, r) {
		switch q.DeviceID() {
		case rejected:
			if _, err := r.Requests.Update(ctx, q.ID(), func(q *domain.AuthRequest) error { q.Reject(s.at(2)); return nil }, domain.AuditRecord{}); err != nil {
				t.Fatal(err)
			}
		case fresh:
			// Rejected later: changed after the cutoff, so kept.
			if _, err := r.Requests.Update(ctx, q.ID(), func(q *domain.AuthRequest) error { q.Reject(s.at(20)); return nil }, domain.AuditRecord{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	n, err := r.Requests.DeleteExpired(ctx, s.at(10))
	if err != nil || n != 2 {
		t.Fatalf("deleted %d expired requests (%v), want 2", n, err)
	}
	if len(pendingOf(t, r)) != 0 {
		t.Fatal("an expired pending request is still listed")
	}
	rej, err := r.Requests.List(ctx, domain.AuthRequestRejected, 100)
	if err != nil || len(rej) != 1 || rej[0].DeviceID() != fresh {
		t.Fatalf("rejected after expiry: %v %+v, want only the one rejected after the cutoff", err, rej)
	}
	if n, err := r.Requests.DeleteExpired(ctx, s.at(10)); err != nil || n != 0 {
		t.Fatalf("second expiry: %d %v", n, err)
	}
}

// concurrentCapContract races many new requests for different devices
// against a bound: exactly the bound is stored, never more.
func concurrentCapContract(t *testing.T, s *repoSuite, r MenderRepos) {
	const workers, max = 24, 5
	keys := make([]domain.DeviceKey, workers)
	for i := range keys {
		keys[i] = newDeviceKey(t)
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for i := 0; i < workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			device := asDeviceID(repoName("dev"))
			errs <- r.Requests.Ask(t.Context(), device, keys[i], func(cur *domain.AuthRequest, pending int) (*domain.AuthRequest, error) {
				if cur != nil || !domain.PendingRoom(pending, max) {
					return nil, nil
				}
				// Let the others count meanwhile: only Ask's serialisation
				// keeps them from seeing the same room.
				runtime.Gosched()
				q, err := domain.NewAuthRequest(domain.UUIDOf(uuid.New()), device, `{}`, keys[i], "", s.at(1))
				return &q, err
			})
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := len(pendingOf(t, r)); n != max {
		t.Fatalf("%d pending requests stored by %d concurrent asks under a bound of %d", n, workers, max)
	}
}

// registeredContract: Registered answers, in one call, which devices are
// registered, with their models and admissions.
func registeredContract(t *testing.T, s *repoSuite, r MenderRepos) {
	ctx := t.Context()
	plain := s.device(t, repoName("m"), "1.0.0")
	keyed, _ := domain.NewDevice(asDeviceID(repoName("dev")), repoName("m"), "", s.hash(t), s.at(0))
	k := newDeviceKey(t)
	a, _ := domain.NewDeviceAdmission(keyed.ID(), k, s.at(1))
	if err := r.Admissions.CreateDevice(ctx, keyed, a, domain.AuditRecord{}); err != nil {
		t.Fatal(err)
	}
	unknown := asDeviceID(repoName("nobody"))
	got, err := r.Admissions.Registered(ctx, []domain.DeviceID{plain.ID(), keyed.ID(), unknown})
	if err != nil || len(got) != 2 {
		t.Fatalf("registered: %v %d, want 2", err, len(got))
	}
	if p := got[plain.ID()]; p.Model != plain.Model() || p.Admission != nil {
		t.Fatalf("device without a key: %+v", p)
	}
	if q := got[keyed.ID()]; q.Model != keyed.Model() || q.Admission == nil || !q.Admission.Key().Equal(k) {
		t.Fatalf("device with a key: %+v", q)
	}
	if _, ok := got[unknown]; ok {
		t.Fatal("an unknown device is registered")
	}
	if got, err := r.Admissions.Registered(ctx, nil); err != nil || len(got) != 0 {
		t.Fatalf("no ids: %v %v", got, err)
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
	if err := s.Firmwares.Create(ctx, f2, domain.AuditRecord{}); !errors.Is(err, domain.ErrArtifactNameTaken) || !errors.Is(err, domain.ErrFirmwareExists) {
		t.Fatalf("duplicate artifact name: %v, want the artifact name taken (a firmware that exists)", err)
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

// admitAs is an Accept admit function that stores a whatever is stored.
func admitAs(a domain.DeviceAdmission) func(*domain.DeviceAdmission) (domain.DeviceAdmission, error) {
	return func(*domain.DeviceAdmission) (domain.DeviceAdmission, error) { return a, nil }
}
