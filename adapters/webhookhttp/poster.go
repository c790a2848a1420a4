// Package webhookhttp posts webhook deliveries over HTTP(S): the
// outbound client of the delivery worker (application.WebhookPoster).
// It connects only to public addresses unless told otherwise, judging the
// address it actually dials, so a name that resolves to a private address
// (at once, or after a DNS change: rebinding) is refused all the same.
package webhookhttp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"syscall"
	"time"
)

// ErrDestinationRefused is a delivery to an address the service does not
// send to: loopback, private, link-local, unspecified or multicast
// (OTA_WEBHOOK_ALLOW_PRIVATE=true allows them, for tests and closed
// networks).
var ErrDestinationRefused = errors.New("destination address refused: not a public address (OTA_WEBHOOK_ALLOW_PRIVATE)")

// Config says where deliveries may go.
type Config struct {
	// AllowPrivate lets deliveries reach loopback, private and link-local
	// addresses.
	AllowPrivate bool
}

// Poster posts deliveries; one per process, its connections reused.
type Poster struct{ client *http.Client }

// cgnat is the shared address space of carrier-grade NAT (RFC 6598),
// private in all but name.
var cgnat = netip.MustParsePrefix("100.64.0.0/10")

// public reports whether a may be sent to from a service on the internet.
func public(a netip.Addr) bool {
	a = a.Unmap()
	return a.IsGlobalUnicast() && !a.IsPrivate() && !cgnat.Contains(a)
}

// NewPoster builds the client: no proxy (a proxy would dial for it,
// unchecked), no redirects followed (a 3xx is an answer that is not a
// success, retried), every dialled address checked at connect time.
func NewPoster(cfg Config) *Poster {
	dialer := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	if !cfg.AllowPrivate {
		dialer.Control = func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil || !public(ap.Addr()) {
				return fmt.Errorf("%w: %s", ErrDestinationRefused, address)
			}
			return nil
		}
	}
	transport := &http.Transport{Proxy: nil, DialContext: dialer.DialContext, ForceAttemptHTTP2: true,
		MaxIdleConns: 64, MaxIdleConnsPerHost: 16, IdleConnTimeout: 90 * time.Second, TLSHandshakeTimeout: 5 * time.Second}
	return &Poster{client: &http.Client{Transport: transport,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// Post sends body to rawURL with header and says the answer's status. Its
// errors do not repeat the URL, which may carry a token in its query.
func (p *Poster) Post(ctx context.Context, rawURL string, header map[string]string, body []byte) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, rawURL, bytes.NewReader(body))
	if err != nil {
		return 0, errors.New("the subscription's URL does not make a request")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	req.Header.Set("User-Agent", "otad-webhooks/1")
	resp, err := p.client.Do(req)
	if err != nil {
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = ue.Err
		}
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // lets the connection be reused
	return resp.StatusCode, nil
}
