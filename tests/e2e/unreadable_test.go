package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ai-device/ota/tests/testenv"
)

// unreadableBodies are request bodies that cannot be read: framings an
// http.Client refuses to send, so they go over a raw TCP connection. Each
// must answer 400 MALFORMED_JSON, logged as a client error (docs/ERRORS.md: a
// body is what the caller sent), never 500.
var unreadableBodies = []struct {
	name, framing, body string
	halfClose           bool // end the request by closing the write side
}{
	{"bad chunk length", "Transfer-Encoding: chunked", "zz\r\n{}\r\n0\r\n\r\n", false},
	{"chunk longer than declared", "Transfer-Encoding: chunked", "2\r\n{\"a\":1}\r\n0\r\n\r\n", false},
	{"chunk shorter than declared", "Transfer-Encoding: chunked", "40\r\n{\"model\":\"m\"}", true},
	{"body shorter than Content-Length", "Content-Length: 64", `{"model":"m"}`, true},
}

// checkUnreadableBodies sends each unreadable body to a device check and to
// an admin call of the running binary, and reads otad's log and metrics.
func checkUnreadableBodies(t *testing.T, c *client, admin, dev, token string) {
	const count = "ota_http_request_duration_seconds_count"
	internalBefore, badBefore := c.metricSum(t, count, `code="500"`), c.metricSum(t, count, `code="400"`)
	targets := []struct{ path, token string }{
		{"/api/v1/devices/" + dev + "/ota/check", token},
		{"/api/v1/admin/devices", admin},
	}
	for _, tg := range targets {
		for _, b := range unreadableBodies {
			id := "e2e-unreadable-" + randomHex(6)
			raw := "POST " + tg.path + " HTTP/1.1\r\nHost: ota.test\r\nAuthorization: Bearer " + tg.token +
				"\r\nContent-Type: application/json\r\nX-Request-ID: " + id + "\r\n" + b.framing +
				"\r\nConnection: close\r\n\r\n" + b.body
			status, code := rawExchange(t, c.inst.Addr, raw, b.halfClose)
			if status != http.StatusBadRequest || code != "MALFORMED_JSON" {
				t.Errorf("%s %s: answer %d %s, want 400 MALFORMED_JSON", tg.path, b.name, status, code)
			}
			line := accessLine(c.inst, id)
			if !strings.Contains(line, `"level":"INFO"`) || !strings.Contains(line, `"status":400`) ||
				!strings.Contains(line, `"error_code":"MALFORMED_JSON"`) {
				t.Errorf("%s %s: otad logged %q, want an INFO access line with 400 MALFORMED_JSON", tg.path, b.name, line)
			}
		}
	}
	if got := c.metricSum(t, count, `code="500"`); got != internalBefore {
		t.Errorf("otad counted %v requests as 500 while reading unreadable bodies", got-internalBefore)
	}
	if got, want := c.metricSum(t, count, `code="400"`)-badBefore, float64(len(targets)*len(unreadableBodies)); got != want {
		t.Errorf("otad counted %v requests as 400, want %v", got, want)
	}
	if strings.Contains(c.inst.Log(), "request body") && strings.Contains(c.inst.Log(), `"msg":"internal error"`) {
		t.Errorf("an unreadable body was logged as an internal error")
	}
}

// accessLine waits for otad's access log line of one request id: the line
// is written after the answer, and reaches the test through a pipe.
func accessLine(inst *instance, requestID string) string {
	for end := time.Now().Add(3 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		for _, l := range strings.Split(inst.Log(), "\n") {
			if strings.Contains(l, `"request_id":"`+requestID+`"`) && strings.Contains(l, `"msg":"http request"`) {
				return l
			}
		}
		if time.Now().After(end) {
			return ""
		}
	}
}

// rawExchange sends raw to addr and returns the answer's status and error code.
func rawExchange(t *testing.T, addr, raw string, halfClose bool) (int, string) {
	t.Helper()
	status, raw2 := testenv.RawExchange(t, addr, raw, halfClose)
	var body struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal(raw2, &body)
	return status, body.Error.Code
}
