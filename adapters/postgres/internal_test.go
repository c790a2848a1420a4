package postgres

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/lib/pq"
	"github.com/lib/pq/pqerror"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/migrations"
)

// The ON CONFLICT arbiter must be the partial unique index: its predicate
// must list exactly the domain's active statuses, as the migration does.
func TestActiveStatusSQL(t *testing.T) {
	quoted := make([]string, 0, len(domain.ActiveTaskStatuses))
	for _, s := range domain.ActiveTaskStatuses {
		quoted = append(quoted, "'"+s.String()+"'")
	}
	want := "status IN (" + strings.Join(quoted, ", ") + ")"
	if activeStatusSQL != want {
		t.Fatalf("activeStatusSQL = %s, want %s", activeStatusSQL, want)
	}
	b, err := fs.ReadFile(migrations.FS, "00001_init.sql")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "tasks_one_active_per_device ON tasks (device_id)\n    WHERE "+activeStatusSQL+";") {
		t.Fatalf("the migration's tasks_one_active_per_device predicate differs from %s", activeStatusSQL)
	}
}

func TestDescribeNeverShowsThePassword(t *testing.T) {
	for in, want := range map[DatabaseURL]string{
		"postgres://ota:s3cret@db.example:5432/ota?sslmode=disable": `database "ota" on db.example:5432`,
		"postgresql://db.example/fleet":                             `database "fleet" on db.example`,
		"host=db.example dbname=ota password=s3cret":                `database "ota" on db.example`,
		"postgres://": `database "(default)" on localhost`,
	} {
		if got := describe(in); got != want {
			t.Errorf("describe(%q) = %q, want %q", in, got, want)
		}
		if strings.Contains(in.String(), "s3cret") {
			t.Errorf("DatabaseURL.String() shows the password: %s", in.String())
		}
	}
}

// An unreachable or departing database is ErrServiceBusy (503), never a
// bare error (500); other failures are left alone.
func TestUnavailableClassifiesConnectionLoss(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	for _, err := range []error{
		driver.ErrBadConn,
		fmt.Errorf("loading: %w", refused),
		io.ErrUnexpectedEOF,
		&pq.Error{Code: pqerror.AdminShutdown},
		&pq.Error{Code: pqerror.CannotConnectNow},
		&pq.Error{Code: pqerror.TooManyConnections},
		&pq.Error{Code: "08006"}, // connection_failure
	} {
		got := unavailable(err)
		if !errors.Is(got, domain.ErrServiceBusy) || !errors.Is(got, err) {
			t.Errorf("unavailable(%v) = %v: want ErrServiceBusy keeping the cause", err, got)
		}
		if !errors.Is(notFound(err), domain.ErrServiceBusy) || !errors.Is(mapWriteErr(err), domain.ErrServiceBusy) {
			t.Errorf("notFound/mapWriteErr(%v) is not ErrServiceBusy", err)
		}
	}
	for _, err := range []error{
		nil, sql.ErrNoRows, context.Canceled, context.DeadlineExceeded,
		&pq.Error{Code: pqerror.UniqueViolation}, &pq.Error{Code: pqerror.QueryCanceled}, errors.New("other"),
	} {
		if got := unavailable(err); got != err {
			t.Errorf("unavailable(%v) = %v, want it unchanged", err, got)
		}
	}
	// Not wrapped twice.
	once := unavailable(driver.ErrBadConn)
	if unavailable(once) != once {
		t.Error("an unavailable error was wrapped again")
	}
}
