package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// client speaks the OTA API for the whole fleet over one shared, tuned
// http.Client, and records every request in stats.
type client struct {
	hc         *http.Client
	urls       []string
	adminToken string
	timeout    time.Duration
	stats      *stats
}

// newClient builds the shared client. Keep-alive connections are kept for
// every worker (and every concurrent duplicate) so that steady load does
// not pay a TCP handshake per request.
func newClient(cfg config, st *stats) *client {
	conns := cfg.Concurrency * max(cfg.Dup, 1)
	tr := &http.Transport{
		Proxy:               nil, // loopback targets only: never through a proxy
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        conns * len(cfg.URLs),
		MaxIdleConnsPerHost: conns,
		IdleConnTimeout:     90 * time.Second,
		ForceAttemptHTTP2:   false,
	}
	return &client{
		hc:         &http.Client{Transport: tr},
		urls:       cfg.URLs,
		adminToken: cfg.AdminToken,
		timeout:    cfg.Timeout,
		stats:      st,
	}
}

func (c *client) close() { c.hc.CloseIdleConnections() }

// answer is one HTTP exchange as the simulator sees it. Status 0 means no
// HTTP answer (Code then says why).
type answer struct {
	Status     int
	Code       string // the error body's code, or the transport failure
	RetryAfter time.Duration
	body       []byte
}

// ok reports a 2xx answer.
func (a answer) ok() bool { return a.Status >= 200 && a.Status < 300 }

// busy reports the one refusal that is part of the contract under load.
func (a answer) busy() bool {
	return a.Status == http.StatusServiceUnavailable && a.Code == "SERVICE_BUSY"
}

func (a answer) String() string {
	if a.Status == 0 {
		return "transport error: " + a.Code
	}
	return fmt.Sprintf("%d %s %s", a.Status, a.Code, bytes.TrimSpace(a.body))
}

// errCancelled means the run ended while the request was in flight; such
// requests are not recorded.
var errCancelled = errors.New("cancelled")

// do sends one request to base+path. body is JSON-encoded when not nil;
// out, when not nil, receives a 2xx body. It returns errCancelled when ctx
// ended, and otherwise an answer (recorded in stats) and no error.
func (c *client) do(ctx context.Context, kind call, base, method, path, token string, body, out any) (answer, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return answer{}, err
		}
		rd = bytes.NewReader(b)
	}
	rctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, method, base+path, rd)
	if err != nil {
		return answer{}, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	start := time.Now()
	resp, err := c.hc.Do(req)
	var a answer
	if err == nil {
		a.body, err = io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		a.Status = resp.StatusCode
		if s, perr := strconv.Atoi(resp.Header.Get("Retry-After")); perr == nil && s > 0 {
			a.RetryAfter = time.Duration(s) * time.Second
		}
	}
	d := time.Since(start)
	if err != nil {
		if ctx.Err() != nil {
			return answer{}, errCancelled
		}
		a = answer{Code: transportCode(err)}
		c.stats.record(kind, 0, a.Code, d)
		return a, nil
	}
	if a.ok() {
		if out != nil {
			if err := json.Unmarshal(a.body, out); err != nil {
				a.Code = "BAD_BODY"
			}
		}
	} else {
		var e struct {
			Error struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		if json.Unmarshal(a.body, &e) == nil {
			a.Code = e.Error.Code
		}
	}
	c.stats.record(kind, a.Status, a.Code, d)
	return a, nil
}

// ---- wire shapes (adapters/rest/openapi.yaml) ----

type firmwareRef struct {
	ID      string `json:"id"`
	Version string `json:"version"`
}

type taskWire struct {
	ID       string      `json:"id"`
	Status   string      `json:"status"`
	Progress int         `json:"progress"`
	Attempt  int         `json:"attempt"`
	Firmware firmwareRef `json:"firmware"`
}

type checkWire struct {
	UpdateAvailable  bool      `json:"update_available"`
	Task             *taskWire `json:"task"`
	PollAfterSeconds int64     `json:"poll_after_seconds"`
}

type eventWire struct {
	EventID   string `json:"event_id"`
	Status    string `json:"status"`
	Progress  *int   `json:"progress,omitempty"`
	ErrorCode string `json:"error_code,omitempty"`
}

// ---- device calls ----

func devicePath(deviceID string) string {
	return "/api/v1/devices/" + url.PathEscape(deviceID) + "/ota"
}

// check polls as a device.
func (c *client) check(ctx context.Context, base string, d *device, model, version string) (checkWire, answer, error) {
	var out checkWire
	a, err := c.do(ctx, callCheck, base, http.MethodPost, devicePath(d.id)+"/check", d.token,
		map[string]string{"model": model, "current_version": version}, &out)
	return out, a, err
}

// event reports progress on a task as a device.
func (c *client) event(ctx context.Context, base string, d *device, taskID string, ev eventWire) (taskWire, answer, error) {
	var out taskWire
	a, err := c.do(ctx, callEvent, base, http.MethodPost, devicePath(d.id)+"/tasks/"+url.PathEscape(taskID)+"/events",
		d.token, ev, &out)
	return out, a, err
}

// ---- admin calls ----

// admin sends an admin request to the first URL and wants one of the
// statuses in want.
func (c *client) admin(ctx context.Context, method, path string, body, out any, want ...int) (answer, error) {
	a, err := c.do(ctx, callAdmin, c.urls[0], method, "/api/v1/admin"+path, c.adminToken, body, out)
	if err != nil {
		return a, err
	}
	for _, w := range want {
		if a.Status == w {
			return a, nil
		}
	}
	return a, fmt.Errorf("%s /api/v1/admin%s: %v", method, path, a)
}

// healthy checks that every URL answers /healthz, so that a typo in -urls
// fails at once rather than as a run of transport errors.
func (c *client) healthy(ctx context.Context) error {
	for _, base := range c.urls {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		req, err := http.NewRequestWithContext(rctx, http.MethodGet, base+"/healthz", nil)
		if err != nil {
			cancel()
			return err
		}
		resp, err := c.hc.Do(req)
		cancel()
		if err != nil {
			return fmt.Errorf("otad at %s does not answer: %w", base, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("otad at %s: /healthz answered %s", base, resp.Status)
		}
	}
	return nil
}

// withStats is the same client recording into st.
func (c *client) withStats(st *stats) *client {
	cp := *c
	cp.stats = st
	return &cp
}
