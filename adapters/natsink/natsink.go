// Package natsink publishes the service's events to NATS JetStream
// (OTA_EVENTS_NATS_URL), for operators who stream events rather than
// receive webhooks: each event on "<prefix>.<type>" in a stream that
// keeps them, its envelope as the message's data, its id as the
// Nats-Msg-Id, so that JetStream drops the repeats of an at-least-once
// relay (application.EventRelay) within its duplicate window.
package natsink

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/ai-device/ota/ports"
)

// Defaults of Config.
const (
	DefaultStream        = "OTA_EVENTS"
	DefaultSubjectPrefix = "ota.events"
	// DefaultPublishTimeout bounds one publish's wait for JetStream's
	// acknowledgement.
	DefaultPublishTimeout = 5 * time.Second
)

// Config says where to publish; zero fields take the defaults.
type Config struct {
	URL            string
	Stream         string
	SubjectPrefix  string
	PublishTimeout time.Duration
}

// Publisher publishes events to a JetStream stream, creating the stream
// (subjects "<prefix>.>") when it is missing. It connects in the
// background and reconnects for ever: a NATS outage fails publishes,
// which the relay retries, and never the service's start.
type Publisher struct {
	cfg    Config
	nc     *nats.Conn
	js     jetstream.JetStream
	logger *slog.Logger

	mu      sync.Mutex
	ensured bool // the stream is known to exist
}

// New connects to cfg.URL (in the background when it does not answer
// yet). Close it when done.
func New(cfg Config, logger *slog.Logger) (*Publisher, error) {
	if cfg.Stream == "" {
		cfg.Stream = DefaultStream
	}
	if cfg.SubjectPrefix == "" {
		cfg.SubjectPrefix = DefaultSubjectPrefix
	}
	if cfg.PublishTimeout <= 0 {
		cfg.PublishTimeout = DefaultPublishTimeout
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	nc, err := nats.Connect(cfg.URL, nats.Name("otad"), nats.RetryOnFailedConnect(true), nats.MaxReconnects(-1),
		nats.ReconnectWait(time.Second),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				logger.Warn("event sink: NATS disconnected", "error", err.Error())
			}
		}),
		nats.ReconnectHandler(func(*nats.Conn) { logger.Info("event sink: NATS reconnected") }))
	if err != nil {
		return nil, fmt.Errorf("connecting to NATS (OTA_EVENTS_NATS_URL): %w", err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("NATS JetStream: %w", err)
	}
	return &Publisher{cfg: cfg, nc: nc, js: js, logger: logger}, nil
}

// Close drains nothing (every publish waited for its acknowledgement)
// and closes the connection.
func (p *Publisher) Close() { p.nc.Close() }

// Subject is where an event of type t is published.
func (p *Publisher) Subject(t string) string { return p.cfg.SubjectPrefix + "." + t }

// ensureStream creates the stream when it is missing; an existing one is
// left as its operator configured it.
func (p *Publisher) ensureStream(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ensured {
		return nil
	}
	_, err := p.js.Stream(ctx, p.cfg.Stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		_, err = p.js.CreateStream(ctx, jetstream.StreamConfig{Name: p.cfg.Stream, Subjects: []string{p.cfg.SubjectPrefix + ".>"},
			Storage: jetstream.FileStorage, Duplicates: 2 * time.Minute})
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			err = nil // another replica created it meanwhile
		}
	}
	if err != nil {
		return fmt.Errorf("NATS stream %s: %w", p.cfg.Stream, err)
	}
	p.ensured = true
	return nil
}

// Publish publishes ev and waits for JetStream to store it (or to say it
// is a repeat of one stored).
func (p *Publisher) Publish(ctx context.Context, ev ports.WebhookEnvelope) error {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.PublishTimeout)
	defer cancel()
	if err := p.ensureStream(ctx); err != nil {
		return err
	}
	body, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("encoding event %s: %w", ev.ID, err)
	}
	msg := &nats.Msg{Subject: p.Subject(string(ev.Type)), Data: body, Header: nats.Header{}}
	msg.Header.Set("Content-Type", "application/json")
	if _, err := p.js.PublishMsg(ctx, msg, jetstream.WithMsgID(ev.ID.String())); err != nil {
		if errors.Is(err, jetstream.ErrNoStreamResponse) {
			p.mu.Lock()
			p.ensured = false // deleted since: create it again next time
			p.mu.Unlock()
		}
		return fmt.Errorf("publishing event %s to %s: %w", ev.ID, msg.Subject, err)
	}
	return nil
}
