package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"

	"github.com/ai-device/ota/domain"
)

// device is one simulated device and what it knows.
type device struct {
	id    string
	token string

	busy      atomic.Bool  // a worker is acting for it
	notBefore atomic.Int64 // unix nanos: honouring a Retry-After

	mu       sync.Mutex
	version  string    // the current_version it reports
	task     *simTask  // the task it is working on, nil when none
	handed   []handout // every task the service handed it, once each
	noUpdate bool      // some check was answered update_available false
	// phase, in (0, 1], is the share of the poll interval the device's
	// first rest takes (-honour-poll). The simulator starts every device
	// at once, where a real fleet's polls are spread over the interval;
	// left in step, the whole fleet would poll in one burst a poll
	// interval apart and sit idle between, so a stage that opened in the
	// lull would wait for the next burst. From its second check on, the
	// fleet polls evenly.
	phase  float64
	rested bool // the first rest is behind it
}

// rest is how long the device waits, answered no update, before it checks
// again: the answer's poll interval, the first time its phase of it.
// Called with d.mu held.
func (d *device) rest(poll time.Duration) time.Duration {
	if d.rested {
		return poll
	}
	d.rested = true
	return time.Duration(float64(poll) * d.phase)
}

// simTask is a task a device walks through its events.
type simTask struct {
	id         string
	firmwareID string
	version    string
	step       int // next index into walkSteps
	failAt     int // step at which the device reports failed instead, -1 never
}

// handout is a task the service handed a device, with the final status the
// service confirmed for it ("" while none).
type handout struct {
	id, firmwareID, final string
}

// walkSteps is how a device reports a task's progress.
var walkSteps = []struct {
	status   string
	progress int
}{
	{"downloading", 30},
	{"downloading", 100},
	{"downloaded", 100},
	{"installing", 50},
	{"succeeded", 100},
}

// resumeStep is where a device picks up a task the service already knows
// at status st (a task left by an earlier run, say).
func resumeStep(st string) int {
	switch st {
	case "downloading":
		return 1
	case "downloaded":
		return 3
	case "installing":
		return 4
	default:
		return 0
	}
}

// fleet is the simulated devices of one model.
type fleet struct {
	model   string
	devices []*device
}

// deviceID names the i-th simulated device of a model.
func deviceID(model string, i int) string { return fmt.Sprintf("%s-%07d", model, i) }

// deviceToken is the deterministic token of a seeded device: the simulator
// can recompute it on every run, and the database only holds its SHA-256.
func deviceToken(secret, id string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(id))
	return "sim_" + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// index is the position of a simulated device id in the fleet.
func (f *fleet) index(id string) (int, bool) {
	num, ok := strings.CutPrefix(id, f.model+"-")
	if !ok || len(num) != 7 {
		return 0, false
	}
	i, err := strconv.Atoi(num)
	if err != nil || i < 0 || i >= len(f.devices) {
		return 0, false
	}
	return i, true
}

func newFleet(model, baseVersion string, n int) *fleet {
	f := &fleet{model: model, devices: make([]*device, n)}
	for i := range f.devices {
		f.devices[i] = &device{id: deviceID(model, i), version: baseVersion, phase: float64(i+1) / float64(n)}
	}
	return f
}

// seedResult says what seeding did.
type seedResult struct {
	Inserted   int64   `json:"inserted"`
	Existing   int64   `json:"existing"`
	Mismatched int64   `json:"mismatched"` // existing rows with another token or model: they will be refused
	Seconds    float64 `json:"seconds"`
}

