package main

import (
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/ai-device/ota/domain"
)

// consistency is what the database says after the run.
type consistency struct {
	// (1) at most one active task per device, over the whole table.
	MultiActiveDevices int64    `json:"multi_active_devices"`
	MultiActiveSample  []string `json:"multi_active_sample,omitempty"`
	// (2) every task the simulator was handed exists, on that device, and
	// holds the final status the service confirmed.
	HandedTasks   int64    `json:"handed_tasks"`
	MissingTasks  int64    `json:"missing_tasks"`
	MissingSample []string `json:"missing_sample,omitempty"`
	WrongDevice   int64    `json:"wrong_device"`
	WrongFinal    int64    `json:"wrong_final"`
	// Tasks created during the run on the model's firmware, and how many of
	// them no device was handed (a check answered after its caller timed
	// out, say): reported, not an invariant.
	RunTasks    int64 `json:"run_tasks"`
	UnseenTasks int64 `json:"unseen_tasks"`
	// Duplicate creation: a task created during the run while an earlier
	// task of the same device and firmware was still live (active, or
	// finished only after the new one was created). A device that reports
	// an older version again is legitimately offered the same firmware
	// anew, once the earlier task is over.
	DuplicatePairs  int64    `json:"duplicate_pairs"`
	DuplicateSample []string `json:"duplicate_sample,omitempty"`
	// (3) the creation burst, with -publish: exactly one task per admitted
	// device for the published firmware.
	Burst *burstCheck `json:"burst,omitempty"`
}

// burstCheck compares the tasks of the published firmware created during
// the run with the rollout rule (domain.Bucket) and with what the devices
// were answered. An admitted device may have none when all its checks were
// refused SERVICE_BUSY, or when it was handed an older task it had started.
type burstCheck struct {
	FirmwareID       string `json:"firmware_id"`
	Admitted         int64  `json:"admitted"`           // devices the rollout admits
	WithOneTask      int64  `json:"with_one_task"`      // admitted devices with exactly one task
	WithoutTask      int64  `json:"without_task"`       // admitted devices with none (all their checks failed, or the answer named another task)
	Duplicates       int64  `json:"duplicates"`         // devices with more than one
	NotAdmittedTasks int64  `json:"not_admitted_tasks"` // devices outside the rollout with a task
	AdmittedNoUpdate int64  `json:"admitted_no_update"` // admitted devices answered update_available false
}

// verifyChunk bounds the ids sent per query.
const verifyChunk = 20_000

