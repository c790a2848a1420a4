package rest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ai-device/ota/tests/testenv"

	"github.com/ai-device/ota/adapters/httpedge"
)

// TestUnreadableBodyIsTheCallersFault sends request bodies that cannot be
// read, over a raw TCP connection (an http.Client would refuse to frame
// them): a body is bytes the caller sent, so each must answer 400
// MALFORMED_JSON and be logged as a client error, never as a 500.
func TestUnreadableBodyIsTheCallersFault(t *testing.T) {
	h := newHarness(t)
	srv := httptest.NewServer(h.e)
	t.Cleanup(srv.Close)

	routes := []struct {
		name, path, token string
	}{
		{"check", "/api/v1/devices/dev-1/ota/check", tokenDev1},
		{"register device", "/api/v1/admin/devices", testAdminToken},
	}
	bodies := []struct {
		name    string
		framing string // the Transfer-Encoding or Content-Length header line
		body    string
		// halfClose ends the request by closing the client's write side:
		// the body is cut short, as when a device loses its link mid-send.
		halfClose bool
	}{
		{"chunk length not hexadecimal", "Transfer-Encoding: chunked", "zz\r\n{}\r\n0\r\n\r\n", false},
		{"chunk length overflows", "Transfer-Encoding: chunked", "fffffffffffffffffff\r\n{}\r\n0\r\n\r\n", false},
		{"chunk longer than declared", "Transfer-Encoding: chunked", "2\r\n{\"a\":1}\r\n0\r\n\r\n", false},
		{"chunk shorter than declared", "Transfer-Encoding: chunked", "40\r\n{\"model\":\"cam-x1\"}", true},
		{"no terminating chunk", "Transfer-Encoding: chunked", "2\r\n{}\r\n", true},
		{"shorter than Content-Length", "Content-Length: 64", `{"model":"cam-x1"}`, true},
	}
	for _, rt := range routes {
		for _, b := range bodies {
			t.Run(rt.name+"/"+b.name, func(t *testing.T) {
				id := "unreadable-" + strings.NewReplacer(" ", "-", "/", "-").Replace(rt.name+"-"+b.name)
				raw := "POST " + rt.path + " HTTP/1.1\r\n" +
					"Host: ota.test\r\n" +
					"Authorization: Bearer " + rt.token + "\r\n" +
					"Content-Type: application/json\r\n" +
					httpedge.HeaderRequestID + ": " + id + "\r\n" +
					b.framing + "\r\n" +
					"Connection: close\r\n\r\n" + b.body
				status, detail := rawRequest(t, srv.Listener.Addr().String(), raw, b.halfClose)
				if status != http.StatusBadRequest || detail.Code != httpedge.CodeMalformedJSON {
					t.Fatalf("answer = %d %+v, want 400 %s", status, detail, httpedge.CodeMalformedJSON)
				}
				if detail.Message != "request body could not be read" || detail.RequestID != id {
					t.Errorf("detail = %+v", detail)
				}
				line := logLine(t, h.logs.String(), id)
				if line["level"] != "INFO" || line["status"] != float64(400) || line["error_code"] != httpedge.CodeMalformedJSON {
					t.Errorf("access log = %v, want an INFO line with 400 %s", line, httpedge.CodeMalformedJSON)
				}
				if strings.Contains(h.logs.String(), `"msg":"internal error"`) {
					t.Errorf("an unreadable body was logged as an internal error:\n%s", h.logs)
				}
			})
		}
	}
	if n := len(h.fake.called()); n != 0 {
		t.Errorf("the service was called %d times with a body that could not be read: %v", n, h.fake.called())
	}
}

// rawRequest sends raw to addr and decodes the answer's error body.
func rawRequest(t *testing.T, addr, raw string, halfClose bool) (int, httpedge.ErrorDetail) {
	t.Helper()
	status, body := testenv.RawExchange(t, addr, raw, halfClose)
	var eb httpedge.ErrorBody
	if err := json.Unmarshal(body, &eb); err != nil {
		t.Fatalf("decoding the error body of a %d: %v\n%s", status, err, body)
	}
	return status, eb.Error
}

// logLine returns the access log line ("http request") of one request id.
func logLine(t *testing.T, logs, requestID string) map[string]any {
	t.Helper()
	for _, l := range strings.Split(logs, "\n") {
		if !strings.Contains(l, `"request_id":"`+requestID+`"`) || !strings.Contains(l, `"msg":"http request"`) {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		return m
	}
	t.Fatalf("no access log line for %s in:\n%s", requestID, logs)
	return nil
}
