package bootstrap

import (
	"strconv"
	"time"

	"github.com/google/wire"

	"github.com/ai-device/ota/adapters/webhookhttp"
	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/ports"
)

// WebhookSettings are the OTA_WEBHOOK_* settings of the webhook delivery
// (docs/CONFIGURATION.md).
type WebhookSettings struct {
	// Workers is how many deliveries a replica attempts at once
	// (OTA_WEBHOOK_WORKERS).
	Workers int
	// RetryFor is how long after an event its delivery is retried before
	// it is marked failed (OTA_WEBHOOK_RETRY_FOR).
	RetryFor time.Duration
	// DisableAfter is how long a subscription's deliveries may keep
	// failing before it is disabled (OTA_WEBHOOK_DISABLE_AFTER).
	DisableAfter time.Duration
	// BusyEvery paces a replica's deliveries while it is busy serving
	// requests: one per this many requests served (OTA_WEBHOOK_BUSY_EVERY).
	BusyEvery int
	// BusyRate is the fewest deliveries per second a busy replica makes
	// (OTA_WEBHOOK_BUSY_RATE; 0: never paced).
	BusyRate int
	// AllowPrivate lets deliveries reach loopback, private and link-local
	// addresses (OTA_WEBHOOK_ALLOW_PRIVATE).
	AllowPrivate bool
}

func loadWebhookConfig(cfg *Config, get func(name, def string) string, bad func(name, format string, args ...any),
	duration func(name, def string, min, max time.Duration) time.Duration, whole func(name, def string, min, max int) int) {
	cfg.Webhooks.Workers = whole("OTA_WEBHOOK_WORKERS", "4", 0, 256)
	cfg.Webhooks.RetryFor = duration("OTA_WEBHOOK_RETRY_FOR", "24h", time.Minute, 30*24*time.Hour)
	cfg.Webhooks.DisableAfter = duration("OTA_WEBHOOK_DISABLE_AFTER", "24h", time.Minute, 30*24*time.Hour)
	cfg.Webhooks.BusyEvery = whole("OTA_WEBHOOK_BUSY_EVERY", "100", 1, 1_000_000)
	cfg.Webhooks.BusyRate = whole("OTA_WEBHOOK_BUSY_RATE", "10", 0, 1_000_000)
	raw := get("OTA_WEBHOOK_ALLOW_PRIVATE", "false")
	allow, err := strconv.ParseBool(raw)
	if err != nil {
		bad("OTA_WEBHOOK_ALLOW_PRIVATE", "%q must be true or false", raw)
	}
	cfg.Webhooks.AllowPrivate = allow
}

// webhookSet provides the webhook use cases and the delivery worker over
// the store's WebhookStore and DeliveryQueue.
var webhookSet = wire.NewSet(
	application.NewWebhooks, wire.Bind(new(ports.WebhookService), new(*application.Webhooks)),
	application.NewWebhookDeliverer, WebhookDeliveryConfigFrom,
	WebhookPosterFrom, wire.Bind(new(application.WebhookPoster), new(*webhookhttp.Poster)),
)

// WebhookDeliveryConfigFrom tunes the delivery worker. OTA_WEBHOOK_WORKERS=0
// delivers nothing on this replica (the others deliver), and
// OTA_WEBHOOK_BUSY_RATE=0 never slows it down.
func WebhookDeliveryConfigFrom(cfg Config) application.DeliveryConfig {
	off := func(n int) int { // the worker's "none" is negative; its zero is the default
		if n == 0 {
			return -1
		}
		return n
	}
	return application.DeliveryConfig{Workers: off(cfg.Webhooks.Workers), RetryFor: cfg.Webhooks.RetryFor,
		DisableAfter: cfg.Webhooks.DisableAfter, BusyEvery: cfg.Webhooks.BusyEvery, BusyRate: float64(off(cfg.Webhooks.BusyRate))}
}

// WebhookPosterFrom is the outbound HTTP client of deliveries.
func WebhookPosterFrom(cfg Config) *webhookhttp.Poster {
	return webhookhttp.NewPoster(webhookhttp.Config{AllowPrivate: cfg.Webhooks.AllowPrivate})
}
