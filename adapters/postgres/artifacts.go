package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
	"github.com/lib/pq/pqerror"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// ArtifactRepository stores artifacts in the artifacts table.
type ArtifactRepository struct{ db *sqlx.DB }

var _ ports.ArtifactRepository = (*ArtifactRepository)(nil)

// NewArtifactRepository stores artifacts through the given pool.
func NewArtifactRepository(db *sqlx.DB) *ArtifactRepository { return &ArtifactRepository{db: db} }

// constraintFirmwareArtifact is the foreign key that keeps an artifact
// while a firmware refers to it.
const constraintFirmwareArtifact = "firmwares_artifact_id_fkey"

const artifactColumns = `id, file_name, size_bytes, sha256, sha1, md5, format, meta, created_at`

type artifactRow struct {
	ID        string    `db:"id"`
	FileName  string    `db:"file_name"`
	SizeBytes int64     `db:"size_bytes"`
	SHA256    string    `db:"sha256"`
	SHA1      string    `db:"sha1"`
	MD5       string    `db:"md5"`
	Format    string    `db:"format"`
	Meta      []byte    `db:"meta"`
	CreatedAt time.Time `db:"created_at"`
}

// artifactMeta is the meta column: what the file says about itself,
// beyond its format.
type artifactMeta struct {
	ArtifactName string            `json:"artifact_name,omitempty"`
	DeviceTypes  []string          `json:"device_types,omitempty"`
	PayloadType  string            `json:"payload_type,omitempty"`
	Provides     map[string]string `json:"provides,omitempty"`
	Version      string            `json:"version,omitempty"`
	Description  string            `json:"description,omitempty"`
}

func (r artifactRow) toDomain() (domain.Artifact, error) {
	f, err := domain.ParseArtifactFormat(r.Format)
	if err != nil {
		return domain.Artifact{}, fmt.Errorf("artifact %s has a corrupt format: %w", r.ID, err)
	}
	var m artifactMeta
	if err := json.Unmarshal(r.Meta, &m); err != nil {
		return domain.Artifact{}, fmt.Errorf("artifact %s has corrupt metadata: %w", r.ID, err)
	}
	return domain.RehydrateArtifact(r.ID, r.FileName,
		domain.ArtifactDigest{Size: r.SizeBytes, SHA256: r.SHA256, SHA1: r.SHA1, MD5: r.MD5},
		domain.ArtifactMeta{Format: f, ArtifactName: m.ArtifactName, DeviceTypes: m.DeviceTypes, PayloadType: m.PayloadType,
			Provides: m.Provides, Version: m.Version, Description: m.Description},
		r.CreatedAt.UTC()), nil
}

// Create inserts a unless its sha256 is stored, in which case the stored
// artifact is returned (created false). ON CONFLICT makes the choice at
// the insert, so two concurrent uploads of the same bytes make one row.
func (s *ArtifactRepository) Create(ctx context.Context, a domain.Artifact, rec domain.AuditRecord) (domain.Artifact, bool, error) {
	if a.ID().IsZero() {
		return domain.Artifact{}, false, errors.New("storing artifact: it has no id")
	}
	d, m := a.Digest(), a.Meta()
	meta, err := json.Marshal(artifactMeta{ArtifactName: m.ArtifactName, DeviceTypes: m.DeviceTypes, PayloadType: m.PayloadType,
		Provides: m.Provides, Version: m.Version, Description: m.Description})
	if err != nil {
		return domain.Artifact{}, false, err
	}
	// A conflicting row deleted between the insert and the read is gone:
	// the insert is tried again, and then lands.
	for range 2 {
		err := inTx(ctx, s.db, readCommitted, func(tx *sqlx.Tx) error {
			var id string
			if err := tx.QueryRowxContext(ctx, `INSERT INTO artifacts (`+artifactColumns+`)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (sha256) DO NOTHING RETURNING id`,
				a.ID().String(), a.FileName(), d.Size, d.SHA256, d.SHA1, d.MD5, m.Format.String(), meta, dbTime(a.CreatedAt())).Scan(&id); err != nil {
				return err
			}
			return writeAudit(ctx, tx, rec) // only an upload that stored something is a change
		})
		if err == nil {
			stored, err := s.Get(ctx, a.ID())
			return stored, true, err
		}
		if notFound(err) != domain.ErrNotFound {
			return domain.Artifact{}, false, fmt.Errorf("storing artifact: %w", mapWriteErr(err))
		}
		var r artifactRow
		err = s.db.GetContext(ctx, &r, `SELECT `+artifactColumns+` FROM artifacts WHERE sha256 = $1`, d.SHA256)
		if err == nil {
			stored, err := r.toDomain()
			return stored, false, err
		}
		if notFound(err) != domain.ErrNotFound {
			return domain.Artifact{}, false, fmt.Errorf("loading the stored artifact of this content: %w", unavailable(err))
		}
	}
	return domain.Artifact{}, false, fmt.Errorf("storing artifact: its content was stored and deleted concurrently: %w", domain.ErrServiceBusy)
}

// Get loads an artifact by id; the zero id is not found.
func (s *ArtifactRepository) Get(ctx context.Context, id domain.UUID) (domain.Artifact, error) {
	return loadByID[domain.Artifact]("artifact", id, func(r *artifactRow) error {
		return s.db.GetContext(ctx, r, `SELECT `+artifactColumns+` FROM artifacts WHERE id = $1`, id.String())
	})
}

// List returns every artifact, newest first; never nil.
func (s *ArtifactRepository) List(ctx context.Context) ([]domain.Artifact, error) {
	var rows []artifactRow
	if err := s.db.SelectContext(ctx, &rows, `SELECT `+artifactColumns+` FROM artifacts ORDER BY created_at DESC, id DESC`); err != nil {
		return nil, fmt.Errorf("listing artifacts: %w", unavailable(err))
	}
	return domainOf(rows)
}

// Delete removes the row. The foreign key of firmwares.artifact_id (ON
// DELETE RESTRICT) refuses it while a firmware refers to the artifact,
// whatever runs concurrently: domain.ErrArtifactInUse.
func (s *ArtifactRepository) Delete(ctx context.Context, id domain.UUID, audit ports.Audit[domain.Artifact]) error {
	if id.IsZero() {
		return fmt.Errorf("deleting artifact: %w", domain.ErrNotFound)
	}
	return inTx(ctx, s.db, readCommitted, func(tx *sqlx.Tx) error {
		var r artifactRow
		err := tx.GetContext(ctx, &r, `DELETE FROM artifacts WHERE id = $1 RETURNING `+artifactColumns, id.String())
		if err != nil {
			if pqErr := pq.As(err, pqerror.ForeignKeyViolation); pqErr != nil && pqErr.Constraint == constraintFirmwareArtifact {
				return fmt.Errorf("deleting artifact %s: %w", id, domain.ErrArtifactInUse)
			}
			return fmt.Errorf("deleting artifact %s: %w", id, notFound(err))
		}
		before, err := r.toDomain()
		if err != nil {
			return err
		}
		rec, err := audit(before, domain.Artifact{})
		if err != nil {
			return err
		}
		return writeAudit(ctx, tx, rec)
	})
}

// storedUUID types an id read from a uuid column ("" for NULL): Postgres
// wrote it canonical, so it parses.
func storedUUID(s string) domain.UUID {
	id, _ := domain.ParseUUID("id", s)
	return id
}
