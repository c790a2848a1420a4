package readme

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ai-device/ota/domain"
)

// The markers of the README's webhook verification snippets ("Receiving
// webhooks"): the shell one and the Go one, each run here as pasted.
const (
	webhookShMarker = "<!-- readme-test: webhook-sh -->"
	webhookGoMarker = "<!-- readme-test: webhook-go -->"
)

// markedBlock is the body of the fenced block after marker.
func markedBlock(t *testing.T, marker string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(strings.NewReader(string(raw)))
	var b strings.Builder
	state := 0 // 0: before the marker, 1: after it, 2: in its block
	for sc.Scan() {
		line := sc.Text()
		switch {
		case state == 0 && strings.TrimSpace(line) == marker:
			state = 1
		case state == 1 && strings.HasPrefix(strings.TrimSpace(line), "```"):
			state = 2
		case state == 2 && strings.TrimSpace(line) == "```":
			return b.String()
		case state == 2:
			b.WriteString(line + "\n")
		}
	}
	t.Fatalf("README.md has no block after %s", marker)
	return ""
}

// webhookCase is a delivery and whether the README's snippets must take it.
type webhookCase struct {
	Name   string `json:"name"`
	Header string `json:"header"`
	Body   string `json:"body"`
	Secret string `json:"secret"`
	OK     bool   `json:"ok"`
}

func webhookCases() []webhookCase {
	const secret, old = "whsec_the-current-secret-0123456789", "whsec_the-previous-secret-0123456789"
	body := `{"id":"5d2b7c1a-3e4f-4a5b-8c6d-7e8f9a0b1c2d","type":"task.failed","time":"2026-12-04T10:00:00Z","version":1,` +
		`"data":{"task_id":"x","device_id":"cam-1","firmware_id":"y","rollout_id":"z","attempt":1,"error_code":"E_FLASH"}}`
	now := time.Now()
	// Signed by the service's own rule, so the README's snippets are held
	// to what deliveries carry.
	sig := func(at time.Time, secrets ...string) string {
		return domain.WebhookSignature(secrets, at, []byte(body))
	}
	return []webhookCase{
		{"signed now", sig(now, secret), body, secret, true},
		{"during a rotation, by the previous secret", sig(now, secret, old), body, old, true},
		{"during a rotation, by the new secret", sig(now, secret, old), body, secret, true},
		{"a minute old", sig(now.Add(-time.Minute), secret), body, secret, true},
		{"another secret", sig(now, old), body, secret, false},
		{"a changed body", sig(now, secret), strings.Replace(body, "E_FLASH", "E_OK", 1), secret, false},
		{"replayed six minutes later", sig(now.Add(-6*time.Minute), secret), body, secret, false},
		{"from the future", sig(now.Add(6*time.Minute), secret), body, secret, false},
		{"t changed", strings.Replace(sig(now, secret), "t="+strconv.FormatInt(now.Unix(), 10), "t="+strconv.FormatInt(now.Unix()-1, 10), 1), body, secret, false},
		{"no signature", "t=" + strconv.FormatInt(now.Unix(), 10), body, secret, false},
	}
}

// The README's shell check, run with bash and openssl as pasted, takes
// good deliveries and refuses bad ones.
func TestReadmeWebhookShellCheck(t *testing.T) {
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("openssl is not installed")
	}
	script := markedBlock(t, webhookShMarker)
	for _, c := range webhookCases() {
		t.Run(c.Name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "body.json"), []byte(c.Body), 0o600); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("bash", "-c", script)
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "SIG="+c.Header, "SECRET="+c.Secret)
			out, err := cmd.CombinedOutput()
			verified := err == nil && strings.TrimSpace(string(out)) == "verified"
			if verified != c.OK {
				t.Errorf("verified = %v, want %v: %s", verified, c.OK, out)
			}
		})
	}
}

// The README's Go function, compiled as pasted, takes good deliveries and
// refuses bad ones.
func TestReadmeWebhookGoCheck(t *testing.T) {
	src := markedBlock(t, webhookGoMarker)
	if !strings.HasPrefix(src, "package webhook\n") {
		t.Fatalf("the Go snippet does not start with its package clause:\n%s", src)
	}
	dir := t.TempDir()
	files := map[string]string{
		"go.mod":    "module readmecheck\n\ngo 1.22\n",
		"verify.go": "package main\n" + strings.TrimPrefix(src, "package webhook\n"),
		"main.go": `package main

import (
	"encoding/json"
	"fmt"
	"os"
	"time"
)

func main() {
	var cases []struct{ Name, Header, Body, Secret string }
	if err := json.NewDecoder(os.Stdin).Decode(&cases); err != nil {
		panic(err)
	}
	for _, c := range cases {
		err := Verify(c.Header, []byte(c.Body), c.Secret, time.Now())
		fmt.Printf("%s\t%v\n", c.Name, err == nil)
	}
}
`,
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cases := webhookCases()
	in, err := json.Marshal(cases)
	if err != nil {
		t.Fatal(err)
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on PATH")
	}
	cmd := exec.Command(goBin, "run", ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=", "GOTOOLCHAIN=local")
	cmd.Stdin = strings.NewReader(string(in))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go run: %v\n%s", err, out)
	}
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		name, ok, _ := strings.Cut(line, "\t")
		got[name] = ok
	}
	for _, c := range cases {
		if got[c.Name] != strconv.FormatBool(c.OK) {
			t.Errorf("%s: Verify took it: %s, want %v", c.Name, got[c.Name], c.OK)
		}
	}
}
