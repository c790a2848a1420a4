package e2e

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

// lockKey is where rueidislock keeps the lock {device_id}:{firmware_id}
// under otad's key prefix (docs/DOMAIN.md check rule 7).
func lockKey(deviceID, firmwareID string) string {
	return "ota:lock:0:" + deviceID + ":" + firmwareID
}

// redisClient is a plain client on the test Redis, to play another holder
// of a lock.
func redisClient(t *testing.T, redisURL string) rueidis.Client {
	t.Helper()
	opt, err := rueidis.ParseURL(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	opt.DisableCache = true
	c, err := rueidis.NewClient(opt)
	if err != nil {
		t.Fatalf("connecting to Redis: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// holdLock sets the lock key as if another replica held it, for ttl.
func holdLock(t *testing.T, rc rueidis.Client, key string, ttl time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cmd := rc.B().Arbitrary("SET").Keys(key).Args("e2e-other-holder", "PX", strconv.FormatInt(ttl.Milliseconds(), 10)).Build()
	if err := rc.Do(ctx, cmd).Error(); err != nil {
		t.Fatalf("holding %s: %v", key, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = rc.Do(ctx, rc.B().Del().Key(key).Build()).Error()
	})
}

// testLockHeldElsewhere plays another replica holding a device's
// {device_id}:{firmware_id} lock (docs/DOMAIN.md check rule 7):
//   - while it is held for longer than OTA_LOCK_WAIT, a check that must
//     create the task waits the whole bound and then answers SERVICE_BUSY
//     (503, Retry-After), writing nothing; other devices are not held up;
//   - when the holder's key goes away during the wait, the waiting check
//     takes the lock then and answers 200, well before the bound.
func testLockHeldElsewhere(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// Long enough that "woken when the holder left" and "waited the whole
	// bound" stay far apart on a loaded machine.
	const lockWait = 2 * time.Second
	c := newClient(t, e.start(t, instanceConfig{lockWait: lockWait.String(), env: noRateLimit}, "G")[0])
	rc := redisClient(t, e.redisURL)
	admin := e.adminToken
	model, dev, other := uniq("cam"), uniq("dev"), uniq("dev")
	fwID := c.publishFirmware(t, admin, model, "1.5.0")
	c.startRollout(t, admin, fwID, 100)
	token := c.registerDevice(t, admin, dev, model, "1.4.0")
	otherTok := c.registerDevice(t, admin, other, model, "1.4.0")

	holdLock(t, rc, lockKey(dev, fwID), 30*time.Second)
	r := c.do(t, checkCall(dev, token, model, "1.4.0"))
	wantError(t, r, http.StatusServiceUnavailable, "SERVICE_BUSY")
	if ra := r.header.Get("Retry-After"); !wholeSeconds.MatchString(ra) {
		t.Errorf("SERVICE_BUSY: Retry-After = %q, want whole seconds", ra)
	}
	const slack = time.Second // generous: -race, two cores, parallel tests
	busyAfter := r.elapsed
	if r.elapsed < lockWait || r.elapsed > lockWait+slack {
		t.Errorf("SERVICE_BUSY for a held lock after %v, want the whole OTA_LOCK_WAIT (%v) and at most %v more",
			r.elapsed, lockWait, slack)
	}
	var n int
	if err := e.db.GetContext(ctxTimeout(t), &n, `SELECT count(*) FROM tasks WHERE device_id = $1`, dev); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("database: %d tasks for %s after SERVICE_BUSY, want none", n, dev)
	}
	// The lock is per device and firmware: another device is not held up.
	r = c.do(t, checkCall(other, otherTok, model, "1.4.0"))
	wantStatus(t, r, http.StatusOK)
	if r.elapsed >= lockWait {
		t.Errorf("another device's check took %v while %s's lock was held: it waited for a lock it does not need", r.elapsed, dev)
	}

	// The holder's key now expires during the wait: the check gets the lock
	// once it is gone, not when the wait runs out.
	const held = 400 * time.Millisecond
	holdLock(t, rc, lockKey(dev, fwID), held)
	r = c.do(t, checkCall(dev, token, model, "1.4.0"))
	wantStatus(t, r, http.StatusOK)
	if task := decode[checkJSON](t, r).Task; task == nil || task.Status != "pending" {
		t.Fatalf("check after the holder went away: want a pending task, got %s", r)
	}
	if r.elapsed < held/2 || r.elapsed >= lockWait {
		t.Errorf("check waiting for a lock held %v more answered after %v, want after the holder left and before OTA_LOCK_WAIT (%v)",
			held, r.elapsed, lockWait)
	}
	t.Logf("OTA_LOCK_WAIT %v: SERVICE_BUSY after %v; lock held %v more: got it after %v", lockWait, busyAfter, held, r.elapsed)
}
