package local

import (
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/ai-device/ota/ports"
)

// RateLimiter is a per-key token bucket held in this process. Each replica
// keeps its own buckets: a device behind a load balancer that spreads it
// over N replicas gets at most N times its budget, which is enough to stop
// a runaway agent without a network round trip on every poll.
type RateLimiter struct {
	limit rate.Limit
	burst int
	idle  time.Duration

	mu      sync.Mutex
	buckets map[string]*bucket
	sweep   time.Time
}

type bucket struct {
	lim  *rate.Limiter
	seen time.Time
}

var _ ports.RateLimiter = (*RateLimiter)(nil)

// NewRateLimiter allows perSecond requests a second per key, in bursts of
// up to burst. Buckets idle for a while and full again are forgotten, so
// memory follows the active fleet, not the registered one.
func NewRateLimiter(perSecond float64, burst int) *RateLimiter {
	if burst < 1 {
		burst = 1
	}
	return &RateLimiter{limit: rate.Limit(perSecond), burst: burst, idle: 10 * time.Minute, buckets: map[string]*bucket{}}
}

// Allow spends one token of key's bucket.
func (l *RateLimiter) Allow(key string) (bool, time.Duration) {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.sweep) > l.idle {
		for k, b := range l.buckets {
			// Only a full bucket is forgotten: a new one starts full, so
			// forgetting one still refilling would hand its key a fresh
			// burst early (a slow budget refills over hours).
			if now.Sub(b.seen) > l.idle && b.lim.TokensAt(now) >= float64(l.burst) {
				delete(l.buckets, k)
			}
		}
		l.sweep = now
	}
	b, ok := l.buckets[key]
	if !ok {
		b = &bucket{lim: rate.NewLimiter(l.limit, l.burst)}
		l.buckets[key] = b
	}
	b.seen = now
	r := b.lim.ReserveN(now, 1)
	if !r.OK() {
		return false, time.Second
	}
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}
