package webhooks

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ai-device/ota/adapters/local"
	"github.com/ai-device/ota/adapters/memory"
	"github.com/ai-device/ota/adapters/postgres"
	"github.com/ai-device/ota/adapters/webhookhttp"
	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
	"github.com/ai-device/ota/tests/testenv"
)

// clock is the test's clock: it moves only when the test advances it.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// store is one database's webhook store and the accounts store whose
// audit writes announce events, as every change does.
type store struct {
	hooks interface {
		application.WebhookStore
		application.DeliveryQueue
	}
	accounts application.AccountStore
}

func postgresStore(t *testing.T) store {
	db, _ := testenv.PostgresDB(t)
	return store{hooks: postgres.NewWebhookRepository(db), accounts: postgres.NewAccountRepository(db)}
}

func memoryStore(*testing.T) store {
	s := memory.NewStore()
	return store{hooks: memory.NewWebhooks(s), accounts: memory.NewAccounts(s)}
}

// rig is a store, the webhook use cases and a clock.
type rig struct {
	store
	clock *clock
	hooks *application.Webhooks
	actor domain.Actor
}

func newRig(t *testing.T, s store) *rig {
	c := &clock{now: time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)}
	hooks, err := application.NewWebhooks(s.hooks, c, local.NewUUIDs())
	if err != nil {
		t.Fatal(err)
	}
	actor, err := domain.NewActor(domain.RootPrincipal(), "webhook-tests", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	return &rig{store: s, clock: c, hooks: hooks, actor: actor}
}

// subscribe subscribes url to types.
func (r *rig) subscribe(t *testing.T, url string, types ...string) ports.WebhookCredentials {
	t.Helper()
	creds, err := r.hooks.CreateWebhook(t.Context(), r.actor, ports.NewWebhook{URL: url, EventTypes: types})
	if err != nil {
		t.Fatal(err)
	}
	return creds
}

// announce writes events in one change's transaction, each at the clock's
// now, through the store's audit write (domain.AuditRecord.Announcing).
func (r *rig) announce(t *testing.T, typ domain.EventType, n int) {
	t.Helper()
	for from := 0; from < n; from += 1000 {
		rec := domain.AuditRecord{}
		for i := from; i < min(n, from+1000); i++ {
			a, err := domain.NewAnnouncement(typ, r.clock.Now(), map[string]any{"task_id": i, "type": string(typ)})
			if err != nil {
				t.Fatal(err)
			}
			rec = rec.Announcing(a)
		}
		if err := r.accounts.InAccountTx(t.Context(), func(tx ports.AccountTx) error { return tx.RecordAudit(t.Context(), rec) }); err != nil {
			t.Fatal(err)
		}
	}
}

// quiet is a replica serving no request: delivery never slows down.
type quiet struct{}

func (quiet) InFlight() int { return 0 }

func (quiet) Served() time.Duration { return 0 }

func (quiet) Finished() int64 { return 0 }

// deliverer is a worker on r's store posting through the real client.
func (r *rig) deliverer(t *testing.T, allowPrivate bool, cfg application.DeliveryConfig) *application.WebhookDeliverer {
	d, err := application.NewWebhookDeliverer(r.store.hooks, webhookhttp.NewPoster(webhookhttp.Config{AllowPrivate: allowPrivate}),
		r.clock, quiet{}, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// drain attempts every delivery due now, until none is.
func drain(t *testing.T, d *application.WebhookDeliverer) {
	t.Helper()
	for {
		n, err := d.Once(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
	}
}

// delivery is what a receiver was sent.
type delivery struct {
	ID, Type string
	Header   http.Header
	Body     []byte
}

// receiver is an endpoint that verifies each delivery's signature with
// the secrets it is told, as a subscriber's would, and answers status
// (503 while down).
type receiver struct {
	*httptest.Server
	t       *testing.T
	clock   ports.Clock
	down    atomic.Bool
	mu      sync.Mutex
	secrets []string
	got     []delivery
	bad     int // deliveries whose signature did not verify
}

func newReceiver(t *testing.T, c ports.Clock) *receiver {
	r := &receiver{t: t, clock: c}
	r.Server = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	if r.down.Load() {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	var env struct {
		ID      string          `json:"id"`
		Type    string          `json:"type"`
		Time    string          `json:"time"`
		Version int             `json:"version"`
		Data    json.RawMessage `json:"data"`
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := domain.VerifyWebhook(req.Header.Get("X-OTA-Signature"), r.secrets, body, r.clock.Now(), domain.WebhookReplayWindow); err != nil ||
		json.Unmarshal(body, &env) != nil || env.ID != req.Header.Get("X-OTA-Event-Id") || env.Type != req.Header.Get("X-OTA-Event-Type") ||
		env.Version != domain.EventSchemaVersion || req.Header.Get("Content-Type") != "application/json" || req.Header.Get("X-OTA-Delivery") == "" {
		r.bad++
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	r.got = append(r.got, delivery{ID: env.ID, Type: env.Type, Header: req.Header.Clone(), Body: body})
	w.WriteHeader(http.StatusNoContent)
}

// trust makes the receiver verify with secret.
func (r *receiver) trust(secret string) {
	r.mu.Lock()
	r.secrets = append(r.secrets, secret)
	r.mu.Unlock()
}

// received is what it accepted: every delivery, the distinct event ids,
// and how many it refused for a bad signature.
func (r *receiver) received() (all []delivery, distinct map[string]string, bad int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	distinct = map[string]string{}
	for _, d := range r.got {
		distinct[d.ID] = d.Type
	}
	return append([]delivery(nil), r.got...), distinct, r.bad
}

// log is a subscription's whole delivery log.
func (r *rig) log(t *testing.T, id domain.UUID) []ports.WebhookDelivery {
	t.Helper()
	var out []ports.WebhookDelivery
	after := ""
	for {
		page, err := r.hooks.Deliveries(t.Context(), id, "200", after)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, page.Items...)
		if after = page.Next; after == "" {
			return out
		}
	}
}