// verify reads the consistency of the run from the database. runStart
// scopes "created during the run"; burst adds the burst checks.
func verify(ctx context.Context, db *sqlx.DB, f *fleet, fw *published, runStart time.Time, burst bool) (*consistency, error) {
	c := &consistency{}
	active := `('pending', 'downloading', 'downloaded', 'installing')`

	// (1)
	if err := db.GetContext(ctx, &c.MultiActiveDevices, `SELECT count(*) FROM (
		SELECT device_id FROM tasks WHERE status IN `+active+` GROUP BY device_id HAVING count(*) > 1) x`); err != nil {
		return nil, fmt.Errorf("counting active tasks: %w", err)
	}
	if c.MultiActiveDevices > 0 {
		if err := db.SelectContext(ctx, &c.MultiActiveSample, `SELECT device_id FROM tasks WHERE status IN `+active+`
			GROUP BY device_id HAVING count(*) > 1 ORDER BY device_id LIMIT 5`); err != nil {
			return nil, err
		}
	}

	// (2)
	var ids, devs, finals []string
	for _, d := range f.devices {
		d.mu.Lock()
		for _, h := range d.handed {
			ids = append(ids, h.id)
			devs = append(devs, d.id)
			finals = append(finals, h.final)
		}
		d.mu.Unlock()
	}
	c.HandedTasks = int64(len(ids))
	var seenInRun int64
	for lo := 0; lo < len(ids); lo += verifyChunk {
		hi := min(lo+verifyChunk, len(ids))
		var r struct {
			Missing     int64          `db:"missing"`
			WrongDevice int64          `db:"wrong_device"`
			WrongFinal  int64          `db:"wrong_final"`
			InRun       int64          `db:"in_run"`
			Sample      pq.StringArray `db:"sample"`
		}
		err := db.GetContext(ctx, &r, `SELECT
			count(*) FILTER (WHERE t.id IS NULL) AS missing,
			count(*) FILTER (WHERE t.device_id <> h.device_id) AS wrong_device,
			count(*) FILTER (WHERE h.final <> '' AND t.status IS DISTINCT FROM h.final) AS wrong_final,
			count(*) FILTER (WHERE t.created_at >= $4) AS in_run,
			coalesce((array_agg(h.id::text ORDER BY h.id) FILTER (WHERE t.id IS NULL))[1:5], '{}') AS sample
			FROM unnest($1::uuid[], $2::text[], $3::text[]) AS h(id, device_id, final)
			LEFT JOIN tasks t ON t.id = h.id`,
			pq.StringArray(ids[lo:hi]), pq.StringArray(devs[lo:hi]), pq.StringArray(finals[lo:hi]), runStart)
		if err != nil {
			return nil, fmt.Errorf("looking up handed tasks: %w", err)
		}
		c.MissingTasks += r.Missing
		c.WrongDevice += r.WrongDevice
		c.WrongFinal += r.WrongFinal
		seenInRun += r.InRun
		if len(c.MissingSample) < 5 {
			c.MissingSample = append(c.MissingSample, r.Sample[:min(len(r.Sample), 5-len(c.MissingSample))]...)
		}
	}

	// Tasks created during the run on the model's firmware, and duplicates
	// among the (device, firmware) pairs the run touched.
	if err := db.GetContext(ctx, &c.RunTasks, `SELECT count(*) FROM tasks t
		JOIN firmwares f ON f.id = t.firmware_id
		WHERE f.model = $1 AND t.created_at >= $2`, f.model, runStart); err != nil {
		return nil, fmt.Errorf("counting the run's tasks: %w", err)
	}
	c.UnseenTasks = max(c.RunTasks-seenInRun, 0)
	var dups []struct {
		DeviceID   string `db:"device_id"`
		FirmwareID string `db:"firmware_id"`
	}
	if err := db.SelectContext(ctx, &dups, `SELECT DISTINCT b.device_id, b.firmware_id::text AS firmware_id
		FROM tasks b
		JOIN firmwares f ON f.id = b.firmware_id
		JOIN tasks a ON a.device_id = b.device_id AND a.firmware_id = b.firmware_id
		 AND (a.created_at, a.id) < (b.created_at, b.id)
		WHERE f.model = $1 AND b.created_at >= $2
		  AND (a.status IN `+active+` OR b.created_at < a.updated_at)
		ORDER BY 1, 2`, f.model, runStart); err != nil {
		return nil, fmt.Errorf("looking for duplicate tasks: %w", err)
	}
	c.DuplicatePairs = int64(len(dups))
	for i := 0; i < len(dups) && i < 5; i++ {
		c.DuplicateSample = append(c.DuplicateSample, dups[i].DeviceID+"/"+dups[i].FirmwareID)
	}

	// (3)
	if burst && fw != nil {
		b, err := verifyBurst(ctx, db, f, fw, runStart)
		if err != nil {
			return nil, err
		}
		c.Burst = b
	}
	return c, nil
}

func verifyBurst(ctx context.Context, db *sqlx.DB, f *fleet, fw *published, runStart time.Time) (*burstCheck, error) {
	var rows []struct {
		DeviceID string `db:"device_id"`
		N        int64  `db:"n"`
	}
	if err := db.SelectContext(ctx, &rows, `SELECT device_id, count(*) AS n FROM tasks
		WHERE firmware_id = $1 AND created_at >= $2 GROUP BY device_id`, fw.FirmwareID, runStart); err != nil {
		return nil, fmt.Errorf("counting the burst's tasks: %w", err)
	}
	per := make(map[string]int64, len(rows))
	for _, r := range rows {
		per[r.DeviceID] = r.N
	}
	b := &burstCheck{FirmwareID: fw.FirmwareID}
	for _, d := range f.devices {
		n := per[d.id]
		admitted := domain.Bucket(fw.RolloutID, d.id) < fw.Percentage
		d.mu.Lock()
		noUpdate := d.noUpdate
		d.mu.Unlock()
		if n > 1 {
			b.Duplicates++
		}
		if !admitted {
			if n > 0 {
				b.NotAdmittedTasks++
			}
			continue
		}
		b.Admitted++
		switch n {
		case 0:
			b.WithoutTask++
		case 1:
			b.WithOneTask++
		}
		if noUpdate {
			b.AdmittedNoUpdate++
		}
	}
	return b, nil
}
