package postgres

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// DeviceDirectory keeps operators' tags in devices.tags and lists devices
// by model, tags (GIN on devices.tags) and attributes (GIN on
// device_attributes.attributes) in device_id keyset order.
type DeviceDirectory struct{ db *sqlx.DB }

// NewDeviceDirectory reads and writes through the given pool.
func NewDeviceDirectory(db *sqlx.DB) *DeviceDirectory { return &DeviceDirectory{db: db} }

// UpdateTags locks the devices in device_id order (so two bulk changes
// cannot deadlock), lets fn compute each one's tags and writes them, in one
// transaction. An unknown id is domain.ErrNotFound and nothing is written.
func (s *DeviceDirectory) UpdateTags(ctx context.Context, ids []domain.DeviceID, fn func(domain.DeviceID, []string) ([]string, error),
	rec domain.AuditRecord) (map[domain.DeviceID][]string, error) {
	typed := make(map[string]domain.DeviceID, len(ids))
	sorted := make([]string, 0, len(ids))
	for _, id := range ids {
		if id.IsZero() {
			return nil, fmt.Errorf("device: %w", domain.ErrNotFound)
		}
		typed[id.String()] = id
		sorted = append(sorted, id.String())
	}
	slices.Sort(sorted)
	sorted = slices.Compact(sorted)
	out := make(map[domain.DeviceID][]string, len(sorted))
	err := inTx(ctx, s.db, readCommitted, func(tx *sqlx.Tx) error {
		clear(out)
		rows, err := tx.QueryContext(ctx, `SELECT device_id, tags FROM devices WHERE device_id = ANY($1) ORDER BY device_id FOR NO KEY UPDATE`, pq.Array(sorted))
		if err != nil {
			return fmt.Errorf("locking devices: %w", unavailable(err))
		}
		cur := map[string][]string{}
		for rows.Next() {
			var id string
			var tags pq.StringArray
			if err := rows.Scan(&id, &tags); err != nil {
				rows.Close()
				return fmt.Errorf("locking devices: %w", unavailable(err))
			}
			cur[id] = tags
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("locking devices: %w", unavailable(err))
		}
		for _, id := range sorted {
			tags, ok := cur[id]
			if !ok {
				return fmt.Errorf("device %q: %w", id, domain.ErrNotFound)
			}
			next, err := fn(typed[id], slices.Clone([]string(tags)))
			if err != nil {
				return err
			}
			if next == nil {
				next = []string{}
			}
			out[typed[id]] = next
		}
		keys, vals := make([]string, 0, len(out)), make([]string, 0, len(out))
		for _, id := range sorted {
			keys = append(keys, id)
			v, err := pq.Array(out[typed[id]]).Value()
			if err != nil {
				return fmt.Errorf("encoding tags: %w", err)
			}
			vals = append(vals, v.(string))
		}
		if _, err := tx.ExecContext(ctx, `UPDATE devices d SET tags = u.tags::text[]
			FROM unnest($1::text[], $2::text[]) AS u(device_id, tags) WHERE d.device_id = u.device_id`,
			pq.Array(keys), pq.Array(vals)); err != nil {
			return fmt.Errorf("storing tags: %w", mapWriteErr(err))
		}
		if err := writeAudit(ctx, tx, rec); err != nil {
			return err
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Tags returns a device's tags (empty when none or unknown).
func (s *DeviceDirectory) Tags(ctx context.Context, deviceID domain.DeviceID) ([]string, error) {
	if deviceID.IsZero() {
		return []string{}, nil
	}
	var tags pq.StringArray
	err := s.db.QueryRowContext(ctx, `SELECT tags FROM devices WHERE device_id = $1`, deviceID.String()).Scan(&tags)
	if err != nil && err != sql.ErrNoRows {
		return nil, fmt.Errorf("loading tags of device %q: %w", deviceID, unavailable(err))
	}
	if tags == nil {
		return []string{}, nil
	}
	return tags, nil
}

// List returns the devices matching f in device_id order. Only
// placeholders are added to the query, never values.
func (s *DeviceDirectory) List(ctx context.Context, f ports.DeviceFilter) ([]ports.DeviceListing, error) {
	var cond conditions
	arg := cond.arg
	if f.Model != "" {
		cond.where = append(cond.where, "d.model = "+arg(f.Model))
	}
	if len(f.Tags) > 0 {
		cond.where = append(cond.where, "d.tags @> "+arg(pq.Array(f.Tags))+"::text[]")
	}
	if len(f.Attributes) > 0 {
		b, err := json.Marshal(f.Attributes)
		if err != nil {
			return nil, fmt.Errorf("encoding the attribute filter: %w", err)
		}
		cond.where = append(cond.where, "a.attributes @> "+arg(string(b))+"::jsonb")
	}
	if !f.Version.IsZero() {
		// Build metadata aside, as domain.Version.Key.
		cond.where = append(cond.where, "split_part(d.current_version, '+', 1) = "+arg(f.Version.Key()))
	}
	if !f.SeenBefore.IsZero() {
		cond.where = append(cond.where, "(d.last_seen_at IS NULL OR d.last_seen_at < "+arg(f.SeenBefore)+")")
	}
	if !f.After.IsZero() {
		cond.where = append(cond.where, "d.device_id > "+arg(f.After.String()))
	}
	limit := positiveOr(f.Limit, ports.DefaultListLimit)
	// The page's ids, tags and attributes first; then the devices by the
	// repository's own row reader, so the device columns stay in one place.
	q := `SELECT d.device_id, d.tags, a.attributes, a.updated_at
		FROM devices d LEFT JOIN device_attributes a ON a.device_id = d.device_id`
	if len(cond.where) > 0 {
		q += ` WHERE ` + strings.Join(cond.where, " AND ")
	}
	q += ` ORDER BY d.device_id LIMIT ` + arg(limit)
	rows, err := s.db.QueryContext(ctx, q, cond.args...)
	if err != nil {
		return nil, fmt.Errorf("listing devices: %w", unavailable(err))
	}
	out := []ports.DeviceListing{}
	var ids []string
	for rows.Next() {
		var (
			id    string
			tags  pq.StringArray
			attrs []byte
			at    sql.NullTime
		)
		if err := rows.Scan(&id, &tags, &attrs, &at); err != nil {
			rows.Close()
			return nil, fmt.Errorf("listing devices: %w", unavailable(err))
		}
		l := ports.DeviceListing{Tags: []string(tags)}
		if l.Tags == nil {
			l.Tags = []string{}
		}
		if attrs != nil {
			if l.Attributes, err = attributesFrom(attrs, at); err != nil {
				rows.Close()
				return nil, err
			}
		}
		ids = append(ids, id)
		out = append(out, l)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing devices: %w", unavailable(err))
	}
	if len(ids) == 0 {
		return out, nil
	}
	devs, err := s.db.QueryContext(ctx, `SELECT `+deviceColumns+` FROM devices WHERE device_id = ANY($1)`, pq.Array(ids))
	if err != nil {
		return nil, fmt.Errorf("listing devices: %w", unavailable(err))
	}
	defer devs.Close()
	byID := make(map[string]domain.Device, len(ids))
	for devs.Next() {
		var r deviceRow
		if err := r.scan(devs); err != nil {
			return nil, fmt.Errorf("listing devices: %w", unavailable(err))
		}
		d, err := r.toDomain()
		if err != nil {
			return nil, err
		}
		byID[d.ID().String()] = d
	}
	if err := devs.Err(); err != nil {
		return nil, fmt.Errorf("listing devices: %w", unavailable(err))
	}
	kept := out[:0]
	for i, id := range ids {
		if d, ok := byID[id]; ok { // a device deleted in between is left out
			out[i].Device = d
			kept = append(kept, out[i])
		}
	}
	return kept, nil
}
