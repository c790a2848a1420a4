// Package postgres stores devices, firmware, rollouts and tasks in
// PostgreSQL with sqlx and lib/pq. It implements the repository ports of
// package ports and, without naming them, the task store interfaces the
// use cases of package application declare.
//
// The database, not the caller's locks, has the last word on the invariants
// that matter: one active task per device (a partial unique index that
// application.ReplaceActive inserts against), one firmware per (model, version), an
// event applied at most once per task. Every read-modify-write runs in one
// transaction bound to the caller's context, so a cancelled context (a
// lost distributed lock) rolls back instead of committing half a change.
//
// Times are stored as timestamptz in UTC, truncated to microseconds (the
// precision Postgres keeps) before they are written, so a value read back
// is equal to the value written and keyset cursors round-trip exactly.
package postgres

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
	"github.com/lib/pq/pqerror"

	// The driver registers itself as "postgres" for sqlx.Open.
	_ "github.com/lib/pq"

	"github.com/ai-device/ota/domain"
)

// DatabaseURL is a PostgreSQL connection URL such as
// postgres://user:secret@host:5432/ota?sslmode=disable. It is a named type
// so that wire can tell it from other strings, and so that printing it
// (logs, config dumps) never shows the password.
type DatabaseURL string

// String returns the URL with any password replaced by "xxxxx".
func (u DatabaseURL) String() string {
	if p, err := url.Parse(string(u)); err == nil && p.Scheme != "" {
		return p.Redacted()
	}
	return "(unparsed database URL)"
}

// Config says where the database is and how to pool connections to it.
// Zero fields take the defaults below, sized for a service replica on a
// small host: enough connections for concurrent checks, few enough that a
// dozen replicas stay under Postgres' default max_connections of 100.
type Config struct {
	URL DatabaseURL
	// MaxOpenConns caps the pool (default 10).
	MaxOpenConns int
	// MaxIdleConns keeps warm connections (default MaxOpenConns).
	MaxIdleConns int
	// ConnMaxLifetime recycles connections, so a failover or a
	// re-balanced pooler is picked up (default 30m).
	ConnMaxLifetime time.Duration
	// ConnMaxIdleTime closes connections idle that long (default 5m).
	ConnMaxIdleTime time.Duration
	// PingTimeout bounds the check that the database answers at Open
	// (default 5s), so a bad address fails start-up promptly.
	PingTimeout time.Duration
}

// Pool defaults; see Config.
const (
	DefaultMaxOpenConns    = 10
	DefaultConnMaxLifetime = 30 * time.Minute
	DefaultConnMaxIdleTime = 5 * time.Minute
	DefaultPingTimeout     = 5 * time.Second
)

// Open connects to the database in cfg, checks that it answers, and
// returns the pool with a cleanup function that closes it (the shape wire
// expects of a provider). The error names the database and host but never
// the password, so it can be shown to an operator as is.
func Open(cfg Config) (*sqlx.DB, func(), error) {
	if strings.TrimSpace(string(cfg.URL)) == "" {
		return nil, nil, errors.New("postgres: no database URL configured")
	}
	where := describe(cfg.URL)
	pc, err := pq.NewConfig(string(cfg.URL))
	if err != nil {
		return nil, nil, fmt.Errorf("postgres: invalid URL for %s: %w", where, err)
	}
	// The guarded statements (a task's creation, an event's one statement)
	// run outside a transaction and rely on READ COMMITTED's re-check after
	// a lock wait: a lost race is a refused write, answered by the
	// transaction path. A database or role defaulting to REPEATABLE READ or
	// SERIALIZABLE would turn it into a serialization failure (40001), so
	// every session of the pool starts at READ COMMITTED, whatever the
	// server's default or the URL says.
	if pc.Runtime == nil {
		pc.Runtime = map[string]string{}
	}
	pc.Runtime["default_transaction_isolation"] = "read committed"
	conn, err := pq.NewConnectorConfig(pc)
	if err != nil {
		return nil, nil, fmt.Errorf("postgres: invalid URL for %s: %w", where, err)
	}
	db := sqlx.NewDb(sql.OpenDB(conn), "postgres")
	maxOpen := positiveOr(cfg.MaxOpenConns, DefaultMaxOpenConns)
	maxIdle := cfg.MaxIdleConns
	if maxIdle <= 0 || maxIdle > maxOpen {
		maxIdle = maxOpen
	}
	db.SetMaxOpenConns(maxOpen)
	db.SetMaxIdleConns(maxIdle)
	db.SetConnMaxLifetime(positiveOr(cfg.ConnMaxLifetime, DefaultConnMaxLifetime))
	db.SetConnMaxIdleTime(positiveOr(cfg.ConnMaxIdleTime, DefaultConnMaxIdleTime))

	ctx, cancel := context.WithTimeout(context.Background(), positiveOr(cfg.PingTimeout, DefaultPingTimeout))
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, nil, fmt.Errorf("postgres: cannot reach %s: %w", where, err)
	}
	return db, func() { _ = db.Close() }, nil
}

