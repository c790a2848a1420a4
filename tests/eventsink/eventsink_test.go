// Package eventsink tests the NATS JetStream sink end to end: the
// outbox of each store (memory, Postgres), the relay (application), and a
// real NATS server (testenv.NATSURL), each test on a stream and subjects
// of its own.
package eventsink

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ai-device/ota/adapters/memory"
	"github.com/ai-device/ota/adapters/natsink"
	"github.com/ai-device/ota/adapters/postgres"
	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
	"github.com/ai-device/ota/tests/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// outbox is where a test writes events: a store's task transaction, as
// every change announces its events.
type outbox interface {
	InTaskTx(ctx context.Context, fn func(tx ports.TaskTx) error) error
}

func worlds(t *testing.T) map[string]func(t *testing.T) (outbox, application.EventSinkStore) {
	return map[string]func(t *testing.T) (outbox, application.EventSinkStore){
		"memory": func(*testing.T) (outbox, application.EventSinkStore) {
			s := memory.NewStore()
			return memory.NewTasks(s), memory.NewEventSinks(s)
		},
		"postgres": func(t *testing.T) (outbox, application.EventSinkStore) {
			db, _ := testenv.PostgresDB(t)
			tasks, err := postgres.NewTaskRepository(db)
			if err != nil {
				t.Fatal(err)
			}
			return tasks, postgres.NewEventSinks(db)
		},
	}
}

// sink is a stream of the test's own on the test's NATS server.
type sink struct {
	cfg natsink.Config
	js  jetstream.JetStream
}

func newSink(t *testing.T) sink {
	t.Helper()
	url := testenv.NATSURL(t)
	var b [4]byte
	_, _ = rand.Read(b[:])
	tag := hex.EncodeToString(b[:])
	cfg := natsink.Config{URL: url, Stream: "OTA_EVENTS_TEST_" + strings.ToUpper(tag), SubjectPrefix: "ota_test_" + tag + ".events"}
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = js.DeleteStream(context.Background(), cfg.Stream)
		nc.Close()
	})
	return sink{cfg: cfg, js: js}
}

