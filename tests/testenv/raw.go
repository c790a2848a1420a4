package testenv

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// RawExchange writes raw, a whole HTTP/1.1 request as bytes on the wire, to
// addr over a TCP connection of its own (half-closed after the write when
// halfClose is set), and returns the answer's status and body. It sends
// what net/http's client will not: chunked bodies cut short or malformed,
// a client that stops sending. The exchange is bounded by 10 seconds.
func RawExchange(t testing.TB, addr, raw string, halfClose bool) (int, []byte) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write([]byte(raw)); err != nil {
		t.Fatal(err)
	}
	if halfClose {
		if err := conn.(*net.TCPConn).CloseWrite(); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the body of a %d: %v", resp.StatusCode, err)
	}
	return resp.StatusCode, body
}
