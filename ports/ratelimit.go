package ports

import (
	"time"

	"github.com/ai-device/ota/domain"
)

// RateLimiter spends one unit of a caller's request budget. It answers
// false with the time until the next unit when the budget is spent.
type RateLimiter interface {
	Allow(key string) (bool, time.Duration)
}

// RateLimitedError refuses a request over budget. It matches
// domain.ErrRateLimited, and tells the edge what to send as Retry-After.
type RateLimitedError struct {
	Wait time.Duration
}

// Error says what happened without naming the caller.
func (e *RateLimitedError) Error() string { return "too many requests" }

// Unwrap matches domain.ErrRateLimited.
func (e *RateLimitedError) Unwrap() error { return domain.ErrRateLimited }

// RetryAfter is how long the caller should wait (at least a second).
func (e *RateLimitedError) RetryAfter() time.Duration {
	if e.Wait < time.Second {
		return time.Second
	}
	return e.Wait
}

// Unlimited never refuses; it is the limiter when limits are off.
type Unlimited struct{}

// Allow always allows.
func (Unlimited) Allow(string) (bool, time.Duration) { return true, 0 }
