package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// FirmwareRepository stores firmware in the firmwares table. Every change
// is announced on the catalog channel (NOTIFY ota_catalog, '<model>') in its
// own transaction, for the caches of every replica (see CatalogCache).
type FirmwareRepository struct {
	db  *sqlx.DB
	get *sqlx.Stmt
}

var _ ports.FirmwareRepository = (*FirmwareRepository)(nil)

// NewFirmwareRepository stores firmware through the given pool, preparing
// its hot statement; it fails when that cannot be prepared (no schema).
func NewFirmwareRepository(db *sqlx.DB) (*FirmwareRepository, error) {
	return prepared(db, "firmware repository", func(p *statements) *FirmwareRepository {
		return &FirmwareRepository{db: db, get: p.prepare(`SELECT ` + firmwareColumns + ` FROM firmwares WHERE id = $1`)}
	})
}

type firmwareRow struct {
	ID               string         `db:"id"`
	Model            string         `db:"model"`
	Version          string         `db:"version"`
	VersionKey       string         `db:"version_key"`
	URL              string         `db:"url"`
	SizeBytes        int64          `db:"size_bytes"`
	SHA256           string         `db:"sha256"`
	SHA1             sql.NullString `db:"sha1"`
	MD5              sql.NullString `db:"md5"`
	Signature        sql.NullString `db:"signature"`
	ReleaseNotes     sql.NullString `db:"release_notes"`
	Mandatory        bool           `db:"mandatory"`
	MinSourceVersion sql.NullString `db:"min_source_version"`
	ArtifactName     sql.NullString `db:"artifact_name"`
	ArtifactID       sql.NullString `db:"artifact_id"`
	Status           string         `db:"status"`
	CreatedAt        time.Time      `db:"created_at"`
	UpdatedAt        time.Time      `db:"updated_at"`
}

// firmwareFields lists the firmwares columns in firmwareRow's order.
var firmwareFields = []string{
	"id", "model", "version", "version_key", "url", "size_bytes", "sha256", "sha1", "md5",
	"signature", "release_notes", "mandatory", "min_source_version", "artifact_name", "status", "created_at", "updated_at", "artifact_id",
}

var firmwareColumns = columns("", firmwareFields)

func newFirmwareRow(f domain.Firmware) firmwareRow {
	spec := f.Spec()
	return firmwareRow{
		ID:               f.ID().String(),
		Model:            spec.Model,
		Version:          spec.Version,
		VersionKey:       f.Version().Key(),
		URL:              spec.URL,
		SizeBytes:        spec.SizeBytes,
		SHA256:           spec.SHA256,
		SHA1:             nullString(spec.SHA1),
		MD5:              nullString(spec.MD5),
		Signature:        nullString(spec.Signature),
		ReleaseNotes:     nullString(spec.ReleaseNotes),
		Mandatory:        spec.Mandatory,
		MinSourceVersion: nullString(spec.MinSourceVersion),
		ArtifactName:     nullString(spec.ArtifactName),
		ArtifactID:       nullString(spec.ArtifactID.String()),
		Status:           f.Status().String(),
		CreatedAt:        dbTime(f.CreatedAt()),
		UpdatedAt:        dbTime(f.UpdatedAt()),
	}
}

// args are the row's values in firmwareFields order.
func (r firmwareRow) args() []any {
	return []any{r.ID, r.Model, r.Version, r.VersionKey, r.URL, r.SizeBytes, r.SHA256, r.SHA1, r.MD5,
		r.Signature, r.ReleaseNotes, r.Mandatory, r.MinSourceVersion, r.ArtifactName, r.Status, r.CreatedAt, r.UpdatedAt, r.ArtifactID}
}

func (r firmwareRow) toDomain() (domain.Firmware, error) {
	st, err := domain.ParseFirmwareStatus(r.Status)
	if err != nil {
		return domain.Firmware{}, fmt.Errorf("firmware %s has a corrupt status: %w", r.ID, err)
	}
	f, err := domain.RehydrateFirmware(r.ID, domain.FirmwareSpec{
		Model: r.Model, Version: r.Version, URL: r.URL, SizeBytes: r.SizeBytes, SHA256: r.SHA256,
		SHA1: r.SHA1.String, MD5: r.MD5.String, Signature: r.Signature.String,
		ReleaseNotes: r.ReleaseNotes.String, Mandatory: r.Mandatory, MinSourceVersion: r.MinSourceVersion.String,
		ArtifactName: r.ArtifactName.String, ArtifactID: storedUUID(r.ArtifactID.String),
	}, st, r.CreatedAt.UTC(), r.UpdatedAt.UTC())
	if err != nil {
		return domain.Firmware{}, fmt.Errorf("firmware %s is corrupt: %w", r.ID, err)
	}
	return f, nil
}