// describe names the database and host of a URL or key=value DSN for
// error messages, without credentials.
func describe(u DatabaseURL) string {
	s := string(u)
	name, host := "", ""
	if p, err := url.Parse(s); err == nil && (p.Scheme == "postgres" || p.Scheme == "postgresql") {
		name, host = strings.TrimPrefix(p.Path, "/"), p.Host
	} else {
		for _, kv := range strings.Fields(s) {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "dbname":
				name = strings.Trim(v, "'")
			case "host":
				host = strings.Trim(v, "'")
			}
		}
	}
	if name == "" {
		name = "(default)"
	}
	if host == "" {
		host = "localhost"
	}
	return fmt.Sprintf("database %q on %s", name, host)
}

// HealthCheck reports whether Postgres answers, for /readyz.
type HealthCheck struct {
	db *sqlx.DB
}

// NewHealthCheck probes the given pool.
func NewHealthCheck(db *sqlx.DB) *HealthCheck { return &HealthCheck{db: db} }

// Name is the key of this probe in the readiness report.
func (*HealthCheck) Name() string { return "postgres" }

// healthTimeout bounds a probe when the caller set no deadline: a
// readiness probe that hangs is worse than one that says "unavailable".
const healthTimeout = 2 * time.Second

// Check pings the database over a pooled connection (a real round trip).
func (h *HealthCheck) Check(ctx context.Context) error {
	if h == nil || h.db == nil {
		return errors.New("not configured")
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, healthTimeout)
		defer cancel()
	}
	if err := h.db.PingContext(ctx); err != nil {
		return fmt.Errorf("unreachable: %w", err)
	}
	return nil
}

