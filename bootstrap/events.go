package bootstrap

import (
	"log/slog"
	"net/url"
	"regexp"

	"github.com/ai-device/ota/adapters/natsink"
	"github.com/ai-device/ota/application"
)

// EventSinkSettings are the OTA_EVENTS_* settings of the NATS JetStream
// sink (docs/CONFIGURATION.md): off unless NATSURL is set.
type EventSinkSettings struct {
	NATSURL       string // OTA_EVENTS_NATS_URL
	Stream        string // OTA_EVENTS_NATS_STREAM
	SubjectPrefix string // OTA_EVENTS_NATS_SUBJECT_PREFIX
}

var (
	natsStreamName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	natsSubject    = regexp.MustCompile(`^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$`)
)

func loadEventSinkConfig(cfg *Config, get func(name, def string) string, bad func(name, format string, args ...any)) {
	cfg.Events.NATSURL = get("OTA_EVENTS_NATS_URL", "")
	if u, err := url.Parse(cfg.Events.NATSURL); cfg.Events.NATSURL != "" && (err != nil || u.Host == "" ||
		(u.Scheme != "nats" && u.Scheme != "tls" && u.Scheme != "ws" && u.Scheme != "wss")) {
		bad("OTA_EVENTS_NATS_URL", "must be a nats:// (or tls://, ws://, wss://) URL such as nats://127.0.0.1:4222 (or unset)")
	}
	cfg.Events.Stream = get("OTA_EVENTS_NATS_STREAM", natsink.DefaultStream)
	if !natsStreamName.MatchString(cfg.Events.Stream) {
		bad("OTA_EVENTS_NATS_STREAM", "%q must be 1-64 letters, digits, - or _", cfg.Events.Stream)
	}
	cfg.Events.SubjectPrefix = get("OTA_EVENTS_NATS_SUBJECT_PREFIX", natsink.DefaultSubjectPrefix)
	if !natsSubject.MatchString(cfg.Events.SubjectPrefix) {
		bad("OTA_EVENTS_NATS_SUBJECT_PREFIX", "%q must be dot-separated tokens of letters, digits, - or _", cfg.Events.SubjectPrefix)
	}
}

// eventSinkName is the NATS sink's cursor in event_sinks.
const eventSinkName = "nats"

// NewEventRelay is the NATS JetStream relay of the outbox, when
// OTA_EVENTS_NATS_URL is set (nil otherwise): the app runs it in the
// background while it serves, in either store, and stops it after the
// requests drained, so the events of the last requests are in the outbox
// for the next start. A NATS that does not answer is retried behind the
// scenes: it fails neither the start nor readiness. cleanup closes the
// connection.
func NewEventRelay(cfg Config, store application.EventSinkStore, logger *slog.Logger) (*application.EventRelay, func(), error) {
	if cfg.Events.NATSURL == "" {
		return nil, func() {}, nil
	}
	pub, err := natsink.New(natsink.Config{URL: cfg.Events.NATSURL, Stream: cfg.Events.Stream, SubjectPrefix: cfg.Events.SubjectPrefix}, logger)
	if err != nil {
		return nil, nil, err
	}
	logger.Info("publishing events to NATS JetStream", "stream", cfg.Events.Stream, "subjects", cfg.Events.SubjectPrefix+".>")
	return application.NewEventRelay(store, pub, application.EventRelayConfig{Sink: eventSinkName}, logger), pub.Close, nil
}