func (s sink) publisher(t *testing.T) *natsink.Publisher {
	t.Helper()
	p, err := natsink.New(s.cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// received is what the stream holds, in its order.
type received struct {
	subject string
	msgID   string
	env     struct {
		ID      string          `json:"id"`
		Type    string          `json:"type"`
		Time    time.Time       `json:"time"`
		Version int             `json:"version"`
		Data    json.RawMessage `json:"data"`
	}
}

func (s sink) received(t *testing.T) []received {
	t.Helper()
	ctx := context.Background()
	st, err := s.js.Stream(ctx, s.cfg.Stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []received
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("message %d: %v", seq, err)
		}
		r := received{subject: m.Subject, msgID: m.Header.Get("Nats-Msg-Id")}
		if err := json.Unmarshal(m.Data, &r.env); err != nil {
			t.Fatalf("message %d: %v: %s", seq, err, m.Data)
		}
		out = append(out, r)
	}
	return out
}

// announce writes one event per type in types, each in its own
// transaction, and returns their payloads' marks in order.
func announce(t *testing.T, out outbox, from int, types ...domain.EventType) []string {
	t.Helper()
	var marks []string
	for i, typ := range types {
		mark := fmt.Sprintf("e%04d", from+i)
		a, err := domain.NewAnnouncement(typ, time.Now(), map[string]any{"mark": mark})
		if err != nil {
			t.Fatal(err)
		}
		if err := out.InTaskTx(context.Background(), func(tx ports.TaskTx) error { return tx.Announce(a) }); err != nil {
			t.Fatal(err)
		}
		if typ != domain.EventTest {
			marks = append(marks, mark)
		}
	}
	return marks
}

// drain publishes until want events went out (or a deadline passed),
// then once more to see that nothing more is pending. An event waits
// while any transaction older than its own is open on the database
// server (another test's included), so the count, not one empty batch,
// says when it is done.
func drain(t *testing.T, r *application.EventRelay, want int) int {
	t.Helper()
	total := 0
	deadline := time.Now().Add(20 * time.Second)
	for {
		n, held, err := r.PublishPending(context.Background())
		if err != nil || !held {
			t.Fatalf("publishing: held %v, %v", held, err)
		}
		total += n
		if n == 0 && (total >= want || time.Now().After(deadline)) {
			return total
		}
		if n == 0 {
			time.Sleep(20 * time.Millisecond)
		}
	}
}

func marksOf(t *testing.T, got []received, prefix string) []string {
	t.Helper()
	var marks []string
	seen := map[string]bool{}
	for _, r := range got {
		var d struct{ Mark string }
		_ = json.Unmarshal(r.env.Data, &d)
		marks = append(marks, d.Mark)
		if seen[r.env.ID] {
			t.Errorf("event %s arrived twice", r.env.ID)
		}
		seen[r.env.ID] = true
		if r.msgID != r.env.ID || r.subject != prefix+"."+r.env.Type || r.env.Version != domain.EventSchemaVersion || r.env.Time.IsZero() {
			t.Errorf("message %+v: Nats-Msg-Id, subject or envelope wrong", r)
		}
	}
	return marks
}

// Every event reaches the stream once, in the order written, on its
// type's subject, as its envelope, with its id as the Nats-Msg-Id; a test
// event (one subscription's) is not the fleet's and is not published. A
// relay started again resumes from the cursor, and a cursor moved back
// (a replica killed after publishing, before committing) publishes
// nothing twice.
func TestRelayPublishesEveryEventOnceInOrderAndResumes(t *testing.T) {
	for name, open := range worlds(t) {
		t.Run(name, func(t *testing.T) {
			out, sinks := open(t)
			s := newSink(t)
			types := []domain.EventType{domain.EventTaskSucceeded, domain.EventRolloutPaused, domain.EventTest, domain.EventFirmwarePublished}
			var want []string
			for i := range 6 {
				want = append(want, announce(t, out, i*len(types), types...)...)
			}
			relay := application.NewEventRelay(sinks, s.publisher(t), application.EventRelayConfig{Sink: "nats", Batch: 7}, nil)
			if n := drain(t, relay, len(want)); n != len(want) {
				t.Errorf("published %d, want %d", n, len(want))
			}
			if got := marksOf(t, s.received(t), s.cfg.SubjectPrefix); strings.Join(got, ",") != strings.Join(want, ",") {
				t.Fatalf("the stream holds\n%v\nwant\n%v", got, want)
			}
			// A new publisher and relay (a restart) publish only what came
			// after.
			want = append(want, announce(t, out, 100, domain.EventDeviceAdmitted, domain.EventTaskFailed)...)
			again := application.NewEventRelay(sinks, s.publisher(t), application.EventRelayConfig{Sink: "nats"}, nil)
			if n := drain(t, again, 2); n != 2 {
				t.Errorf("after a restart published %d, want 2", n)
			}
			if got := marksOf(t, s.received(t), s.cfg.SubjectPrefix); strings.Join(got, ",") != strings.Join(want, ",") {
				t.Fatalf("after a restart the stream holds\n%v\nwant\n%v", got, want)
			}
			// Another sink has a cursor of its own, from the start.
			other := newSink(t)
			if n := drain(t, application.NewEventRelay(sinks, other.publisher(t), application.EventRelayConfig{Sink: "other"}, nil), len(want)); n != len(want) {
				t.Errorf("another sink published %d, want %d", n, len(want))
			}
			// Publishing again what was published (the cursor not moved)
			// stores nothing twice: JetStream drops repeats by id.
			if n := drain(t, application.NewEventRelay(sinks, s.publisher(t), application.EventRelayConfig{Sink: "other"}, nil), 0); n != 0 {
				t.Errorf("the other sink's cursor did not move: %d", n)
			}
			replay := application.NewEventRelay(sinks, s.publisher(t), application.EventRelayConfig{Sink: "replay"}, nil)
			if n := drain(t, replay, len(want)); n != len(want) {
				t.Errorf("replayed %d", n)
			}
			if got := s.received(t); len(got) != len(want) {
				t.Errorf("after a replay the stream holds %d messages, want %d", len(got), len(want))
			}
		})
	}
}

// A NATS that does not answer never blocks the service: the publisher is
// made at once, a publish fails within its timeout, the cursor stays, and
// the relay's loop stops when asked. Once NATS answers, everything
// pending is published.
func TestRelayOutlivesANATSOutage(t *testing.T) {
	out, sinks := worlds(t)["memory"](t)
	want := announce(t, out, 0, domain.EventTaskCancelled, domain.EventRolloutResumed)
	start := time.Now()
	down, err := natsink.New(natsink.Config{URL: "nats://127.0.0.1:1", Stream: "OTA_EVENTS_DOWN", PublishTimeout: 300 * time.Millisecond}, nil)
	if err != nil {
		t.Fatalf("a NATS outage failed the start: %v", err)
	}
	defer down.Close()
	if d := time.Since(start); d > time.Second {
		t.Errorf("connecting to a NATS that is down took %s", d)
	}
	relay := application.NewEventRelay(sinks, down, application.EventRelayConfig{Sink: "nats", Poll: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond}, nil)
	if n, held, err := relay.PublishPending(context.Background()); err == nil || n != 0 || !held {
		t.Fatalf("publishing to a NATS that is down: %d %v %v", n, held, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { relay.Run(ctx); close(done) }()
	time.Sleep(300 * time.Millisecond)
	cancel()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		t.Fatal("the relay did not stop")
	}
	s := newSink(t)
	if n := drain(t, application.NewEventRelay(sinks, s.publisher(t), application.EventRelayConfig{Sink: "nats"}, nil), len(want)); n != len(want) {
		t.Errorf("after the outage published %d, want %d", n, len(want))
	}
}

// One replica publishes at a time: while another holds the cursor, a
// relay goes on at once without publishing.
func TestOneRelayHoldsTheCursor(t *testing.T) {
	db, _ := testenv.PostgresDB(t)
	sinks := postgres.NewEventSinks(db)
	s := newSink(t)
	tasks, err := postgres.NewTaskRepository(db)
	if err != nil {
		t.Fatal(err)
	}
	announce(t, tasks, 0, domain.EventTaskSucceeded)
	relay := application.NewEventRelay(sinks, s.publisher(t), application.EventRelayConfig{Sink: "nats"}, nil)
	if n := drain(t, relay, 1); n != 1 {
		t.Fatalf("first claim published %d", n)
	}
	announce(t, tasks, 1, domain.EventTaskFailed) // before the lock: pending, and final
	tx, err := db.Beginx()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.Exec(`SELECT 1 FROM event_sinks WHERE name = 'nats' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if n, held, err := relay.PublishPending(ctx); err != nil || held || n != 0 {
		t.Fatalf("while another holds the cursor: %d %v %v", n, held, err)
	}
	_ = tx.Rollback()
	if n := drain(t, relay, 1); n != 1 {
		t.Fatalf("once released: published %d", n)
	}
}

// An event whose transaction commits after a later-numbered one's is not
// skipped: the sink waits for the older transaction before it publishes
// past it.
func TestALateCommitIsNotLost(t *testing.T) {
	db, _ := testenv.PostgresDB(t)
	sinks := postgres.NewEventSinks(db)
	s := newSink(t)
	relay := application.NewEventRelay(sinks, s.publisher(t), application.EventRelayConfig{Sink: "nats"}, nil)
	insert := `INSERT INTO outbox_events (type, at, payload) VALUES ('task.failed', now(), $1)`
	slow, err := db.Beginx()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = slow.Rollback() }()
	if _, err := slow.Exec(insert, `{"mark":"slow"}`); err != nil { // the lower seq
		t.Fatal(err)
	}
	if _, err := db.Exec(insert, `{"mark":"fast"}`); err != nil { // committed first
		t.Fatal(err)
	}
	if n, _, err := relay.PublishPending(context.Background()); err != nil || n != 0 {
		t.Fatalf("published %d (%v) while an older transaction was open: it would skip it", n, err)
	}
	if err := slow.Commit(); err != nil {
		t.Fatal(err)
	}
	if n := drain(t, relay, 2); n != 2 {
		t.Fatalf("published %d, want 2", n)
	}
	if got := marksOf(t, s.received(t), s.cfg.SubjectPrefix); strings.Join(got, ",") != "slow,fast" {
		t.Errorf("the stream holds %v", got)
	}
}

const sinkToken = "eventsink-admin-token-0123456789"

// sinkEnv points otad at s.
func sinkEnv(s sink) map[string]string {
	return map[string]string{"OTA_EVENTS_NATS_URL": s.cfg.URL, "OTA_EVENTS_NATS_STREAM": s.cfg.Stream,
		"OTA_EVENTS_NATS_SUBJECT_PREFIX": s.cfg.SubjectPrefix}
}

// otad serve with OTA_EVENTS_NATS_URL publishes what its changes
// announce: two replicas share one cursor, and every device registered
// on either reaches the stream once.
func TestServePublishesToNATS(t *testing.T) {
	_, dbURL := testenv.PostgresDB(t)
	s := newSink(t)
	otads := testenv.StartOtads(t, testenv.OtadConfig{Name: "sink", DatabaseURL: dbURL, RedisURL: testenv.RedisURL(t), AdminToken: sinkToken,
		Env: sinkEnv(s)}, "a", "b")
	registerAndReceive(t, s, otads)
}

// OTA_STORE=memory publishes too: the relay runs beside the single
// process's webhook delivery, over its in-process outbox.
func TestMemoryServePublishesToNATS(t *testing.T) {
	s := newSink(t)
	env := sinkEnv(s)
	env["OTA_STORE"] = "memory"
	o := testenv.StartOtad(t, testenv.OtadConfig{Name: "sink-memory", DatabaseURL: "postgres://unused.invalid/none",
		RedisURL: "redis://unused.invalid:6379/0", AdminToken: sinkToken, Env: env})
	registerAndReceive(t, s, []*testenv.Otad{o})
}

// registerAndReceive registers devices on otads in turn and expects each
// on the stream once, in order, as device.registered.
func registerAndReceive(t *testing.T, s sink, otads []*testenv.Otad) {
	t.Helper()
	const n = 20
	for i := range n {
		o := otads[i%len(otads)]
		if code, body := testenv.PostJSON(t, o.URL+"/api/v1/admin/devices", sinkToken,
			map[string]any{"device_id": fmt.Sprintf("dev-%02d", i), "model": "cam-sink"}); code != 201 {
			t.Fatalf("registering: %d %v", code, body)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	var got []received
	for time.Now().Before(deadline) {
		if got = s.received(t); len(got) >= n {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	marksOf(t, got, s.cfg.SubjectPrefix) // once per id, envelopes well formed
	if len(got) != n {
		t.Fatalf("the stream holds %d events, want %d", len(got), n)
	}
	for i, r := range got {
		var d struct {
			DeviceID string `json:"device_id"`
		}
		_ = json.Unmarshal(r.env.Data, &d)
		if r.env.Type != "device.registered" || d.DeviceID != fmt.Sprintf("dev-%02d", i) {
			t.Errorf("message %d: %s %s, want device.registered of dev-%02d", i, r.env.Type, r.env.Data, i)
		}
	}
}
