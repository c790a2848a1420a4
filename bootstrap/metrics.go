package bootstrap

import (
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ai-device/ota/ports"
)

// Metrics is the Prometheus side of ports.Metrics and of the HTTP edge's
// request observer. Each instance has its own registry, so tests can run
// several services in one process.
type Metrics struct {
	registry     *prometheus.Registry
	checks       *prometheus.CounterVec
	lockWait     prometheus.Histogram
	lockFailures *prometheus.CounterVec
	transitions  *prometheus.CounterVec
	requests     *prometheus.HistogramVec
	// observers caches requests' histogram per label set (requestLabels →
	// prometheus.Observer): the same few label sets serve every request, and
	// WithLabelValues validated, hashed and formatted them on each one.
	// It holds exactly the label sets requests already holds.
	observers sync.Map
	// inFlight counts the requests being served (RequestStarted less
	// ObserveRequest): the ota_http_requests_in_flight gauge, and how busy
	// the replica is to the webhook delivery, which yields to requests.
	inFlight atomic.Int64
	// served sums the durations of finished requests (nanoseconds), so
	// that the delivery can tell the average load between two looks.
	served atomic.Int64
	// finished counts the finished requests: the rate a busy replica's
	// webhook deliveries are a share of.
	finished atomic.Int64
}

// requestLabels is one label set of ota_http_request_duration_seconds.
type requestLabels struct {
	method, route string
	code          int
}

var _ ports.Metrics = (*Metrics)(nil)

// NewMetrics registers the service's metrics with a fresh registry.
func NewMetrics() *Metrics {
	m := &Metrics{
		registry: prometheus.NewRegistry(),
		checks: counterVec("ota_checks_total",
			"Device checks by outcome (no_update, reused, created, superseded, busy, error).", "outcome"),
		lockWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "ota_lock_wait_seconds",
			Help:    "Time spent waiting for a device:firmware lock that was acquired.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}),
		lockFailures: counterVec("ota_lock_failures_total",
			"Locks not acquired or lost, by reason (timeout, unavailable, lost).", "reason"),
		transitions: counterVec("ota_task_transitions_total", "Tasks entering a status.", "status"),
		requests: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "ota_http_request_duration_seconds",
			Help:    "HTTP request duration by method, route template and status code.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"method", "route", "code"}),
	}
	inFlight := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "ota_http_requests_in_flight",
		Help: "HTTP requests being served; webhook delivery slows to one per OTA_WEBHOOK_BUSY_EVERY requests while there are 8 or more."},
		func() float64 { return float64(m.inFlight.Load()) })
	m.registry.MustRegister(m.checks, m.lockWait, m.lockFailures, m.transitions, m.requests, inFlight,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// counterVec is a counter by one label.
func counterVec(name, help, label string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{label})
}

// Handler serves the registry for /metrics.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{Registry: m.registry})
}

// CheckDone counts a check by outcome.
func (m *Metrics) CheckDone(outcome string) { m.checks.WithLabelValues(outcome).Inc() }

// TaskTransition counts a task entering a status.
func (m *Metrics) TaskTransition(status string) { m.transitions.WithLabelValues(status).Inc() }

// LockAcquired observes the wait for an acquired lock.
func (m *Metrics) LockAcquired(wait time.Duration) { m.lockWait.Observe(wait.Seconds()) }

// LockFailed counts a refused or lost lock.
func (m *Metrics) LockFailed(reason string) { m.lockFailures.WithLabelValues(reason).Inc() }

// RequestStarted counts a request in flight until its ObserveRequest.
func (m *Metrics) RequestStarted() { m.inFlight.Add(1) }

// InFlight is the number of requests being served.
func (m *Metrics) InFlight() int { return int(m.inFlight.Load()) }

// Served is the time spent serving the requests finished so far.
func (m *Metrics) Served() time.Duration { return time.Duration(m.served.Load()) }

// Finished is the number of requests finished so far.
func (m *Metrics) Finished() int64 { return m.finished.Load() }

// ObserveRequest records one HTTP request's duration; it is no longer in
// flight.
func (m *Metrics) ObserveRequest(method, route string, code int, d time.Duration) {
	m.inFlight.Add(-1)
	m.served.Add(int64(d))
	m.finished.Add(1)
	key := requestLabels{method, route, code}
	o, ok := m.observers.Load(key)
	if !ok {
		o, _ = m.observers.LoadOrStore(key, m.requests.WithLabelValues(method, route, strconv.Itoa(code)))
	}
	o.(prometheus.Observer).Observe(d.Seconds())
}
