package redislock

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/redis/rueidis"
)

// Defaults New applies to zero Config fields. They match OTA_LOCK_TTL and
// OTA_LOCK_WAIT in docs/CONFIGURATION.md, and the key layout the product documents
// ("ota:lock:0:{device_id}:{firmware_id}").
const (
	DefaultKeyPrefix       = "ota:lock"
	DefaultTTL             = 5 * time.Second
	DefaultWait            = 500 * time.Millisecond
	DefaultMajority  int32 = 1
)

// Config says where Redis is and how the locks behave. Exactly one of URL and
// Addresses must be set; zero durations and counts take the defaults above.
type Config struct {
	// Addresses lists Redis nodes as host:port. One address is a single Redis
	// (or a cluster node: rueidis asks the node and switches to cluster mode
	// by itself); several must be nodes of one cluster.
	Addresses []string
	// URL is redis://[user:pass@]host:port[/db] (rediss:// for TLS). The host
	// part may be a comma-separated host:port list, the form cluster URLs are
	// usually written in, on top of the ?addr= form rueidis.ParseURL knows.
	URL string
	// KeyPrefix namespaces the lock keys; rueidislock stores a lock named n
	// as KeyPrefix + ":0:" + n. Tests give each run its own prefix.
	KeyPrefix string
	// TTL is the lock's validity. rueidislock extends it every TTL/2 while
	// the holder runs, so it only bounds how long a crashed holder blocks
	// others, not how long a critical section may take.
	TTL time.Duration
	// Wait bounds how long WithLock waits for a lock held elsewhere before it
	// answers SERVICE_BUSY. It also bounds an answer when Redis is down or
	// silent, and how long a release may hold up the caller.
	Wait time.Duration
	// Majority is how many of 2*Majority-1 keys must be acquired, so that a
	// lock survives the loss of Majority-1 masters of a Redis Cluster. Keep
	// 1 on a single Redis: more keys on one server add round trips, not
	// safety, and New refuses more there. Above 1, New reads the cluster's
	// slots and refuses a cluster with fewer masters than keys; the keys of
	// a lock are then named KeyPrefix + "{:" + i + ":" + tag + "}:" + name,
	// the tag chosen so that each lands on its own master (see keySpread).
	Majority int32
}

func (c Config) withDefaults() Config {
	if c.KeyPrefix == "" {
		c.KeyPrefix = DefaultKeyPrefix
	}
	if c.TTL <= 0 {
		c.TTL = DefaultTTL
	}
	if c.Wait <= 0 {
		c.Wait = DefaultWait
	}
	if c.Majority <= 0 {
		c.Majority = DefaultMajority
	}
	return c
}

// clientOption turns the Config into rueidis options tuned so that a dead or
// silent Redis is noticed quickly and never retried into a late answer.
func (c Config) clientOption() (rueidis.ClientOption, error) {
	var opt rueidis.ClientOption
	switch {
	case c.URL != "" && len(c.Addresses) > 0:
		return opt, errors.New("redislock: set either URL or Addresses, not both")
	case c.URL != "":
		var err error
		if opt, err = parseURL(c.URL); err != nil {
			return opt, err
		}
	case len(c.Addresses) > 0:
		for _, a := range c.Addresses {
			a = strings.TrimSpace(a)
			if _, _, err := net.SplitHostPort(a); err != nil {
				return opt, fmt.Errorf("redislock: address %q is not host:port: %w", a, err)
			}
			opt.InitAddress = append(opt.InitAddress, a)
		}
	default:
		return opt, errors.New("redislock: no Redis URL or address configured")
	}
	if opt.DisableCache {
		// Without client-side caching rueidislock cannot be told when a key
		// goes away and falls back to polling every TryNextAfter.
		return opt, errors.New("redislock: client_cache=0 is not supported: waiting for a lock relies on client-side caching invalidations")
	}
	// Retries would re-send a failed acquire or release until its deadline
	// (the whole TTL for a release), turning "Redis is down" into an answer
	// seconds late. A lock call fails fast instead; the caller retries.
	opt.DisableRetry = true
	// How fast a silent Redis is noticed. An idle connection is PINGed every
	// KeepAlive and dropped when a PING goes ConnWriteTimeout unanswered
	// (rueidis's default is 10s); rueidislock extends a lock with a context
	// that runs to the new validity, so without this a holder would not
	// learn that Redis went silent before its key had expired. On the drop,
	// rueidislock tries to extend or delete once more, which reconnects,
	// bounded by the dial timeout, and then cancels the holder's context.
	// With a TTL of 5s: a PING after at most 1s of silence, 500ms for its
	// answer, 500ms to dial, so a holder hears of a silent Redis within 2s,
	// while its key, extended every 2.5s, was valid for at least 2.5s more.
	// The price: a Redis that stalls for more than about TTL/10 (a big fork)
	// loses the connection and the locks held on it (SERVICE_BUSY, LockLost).
	probe := clamp(c.TTL/10, 100*time.Millisecond, time.Second)
	if opt.Dialer.KeepAlive == 0 {
		opt.Dialer.KeepAlive = probe
	}
	if opt.ConnWriteTimeout == 0 {
		opt.ConnWriteTimeout = probe
	}
	// Connecting, HELLO included, is bounded the same way: New fails fast
	// on a silent host, and a reconnect under a held lock ends in time.
	if opt.Dialer.Timeout == 0 {
		opt.Dialer.Timeout = clamp(min(c.Wait, c.TTL/10), 100*time.Millisecond, time.Second)
	}
	if opt.ClientName == "" {
		opt.ClientName = "ota-lock"
	}
	return opt, nil
}

// parseURL accepts what rueidis.ParseURL does plus a comma-separated host
// list, and keeps the password out of its errors.
func parseURL(raw string) (rueidis.ClientOption, error) {
	first, extra := splitHostList(raw)
	opt, err := rueidis.ParseURL(first)
	if err != nil {
		// *url.Error quotes the whole URL, password included.
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = ue.Err
		}
		return opt, fmt.Errorf("redislock: invalid Redis URL: %w", err)
	}
	for _, h := range extra {
		h = strings.TrimSpace(h)
		if _, _, err := net.SplitHostPort(h); err != nil {
			return opt, fmt.Errorf("redislock: invalid Redis URL: host %q is not host:port", h)
		}
		opt.InitAddress = append(opt.InitAddress, h)
	}
	return opt, nil
}

// splitHostList rewrites "redis://u:p@h1:1,h2:2/0" to "redis://u:p@h1:1/0"
// and returns the other hosts, ["h2:2"].
func splitHostList(raw string) (string, []string) {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return raw, nil
	}
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	authority, tail := rest[:end], rest[end:]
	at := strings.LastIndexByte(authority, '@')
	userinfo, hosts := authority[:at+1], authority[at+1:]
	if !strings.Contains(hosts, ",") {
		return raw, nil
	}
	list := strings.Split(hosts, ",")
	return scheme + "://" + userinfo + list[0] + tail, list[1:]
}

// tryNextAfter is rueidislock's timeout for acquiring one key. With a single
// key there is no next key to try, so it is only the acquire command's
// timeout, and its 20ms default would call a briefly slow Redis (a fork, a GC
// pause here) unavailable. Give the keys the wait between them instead.
func tryNextAfter(c Config) time.Duration {
	return max(c.Wait/time.Duration(2*c.Majority-1), 20*time.Millisecond)
}

func clamp(d, lo, hi time.Duration) time.Duration {
	return min(max(d, lo), hi)
}
