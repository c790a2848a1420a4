package application_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"testing"
	"time"

	"github.com/ai-device/ota/adapters/local"
	"github.com/ai-device/ota/adapters/memory"
	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// admissionsFailingDeviceWrite is the memory admissions whose device
// change fails after the device was read, as a database that goes away
// mid-transaction makes it fail.
type admissionsFailingDeviceWrite struct{ *memory.Admissions }

func (a admissionsFailingDeviceWrite) UpdateDevice(ctx context.Context, id domain.DeviceID, fn func(*domain.Device) error,
	admit func(*domain.DeviceAdmission), rec domain.AuditRecord) (domain.Device, error) {
	return a.Admissions.UpdateDevice(ctx, id, func(d *domain.Device) error {
		if err := fn(d); err != nil {
			return err
		}
		return fmt.Errorf("storing device: %w", domain.ErrServiceBusy)
	}, admit, rec)
}

// A device token rotation that fails writes nothing (docs/DOMAIN.md A1:
// "the store's write and the record commit together or not at all";
// ERRORS.md: "Nothing was written by a request that got ... SERVICE_BUSY,
// so a retry is always safe"). For a device with a Mender key, the
// rotation ends the device's sessions and rotates its token in one
// change, with its audit record: when the change fails, the sessions
// stay, as the old token does, and the audit log rightly says nothing
// happened. (They were once two transactions, the sessions ended first.)
func TestFailedTokenRotationEndsNoSessionsUnrecorded(t *testing.T) {
	store := memory.NewStore()
	clock := &fixedClock{now: time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)}
	deps := application.Deps{
		Devices: memory.NewDevices(store), Firmwares: memory.NewFirmwares(store),
		Rollouts: memory.NewRollouts(store), Tasks: memory.NewTasks(store),
		Locker: local.NewLocker(time.Second, ports.NopLockMetrics{}), Clock: clock, IDs: local.NewUUIDs(),
		Metrics: ports.NopMetrics{}, Limiter: ports.Unlimited{},
		Attributes: memory.NewAttributes(store), Directory: memory.NewDirectory(store),
	}
	plain, err := application.NewAdmin(deps)
	if err != nil {
		t.Fatal(err)
	}
	admissions := memory.NewAdmissions(store)
	admin, err := application.NewKeyedAdmin(plain, admissionsFailingDeviceWrite{admissions}, clock)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(&priv.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	pub := string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
	if _, err := admin.RegisterDevice(ctx, testActor, ports.RegisterDevice{DeviceID: "dev-1", Model: "cam-x1", PublicKey: pub}); err != nil {
		t.Fatal(err)
	}
	id, _ := domain.ParseDeviceID("dev-1")
	before, err := admissions.Generation(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	records := func() int {
		es, err := store.ListAudit(ctx, ports.AuditFilter{Target: "dev-1", Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		return len(es)
	}
	recorded := records()

	if _, err := admin.RotateDeviceToken(ctx, testActor, id); err == nil {
		t.Fatal("the rotation succeeded with the device table failing")
	}
	after, err := admissions.Generation(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if after != before {
		t.Errorf("a failed rotation ended the device's Mender sessions (token generation %d -> %d), with %d new audit records",
			before, after, records()-recorded)
	}
}