// inTx runs fn in one transaction bound to ctx and returns the commit's
// error: when ctx is cancelled mid-way (a lost lock), database/sql rolls the
// transaction back and the commit fails, so nothing half-done is kept and
// the caller learns it.
//
// A database that cannot be reached, at any step, is reported as
// domain.ErrServiceBusy (see unavailable).
func inTx(ctx context.Context, db *sqlx.DB, opts *sql.TxOptions, fn func(tx *sqlx.Tx) error) error {
	tx, err := db.BeginTxx(ctx, opts)
	if err != nil {
		return fmt.Errorf("beginning transaction: %w", unavailable(err))
	}
	defer func() { _ = tx.Rollback() }() // no-op after a commit
	if err := fn(tx); err != nil {
		return unavailable(err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("committing: %w", unavailable(err))
	}
	return nil
}

// readCommitted is the isolation the row-locking code is written for: a
// statement after a lock wait sees what the lock holder committed.
var readCommitted = &sql.TxOptions{Isolation: sql.LevelReadCommitted}

// Constraint names from the migrations, mapped to domain errors.
const (
	constraintDevicesPK       = "devices_pkey"
	constraintFirmwareVersion = "firmwares_model_version_key"
	// constraintFirmwareArtifactName keeps artifact names unique per model.
	constraintFirmwareArtifactName = "firmwares_model_artifact_name_key"
	// constraintRolloutRequestKey keeps a rollout's Idempotency-Key unique.
	constraintRolloutRequestKey = "rollouts_request_key_key"
)

// unavailable marks an error saying that Postgres cannot be reached, or is
// going away, as domain.ErrServiceBusy: the caller answers 503 SERVICE_BUSY
// with Retry-After, as for a lock that cannot be had, instead of 500. The
// cause is kept (errors.Is/As and the message) for logs. Other errors pass.
func unavailable(err error) error {
	if err == nil || errors.Is(err, domain.ErrServiceBusy) || !connectionLost(err) {
		return err
	}
	return &unavailableError{err: err}
}

type unavailableError struct{ err error }

// Error keeps the cause for logs; the edge shows only SERVICE_BUSY.
func (e *unavailableError) Error() string { return "database unavailable: " + e.err.Error() }

// Unwrap matches domain.ErrServiceBusy and the driver's cause.
func (e *unavailableError) Unwrap() []error { return []error{domain.ErrServiceBusy, e.err} }

// connectionLost reports whether err says the database cannot be reached
// or is going away: a refused or broken connection (lib/pq reports a FATAL
// on a busy connection, such as 57P01 admin_shutdown, as driver.ErrBadConn),
// a server shutting down or not yet accepting connections, or no free
// connection slot.
func connectionLost(err error) bool {
	switch {
	case errors.Is(err, driver.ErrBadConn),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return true
	}
	if _, ok := errors.AsType[*net.OpError](err); ok {
		return true
	}
	if pqErr := pq.As(err); pqErr != nil {
		switch pqErr.Code {
		case pqerror.AdminShutdown, pqerror.CrashShutdown, pqerror.CannotConnectNow, pqerror.TooManyConnections:
			return true
		}
		return pqErr.Code.Class() == pqerror.ClassConnectionException
	}
	return false
}

// mapWriteErr turns constraint violations into the domain's errors: a taken
// device id or (model, version) into ErrDeviceExists / ErrFirmwareExists,
// a reference to a row that does not exist into ErrNotFound, an unreachable
// database into ErrServiceBusy (unavailable). Anything else is returned as
// is.
func mapWriteErr(err error) error {
	if pqErr := pq.As(err, pqerror.UniqueViolation); pqErr != nil {
		switch pqErr.Constraint {
		case constraintDevicesPK:
			return domain.ErrDeviceExists
		case constraintFirmwareVersion:
			return domain.ErrFirmwareExists
		case constraintFirmwareArtifactName:
			return domain.ErrArtifactNameTaken
		case constraintRolloutRequestKey:
			return domain.ErrRequestKeyTaken
		}
		return err
	}
	if pqErr := pq.As(err, pqerror.ForeignKeyViolation); pqErr != nil {
		return fmt.Errorf("%s does not exist: %w", referenced(pqErr.Constraint), domain.ErrNotFound)
	}
	return unavailable(err)
}

// referenced names what a foreign key points at, for error messages.
func referenced(constraint string) string {
	switch constraint {
	case "tasks_device_fkey":
		return "the device"
	case "tasks_firmware_fkey", "rollouts_firmware_fkey":
		return "the firmware"
	case "tasks_rollout_fkey":
		return "the rollout (of that firmware)"
	case "task_events_task_fkey":
		return "the task"
	}
	return "a referenced row"
}

// loadByID is every Get by id: the zero id names no row, a missing row is
// domain.ErrNotFound, and load's row becomes its domain value.
func loadByID[T any, R interface{ toDomain() (T, error) }](what string, id domain.UUID, load func(r *R) error) (T, error) {
	var zero T
	if id.IsZero() {
		return zero, fmt.Errorf("loading %s: %w", what, domain.ErrNotFound)
	}
	var r R
	if err := load(&r); err != nil {
		return zero, fmt.Errorf("loading %s %s: %w", what, id, notFound(err))
	}
	return r.toDomain()
}

// updateByID is every read-modify-write of one row by id: in one
// read-committed transaction, query loads the row (locked as query says)
// and change stores what it makes of it, returning the stored value. The
// zero id names no row; a missing row is domain.ErrNotFound.
func updateByID[T any, R interface{ toDomain() (T, error) }](ctx context.Context, db *sqlx.DB, what, query string, id domain.UUID,
	change func(tx *sqlx.Tx, r R, v T) (T, error)) (T, error) {
	var out T
	if id.IsZero() {
		return out, fmt.Errorf("loading %s: %w", what, domain.ErrNotFound)
	}
	err := inTx(ctx, db, readCommitted, func(tx *sqlx.Tx) error {
		var r R
		if err := tx.GetContext(ctx, &r, query, id.String()); err != nil {
			return fmt.Errorf("loading %s %s: %w", what, id, notFound(err))
		}
		v, err := r.toDomain()
		if err != nil {
			return err
		}
		out, err = change(tx, r, v)
		return err
	})
	if err != nil {
		var zero T
		return zero, err
	}
	return out, nil
}

// inDeviceTx runs change in one read-committed transaction on a device's
// behalf and returns what it made. The zero device id names no device:
// domain.ErrNotFound without a round trip, as for every device's change.
func inDeviceTx[T any](ctx context.Context, db *sqlx.DB, device domain.DeviceID, change func(tx *sqlx.Tx, deviceID string) (T, error)) (T, error) {
	var out T
	if device.IsZero() {
		return out, fmt.Errorf("loading device: %w", domain.ErrNotFound)
	}
	err := inTx(ctx, db, readCommitted, func(tx *sqlx.Tx) error {
		var err error
		out, err = change(tx, device.String())
		return err
	})
	if err != nil {
		var zero T
		return zero, err
	}
	return out, nil
}

// domainOf turns stored rows into their domain values; never nil.
func domainOf[T any, R interface{ toDomain() (T, error) }](rows []R) ([]T, error) {
	out := make([]T, 0, len(rows))
	for _, r := range rows {
		v, err := r.toDomain()
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// notFound turns "no such row" into domain.ErrNotFound: sql.ErrNoRows, and
// (should an id ever reach a query unvalidated) Postgres refusing the text
// of a UUID, so that a path like /rollouts/not-a-uuid is a 404, never a 500.
// An unreachable database is ErrServiceBusy (unavailable); other errors
// pass.
func notFound(err error) error {
	if errors.Is(err, sql.ErrNoRows) || pq.As(err, pqerror.InvalidTextRepresentation) != nil {
		return domain.ErrNotFound
	}
	return unavailable(err)
}

// dbTime is how a time is stored: UTC, truncated to microseconds.
func dbTime(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// nullTime stores the zero time as NULL.
func nullTime(t time.Time) sql.NullTime {
	if t.IsZero() {
		return sql.NullTime{}
	}
	return sql.NullTime{Time: dbTime(t), Valid: true}
}

// fromNullTime reads NULL as the zero time.
func fromNullTime(t sql.NullTime) time.Time {
	if !t.Valid {
		return time.Time{}
	}
	return t.Time.UTC()
}

// nullString stores "" as NULL.
func nullString(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }

// columns joins column names for a SELECT list. With a prefix p, each
// column is read from table alias p and named "p.column", which sqlx maps
// onto the field tagged db:"p" of a struct holding one row struct per table
// (used for joins).
func columns(p string, fields []string) string {
	var b strings.Builder
	for i, f := range fields {
		if i > 0 {
			b.WriteString(", ")
		}
		if p == "" {
			b.WriteString(f)
			continue
		}
		b.WriteString(p + "." + f + ` AS "` + p + "." + f + `"`)
	}
	return b.String()
}

// prepareTimeout bounds preparing a repository's statements at start-up.
const prepareTimeout = 10 * time.Second

// statements prepares a repository's hot statements once, on the pool.
//
// lib/pq sends an unprepared query with parameters as two round trips
// (Parse/Describe, then Bind/Execute); a prepared one is one (Bind/Execute).
// database/sql prepares a *sql.Stmt on each pooled connection the first time
// it runs there and keeps it, so after warm-up every hot query is a single
// round trip. In a transaction the same statement is bound with tx.Stmtx,
// which reuses the connection's preparation.
type statements struct {
	db    *sqlx.DB
	err   error
	stmts []*sqlx.Stmt
}

// prepared builds a repository with build, whose statements p prepares,
// and hands it out only when every one of them prepared: a repository
// holding a nil statement would fail at its first use, far from the cause.
func prepared[T any](db *sqlx.DB, what string, build func(p *statements) *T) (*T, error) {
	p := &statements{db: db}
	r := build(p)
	if err := p.done(what); err != nil {
		return nil, err
	}
	return r, nil
}

// prepare prepares q, or does nothing after an earlier failure (see done).
func (p *statements) prepare(q string) *sqlx.Stmt {
	if p.err != nil {
		return nil
	}
	if p.db == nil {
		p.err = errors.New("postgres: no database pool")
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), prepareTimeout)
	defer cancel()
	s, err := p.db.PreparexContext(ctx, q)
	if err != nil {
		p.err = fmt.Errorf("postgres: preparing %q: %w", firstLine(q), err)
		return nil
	}
	p.stmts = append(p.stmts, s)
	return s
}

// done returns the first preparation error, closing what was prepared.
func (p *statements) done(what string) error {
	if p.err == nil {
		return nil
	}
	for _, s := range p.stmts {
		_ = s.Close()
	}
	return fmt.Errorf("%s: %w", what, p.err)
}

// firstLine shortens a query for error messages.
func firstLine(q string) string {
	q = strings.TrimSpace(q)
	if i := strings.IndexByte(q, '\n'); i >= 0 {
		q = q[:i] + " …"
	}
	if len(q) > 120 {
		q = q[:120] + " …"
	}
	return q
}

// catalogChannel is the NOTIFY channel on which every change to firmware or
// rollouts is announced, with the firmware's model as payload ("*" for
// "anything may have changed"). pg_notify is transactional: listeners hear
// of a change when, and only if, its transaction commits.
const catalogChannel = "ota_catalog"

// notifyCatalogSQL announces a change to a model's catalog; run it in the
// transaction making the change.
const notifyCatalogSQL = `SELECT pg_notify('` + catalogChannel + `', $1)`

// lazyStmt is a hot query's statement, prepared on first use: prepared, it
// costs one round trip, not two, and the repository's constructor needs
// neither a context nor an error. A failed prepare is not kept: the query
// runs unprepared, and the next call tries again.
type lazyStmt struct {
	query string
	mu    sync.Mutex
	stmt  *sql.Stmt
}

// queryRow runs the query with args, prepared when it can be.
func (l *lazyStmt) queryRow(ctx context.Context, db *sqlx.DB, args ...any) *sql.Row {
	l.mu.Lock()
	if l.stmt == nil {
		if st, err := db.PrepareContext(ctx, l.query); err == nil {
			l.stmt = st
		}
	}
	st := l.stmt
	l.mu.Unlock()
	if st == nil {
		return db.QueryRowContext(ctx, l.query, args...)
	}
	return st.QueryRowContext(ctx, args...)
}

// conditions gathers a query's WHERE conditions and their arguments:
// arg adds a value and answers its placeholder, so that only placeholders
// are ever written into the query, never values.
type conditions struct {
	where []string
	args  []any
}

func (c *conditions) arg(v any) string {
	c.args = append(c.args, v)
	return "$" + strconv.Itoa(len(c.args))
}

// positiveOr is n, or def when n is not positive: the one rule of every
// setting and limit here, so that a Config left zero (or set to nonsense)
// gets its documented default, and a listing's filter without a limit gets
// the listing's default rather than no rows or all of them.
func positiveOr[N ~int | ~int64](n, def N) N {
	if n <= 0 {
		return def
	}
	return n
}

// tickUntil calls fn every interval, and at once whenever kick yields (a
// nil kick never does), until stop is closed. It is the one loop behind the
// package's background work (the catalog cache's ping and refresh, the
// write-behind's flush, the replica's probe), so that all of it stops the
// same way: a closed stop ends the loop between two calls, fn never runs
// concurrently with itself, and the ticker is released on return.
func tickUntil(stop <-chan struct{}, interval time.Duration, kick <-chan struct{}, fn func()) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		case <-kick:
		}
		fn()
	}
}