// Create stores a new firmware; domain.ErrFirmwareExists if its (model,
// version) was published before, build metadata ignored (the unique key is
// on version_key, the version without build metadata).
func (s *FirmwareRepository) Create(ctx context.Context, f domain.Firmware, rec domain.AuditRecord) error {
	if f.ID().IsZero() { // only the zero Firmware has no id
		return errors.New("storing firmware: it has no id")
	}
	r := newFirmwareRow(f)
	return inTx(ctx, s.db, readCommitted, func(tx *sqlx.Tx) error {
		// One statement: the insert and its announcement.
		if _, err := tx.ExecContext(ctx, `WITH ins AS (INSERT INTO firmwares (`+firmwareColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18) RETURNING model)
		SELECT pg_notify('`+catalogChannel+`', model) FROM ins`, r.args()...); err != nil {
			return fmt.Errorf("storing firmware %s %s: %w", f.Model(), f.Version(), mapWriteErr(err))
		}
		return writeAudit(ctx, tx, rec)
	})
}

// Get loads a firmware by id (parsed, canonical); the zero id is not found.
func (s *FirmwareRepository) Get(ctx context.Context, id domain.UUID) (domain.Firmware, error) {
	return loadByID[domain.Firmware]("firmware", id, func(r *firmwareRow) error { return s.get.GetContext(ctx, r, id.String()) })
}

// catalogPayload names what a change touched: the model, or "*" when it
// moved a row between models (which the domain never does).
func catalogPayload(before, after string) string {
	if before != after {
		return "*"
	}
	return after
}

// List returns a model's firmware (every model's when model is ""), newest
// published first; never nil.
func (s *FirmwareRepository) List(ctx context.Context, model string) ([]domain.Firmware, error) {
	var rows []firmwareRow
	var err error
	if model == "" {
		err = s.db.SelectContext(ctx, &rows, `SELECT `+firmwareColumns+` FROM firmwares ORDER BY created_at DESC, id DESC`)
	} else {
		if domain.ValidateIdentifier("model", model) != nil {
			return []domain.Firmware{}, nil // no such model can exist
		}
		err = s.db.SelectContext(ctx, &rows, `SELECT `+firmwareColumns+` FROM firmwares WHERE model = $1
			ORDER BY created_at DESC, id DESC`, model)
	}
	if err != nil {
		return nil, fmt.Errorf("listing firmware: %w", unavailable(err))
	}
	return domainOf(rows)
}

// Update loads the firmware with a row lock, lets fn change it (revoke
// it), and stores it in one transaction; it returns the firmware as stored.
// The lock is FOR NO KEY UPDATE, so it does not hold up the foreign-key
// checks of tasks and rollouts being created for the firmware.
// fn's error is returned as is and nothing is written; audit's record of
// the change is written with it.
func (s *FirmwareRepository) Update(ctx context.Context, id domain.UUID, fn func(*domain.Firmware) error, audit ports.Audit[domain.Firmware]) (domain.Firmware, error) {
	uid := id.String()
	return updateByID(ctx, s.db, "firmware", `SELECT `+firmwareColumns+` FROM firmwares WHERE id = $1 FOR NO KEY UPDATE`, id,
		func(tx *sqlx.Tx, r firmwareRow, f domain.Firmware) (domain.Firmware, error) {
			before := f
			if err := fn(&f); err != nil {
				return domain.Firmware{}, err
			}
			if err := writeAuditOf(ctx, tx, audit, before, f); err != nil {
				return domain.Firmware{}, err
			}
			w := newFirmwareRow(f)
			w.ID, w.CreatedAt = r.ID, r.CreatedAt
			// Every column but the id and the creation time: the domain decides
			// what may change, the store keeps whatever it is given.
			if _, err := tx.ExecContext(ctx, `UPDATE firmwares SET model = $2, version = $3, version_key = $4, url = $5,
				size_bytes = $6, sha256 = $7, sha1 = $8, md5 = $9, signature = $10, release_notes = $11,
				mandatory = $12, min_source_version = $13, status = $14, updated_at = $15
			WHERE id = $1`, w.ID, w.Model, w.Version, w.VersionKey, w.URL, w.SizeBytes, w.SHA256, w.SHA1, w.MD5,
				w.Signature, w.ReleaseNotes, w.Mandatory, w.MinSourceVersion, w.Status, w.UpdatedAt); err != nil {
				return domain.Firmware{}, fmt.Errorf("storing firmware %s: %w", uid, mapWriteErr(err))
			}
			if _, err := tx.ExecContext(ctx, notifyCatalogSQL, catalogPayload(r.Model, w.Model)); err != nil {
				return domain.Firmware{}, fmt.Errorf("announcing the change of firmware %s: %w", uid, err)
			}
			return w.toDomain()
		})
}