// seedDevices gives every device its deterministic token and makes sure it
// exists in the database. One ordered scan of the primary key finds the
// devices an earlier run left (they are kept as they are; those with
// another token or model are counted), and the missing ones are COPYed
// straight into devices: a fresh million takes one COPY, a reused one a
// read.
func seedDevices(ctx context.Context, db *sqlx.DB, f *fleet, secret, baseVersion string) (seedResult, error) {
	start := time.Now()
	for _, d := range f.devices {
		d.token = deviceToken(secret, d.id)
	}
	var out seedResult
	exists := make([]bool, len(f.devices))
	// Every simulated id sorts between the first and the last (same prefix,
	// fixed-width number); other ids in that range are skipped.
	rows, err := db.QueryContext(ctx, `SELECT device_id, model, token_hash FROM devices
		WHERE device_id >= $1 AND device_id <= $2`, f.devices[0].id, f.devices[len(f.devices)-1].id)
	if err != nil {
		return seedResult{}, fmt.Errorf("reading existing devices: %w", err)
	}
	for rows.Next() {
		var id, model string
		var hash []byte
		if err := rows.Scan(&id, &model, &hash); err != nil {
			rows.Close()
			return seedResult{}, err
		}
		i, ok := f.index(id)
		if !ok {
			continue
		}
		exists[i] = true
		out.Existing++
		if want := domain.HashToken(f.devices[i].token); model != f.model || !bytes.Equal(hash, want[:]) {
			out.Mismatched++
		}
	}
	if err := rows.Err(); err != nil {
		return seedResult{}, fmt.Errorf("reading existing devices: %w", err)
	}
	if out.Existing == int64(len(f.devices)) {
		out.Seconds = time.Since(start).Seconds()
		return out, nil
	}

	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		return seedResult{}, err
	}
	defer func() { _ = tx.Rollback() }()
	stmt, err := tx.PrepareContext(ctx, `COPY devices (device_id, model, current_version, token_hash, created_at) FROM STDIN`)
	if err != nil {
		return seedResult{}, err
	}
	// created_at in UTC microseconds, as the service writes it.
	now := time.Now().UTC().Truncate(time.Microsecond)
	for i, d := range f.devices {
		if exists[i] {
			continue
		}
		h := domain.HashToken(d.token)
		if _, err := stmt.ExecContext(ctx, d.id, f.model, baseVersion, h[:], now); err != nil {
			stmt.Close()
			return seedResult{}, fmt.Errorf("copying devices: %w", err)
		}
		out.Inserted++
	}
	if _, err := stmt.ExecContext(ctx); err != nil {
		stmt.Close()
		return seedResult{}, fmt.Errorf("copying devices (did another run seed them meanwhile?): %w", err)
	}
	if err := stmt.Close(); err != nil {
		return seedResult{}, err
	}
	if err := tx.Commit(); err != nil {
		return seedResult{}, err
	}
	// Fresh statistics, so that the service's first queries after a large
	// seed are planned for the table as it now is.
	if _, err := db.ExecContext(ctx, `ANALYZE devices`); err != nil {
		return seedResult{}, err
	}
	out.Seconds = time.Since(start).Seconds()
	return out, nil
}

// registerDevices registers every device through the admin API (the way
// operators do), or, for a device that already exists, rotates its token:
// the simulator must know every token. workers bounds the concurrency.
func registerDevices(ctx context.Context, cl *client, f *fleet, baseVersion string, workers int) (seedResult, error) {
	start := time.Now()
	var inserted, existing atomic.Int64
	var firstErr error
	var errOnce sync.Once
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	next := atomic.Int64{}
	var wg sync.WaitGroup
	for range min(workers, len(f.devices)) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(f.devices) || ctx.Err() != nil {
					return
				}
				d := f.devices[i]
				var reg struct {
					Token string `json:"token"`
				}
				a, err := cl.admin(ctx, http.MethodPost, "/devices",
					map[string]string{"device_id": d.id, "model": f.model, "current_version": baseVersion},
					&reg, http.StatusCreated)
				if err == nil {
					inserted.Add(1)
				} else if a.Status == http.StatusConflict && a.Code == "DEVICE_EXISTS" {
					_, err = cl.admin(ctx, http.MethodPost, "/devices/"+url.PathEscape(d.id)+"/token", nil,
						&reg, http.StatusOK)
					existing.Add(1)
				}
				if err != nil {
					errOnce.Do(func() { firstErr = fmt.Errorf("registering %s: %w", d.id, err); cancel() })
					return
				}
				d.token = reg.Token
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return seedResult{}, firstErr
	}
	if err := ctx.Err(); err != nil {
		return seedResult{}, err
	}
	return seedResult{Inserted: inserted.Load(), Existing: existing.Load(), Seconds: time.Since(start).Seconds()}, nil
}

// published is a firmware and its rollout.
type published struct {
	FirmwareID string `json:"firmware_id"`
	Version    string `json:"version"`
	RolloutID  string `json:"rollout_id"`
	Percentage int    `json:"percentage"`
}

