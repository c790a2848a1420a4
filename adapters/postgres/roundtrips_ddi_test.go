package postgres_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"testing"
	"time"

	"github.com/ai-device/ota/adapters/postgres"
	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/application/ddi"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// TestDDIPollRoundTrips counts the database round trips of a hawkBit
// device's poll (target-token authentication, then the poll: the check and
// the pending-cancel lookup) on the serving wiring, and asserts them: the
// device, its task state and its attributes come with the authentication
// (one statement), and the only other read is the pending cancel, which
// lives in its own table.
func TestDDIPollRoundTrips(t *testing.T) {
	ctx := context.Background()
	deps, devices, admin, db, writes := servingRoundTrips(t)
	uc, err := ddi.New(devices, deps.Devices, deps.Rollouts, deps.Attributes, postgres.NewTaskActionRepository(db), deps.Tasks, deps.Metrics,
		deps.Clock, application.PollInterval(time.Hour), "sw_version")
	must(t, err)

	model, bare := "ddi-rt-"+newID()[:8], "ddi-rt-bare-"+newID()[:8]
	fw, err := admin.PublishFirmware(ctx, testActor, domain.FirmwareSpec{Model: model, Version: "2.0.0",
		URL: "https://fw.example/rt.swu", SizeBytes: 10, SHA256: sha(7), SHA1: sha(8)[:40]})
	must(t, err)
	_, err = admin.StartRollout(ctx, testActor, ports.StartRollout{FirmwareID: fw.ID().String(), Spec: domain.RolloutSpec{Percentage: 100}})
	must(t, err)
	register := func(id, m string) ports.DeviceCredentials {
		c, err := admin.RegisterDevice(ctx, testActor, ports.RegisterDevice{DeviceID: id, Model: m, CurrentVersion: "1.0.0"})
		must(t, err)
		_, err = uc.ConfigData(ctx, asDeviceID(id), "merge", map[string]string{"sw_version": "1.0.0"})
		must(t, err)
		return c
	}
	withTask, idle := register(model+"-1", model), register(bare+"-1", bare)

	poll := func(c ports.DeviceCredentials) (ddi.Poll, int64) {
		t.Helper()
		before := writes.Load()
		p, err := ddiPoll(ctx, uc, c)
		must(t, err)
		return p, writes.Load() - before
	}
	first, _ := poll(withTask)
	if first.Deployment == nil {
		t.Fatal("first poll: no deployment")
	}
	poll(idle)
	time.Sleep(50 * time.Millisecond) // the admin writes' notifications land

	p, reuse := poll(withTask)
	if p.Deployment == nil || p.Deployment.Task.ID() != first.Deployment.Task.ID() || p.WantConfigData {
		t.Fatalf("reuse: %+v", p)
	}
	p, noUpd := poll(idle)
	if p.Deployment != nil || p.Cancel != nil || p.WantConfigData {
		t.Fatalf("no update: %+v", p)
	}
	t.Logf("DDI poll: reuse %d round trips, no update %d", reuse, noUpd)
	const want = 2 // the device with its task state and attributes (auth); the pending cancel
	if reuse != want || noUpd != want {
		t.Errorf("DDI poll: reuse %d, no update %d round trips, want %d each", reuse, noUpd, want)
	}
}

// ddiPoll authenticates a device by its target token and polls, as the
// DDI edge does.
func ddiPoll(ctx context.Context, uc *ddi.UseCases, c ports.DeviceCredentials) (ddi.Poll, error) {
	dev, err := uc.AuthenticateTarget(ctx, c.Token, c.Device.ID())
	if err != nil {
		return ddi.Poll{}, err
	}
	return uc.Poll(ctx, dev)
}

// TestMenderGenerationRoundTrips counts what checking a Mender session
// token's generation adds to every call a token admits: one round trip
// (one column by primary key, prepared once).
func TestMenderGenerationRoundTrips(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	db, writes := countingPool(t, e.url)
	adm := postgres.NewAdmissionRepository(db)
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	must(t, err)
	der, err := x509.MarshalPKIXPublicKey(pub)
	must(t, err)
	key, err := domain.ParseDeviceKey("pubkey", string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})))
	must(t, err)
	now := time.Now()
	id := "mender-rt-" + newID()[:8]
	d, err := domain.NewDevice(asDeviceID(id), "m", "", domain.HashToken(newID()), now)
	must(t, err)
	a, err := domain.NewDeviceAdmission(asDeviceID(id), key, now)
	must(t, err)
	must(t, adm.CreateDevice(ctx, d, a, domain.AuditRecord{}))

	for i := range 3 {
		before := writes.Load()
		gen, err := adm.Generation(ctx, asDeviceID(id))
		must(t, err)
		n := writes.Load() - before
		if gen != 1 {
			t.Fatalf("generation %d, want 1", gen)
		}
		if i > 0 && n != 1 { // the first call also prepares the statement
			t.Errorf("generation read #%d: %d round trips, want 1", i, n)
		}
	}
}