type firmwareBody struct {
	Model     string `json:"model"`
	Version   string `json:"version"`
	URL       string `json:"url"`
	SizeBytes int64  `json:"size_bytes"`
	SHA256    string `json:"sha256"`
}

func newFirmwareBody(model, version string) firmwareBody {
	sum := sha256.Sum256([]byte(model + "@" + version))
	return firmwareBody{
		Model: model, Version: version, URL: "https://firmware.example/" + model + "/" + version + ".bin",
		SizeBytes: 16 << 20, SHA256: hex.EncodeToString(sum[:]),
	}
}

// publish publishes a firmware version through the admin API and starts a
// rollout of it: at percent, or, when stages are given, a staged rollout
// whose gates ask minFinished finished tasks of each stage, 95% succeeded.
func publish(ctx context.Context, cl *client, model, version string, percent int, stages []int, minFinished int) (published, error) {
	var fw struct {
		ID string `json:"id"`
	}
	if _, err := cl.admin(ctx, http.MethodPost, "/firmwares", newFirmwareBody(model, version), &fw, http.StatusCreated); err != nil {
		return published{}, err
	}
	var ro struct {
		ID string `json:"id"`
	}
	body := map[string]any{"firmware_id": fw.ID, "percentage": percent}
	if len(stages) > 0 {
		plan := make([]map[string]any, len(stages))
		for i, p := range stages {
			plan[i] = map[string]any{"percentage": p, "min_finished": minFinished, "success_percent": 95}
		}
		body = map[string]any{"firmware_id": fw.ID, "stages": plan}
		percent = stages[0]
	}
	if _, err := cl.admin(ctx, http.MethodPost, "/rollouts", body, &ro, http.StatusCreated); err != nil {
		return published{}, err
	}
	return published{FirmwareID: fw.ID, Version: version, RolloutID: ro.ID, Percentage: percent}, nil
}

// historyVersion is the firmware the historical tasks belong to: below any
// version a device reports, and its rollout is cancelled, so it is never
// offered.
const historyVersion = "0.0.1"

// historyResult says what seeding the history did.
type historyResult struct {
	Inserted int64   `json:"inserted"`
	Existing int64   `json:"existing"`
	Seconds  float64 `json:"seconds"`
}

// seedHistory makes sure at least n finished tasks of the history firmware
// exist on the fleet's devices, adding the missing ones with COPY: mostly
// succeeded, some failed and cancelled, spread over the last 90 days. The
// firmware and its rollout are made through the admin API.
func seedHistory(ctx context.Context, db *sqlx.DB, cl *client, f *fleet, n int) (historyResult, error) {
	start := time.Now()
	var ids struct {
		FirmwareID string         `db:"firmware_id"`
		RolloutID  sql.NullString `db:"rollout_id"`
	}
	err := db.GetContext(ctx, &ids, `SELECT f.id::text AS firmware_id, r.id::text AS rollout_id
		FROM firmwares f LEFT JOIN rollouts r ON r.firmware_id = f.id
		WHERE f.model = $1 AND f.version_key = $2 ORDER BY r.created_at LIMIT 1`, f.model, historyVersion)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		var fw struct {
			ID string `json:"id"`
		}
		if _, err := cl.admin(ctx, http.MethodPost, "/firmwares", newFirmwareBody(f.model, historyVersion), &fw, http.StatusCreated); err != nil {
			return historyResult{}, err
		}
		ids.FirmwareID = fw.ID
	case err != nil:
		return historyResult{}, err
	}
	if !ids.RolloutID.Valid {
		var ro struct {
			ID string `json:"id"`
		}
		if _, err := cl.admin(ctx, http.MethodPost, "/rollouts",
			map[string]any{"firmware_id": ids.FirmwareID, "percentage": 0}, &ro, http.StatusCreated); err != nil {
			return historyResult{}, err
		}
		if _, err := cl.admin(ctx, http.MethodPatch, "/rollouts/"+ro.ID,
			map[string]any{"status": "cancelled"}, nil, http.StatusOK); err != nil {
			return historyResult{}, err
		}
		ids.RolloutID = sql.NullString{String: ro.ID, Valid: true}
	}
	var out historyResult
	if err := db.GetContext(ctx, &out.Existing, `SELECT count(*) FROM tasks WHERE firmware_id = $1`, ids.FirmwareID); err != nil {
		return historyResult{}, err
	}
	need := int64(n) - out.Existing
	if need <= 0 {
		out.Seconds = time.Since(start).Seconds()
		return out, nil
	}
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		return historyResult{}, err
	}
	defer func() { _ = tx.Rollback() }()
	stmt, err := tx.PrepareContext(ctx, `COPY tasks (id, device_id, firmware_id, rollout_id,
		status, progress, attempt, error_code, created_at, updated_at) FROM STDIN`)
	if err != nil {
		return historyResult{}, err
	}
	// Rows go in created_at order with time-ordered (version 7) ids, so the
	// primary key and the created_at indexes grow at their right edge
	// instead of taking random inserts: three times faster at a million.
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(n)))
	now := time.Now().UTC().Truncate(time.Microsecond)
	const span = 90 * 24 * time.Hour
	step := max(span/time.Duration(need), time.Microsecond)
	first := now.Add(-span)
	for i := int64(0); i < need; i++ {
		d := f.devices[int((out.Existing+i)%int64(len(f.devices)))]
		created := first.Add(time.Duration(i)*step + time.Duration(rng.Int64N(int64(step)))).Truncate(time.Microsecond)
		status, progress, errorCode := "succeeded", 100, any(nil)
		switch r := rng.IntN(100); {
		case r < 8:
			status, progress, errorCode = "failed", rng.IntN(100), "DOWNLOAD_FAILED"
		case r < 10:
			status, progress, errorCode = "cancelled", 0, "SUPERSEDED"
		}
		updated := created.Add(time.Duration(rng.Int64N(int64(time.Hour)))).Truncate(time.Microsecond)
		if _, err := stmt.ExecContext(ctx, uuidV7(created, rng), d.id, ids.FirmwareID, ids.RolloutID.String,
			status, progress, 1, errorCode, created, updated); err != nil {
			stmt.Close()
			return historyResult{}, fmt.Errorf("copying tasks: %w", err)
		}
	}
	if _, err := stmt.ExecContext(ctx); err != nil {
		stmt.Close()
		return historyResult{}, fmt.Errorf("copying tasks: %w", err)
	}
	if err := stmt.Close(); err != nil {
		return historyResult{}, err
	}
	// The history rollout's counters, recounted as migration 00110
	// backfills them: COPY goes round the task transactions that keep them.
	if _, err := tx.ExecContext(ctx, `DELETE FROM rollout_counters WHERE rollout_id = $1`, ids.RolloutID.String); err != nil {
		return historyResult{}, err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO rollout_counters (rollout_id, stage_started_at, status, shard, devices)
		SELECT $1, '0001-01-01 00:00:00+00', status, 0, count(*) FROM (
			SELECT DISTINCT ON (device_id) status FROM tasks WHERE rollout_id = $1
			ORDER BY device_id, (status IN ('succeeded', 'failed')) DESC, created_at DESC, action_id DESC) c
		GROUP BY status`, ids.RolloutID.String); err != nil {
		return historyResult{}, fmt.Errorf("recounting the history rollout: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return historyResult{}, err
	}
	if _, err := db.ExecContext(ctx, `ANALYZE tasks`); err != nil {
		return historyResult{}, err
	}
	out.Inserted = need
	out.Seconds = time.Since(start).Seconds()
	return out, nil
}

// uuidV7 is a version 7 UUID (RFC 9562) for time t: 48 bits of Unix
// milliseconds, then random bits.
func uuidV7(t time.Time, rng *rand.Rand) string {
	var b [16]byte
	ms := uint64(t.UnixMilli())
	for i := range 6 {
		b[i] = byte(ms >> (40 - 8*i))
	}
	binary.BigEndian.PutUint16(b[6:], uint16(rng.Uint32()))
	binary.BigEndian.PutUint64(b[8:], rng.Uint64())
	b[6] = 0x70 | b[6]&0x0f // version 7
	b[8] = 0x80 | b[8]&0x3f // RFC 9562 variant
	return uuid.UUID(b).String()
}
