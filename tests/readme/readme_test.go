package readme

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ai-device/ota/tests/testenv"
)

// Marker is the HTML comment (invisible when the README is rendered) that
// marks the next fenced ```sh block as runnable as pasted.
const Marker = "<!-- readme-test: run -->"

// scriptTimeout bounds the whole walk-through; it takes about a second.
const scriptTimeout = 2 * time.Minute

func TestMain(m *testing.M) { os.Exit(testenv.RunWithOtad(m)) }

// runnableBlocks returns the body of every ```sh block that follows a
// Marker line, in order. A marker not followed by such a block, or a block
// left open, is an error: a broken marker must not silently run nothing.
func runnableBlocks(readme string) ([]string, error) {
	var (
		blocks  []string
		cur     strings.Builder
		marked  bool // the previous line was the marker
		inBlock bool
		lineNo  int
		startNo int
	)
	sc := bufio.NewScanner(strings.NewReader(readme))
	for sc.Scan() {
		lineNo++
		line := sc.Text()
		switch {
		case inBlock && strings.TrimSpace(line) == "```":
			blocks = append(blocks, cur.String())
			cur.Reset()
			inBlock = false
		case inBlock:
			cur.WriteString(line)
			cur.WriteByte('\n')
		case marked:
			if strings.TrimSpace(line) != "```sh" && strings.TrimSpace(line) != "```bash" {
				return nil, fmt.Errorf("line %d: %s is not followed by a ```sh block", lineNo-1, Marker)
			}
			marked, inBlock, startNo = false, true, lineNo
		case strings.TrimSpace(line) == Marker:
			marked = true
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	switch {
	case inBlock:
		return nil, fmt.Errorf("line %d: the runnable block is never closed", startNo)
	case marked:
		return nil, errors.New("the README ends with a marker and no block")
	}
	return blocks, nil
}

func TestRunnableBlocksParsing(t *testing.T) {
	const doc = "intro\n```sh\nnot marked\n```\n" + Marker + "\n```sh\necho one\necho two\n```\ntext\n" + Marker + "\n```bash\necho three\n```\n"
	got, err := runnableBlocks(doc)
	if err != nil || len(got) != 2 || got[0] != "echo one\necho two\n" || got[1] != "echo three\n" {
		t.Fatalf("got %q, %v", got, err)
	}
	for name, bad := range map[string]string{
		"marker before prose":  Marker + "\nsome prose\n```sh\necho x\n```\n",
		"block never closed":   Marker + "\n```sh\necho x\n",
		"marker at the end":    "text\n" + Marker + "\n",
		"marker before a json": Marker + "\n```json\n{}\n```\n",
	} {
		if _, err := runnableBlocks(bad); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestReadmeRunsAsPasted runs every marked block of README.md, in order, in
// one `bash` with errexit, nounset and pipefail: any command that fails (an
// HTTP error answer included: the blocks' call helper fails on one), any
// value left unset, fails the test. otad is the real binary with
// OTA_STORE=memory on a free port; the README's API and OTA_ADMIN_TOKEN
// defaults are overridden through the environment, as a reader could.
// Then the console of that same otad is read in a browser: its pages must
// agree with the API on the state the blocks left.
func TestReadmeRunsAsPasted(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			msg := fmt.Sprintf("the README's blocks need %s, which is not installed (apt-get install -y %s)", tool, tool)
			testenv.Skip(t, tool, msg)
		}
	}
	raw, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := runnableBlocks(string(raw))
	if err != nil {
		t.Fatalf("README.md: %v", err)
	}
	// The walk-through and the rollout operations, at least.
	if len(blocks) < 2 {
		t.Fatalf("README.md has %d runnable blocks, want the walk-through and the rollout operations", len(blocks))
	}

	const token = "readme-test-admin-token-0123456789"
	o := testenv.StartOtad(t, testenv.OtadConfig{
		Name:        "readme",
		DatabaseURL: "postgres://unused@127.0.0.1:1/unused?sslmode=disable", // OTA_STORE=memory: never dialled
		RedisURL:    "redis://127.0.0.1:1/0",
		AdminToken:  token,
		Env:         map[string]string{"OTA_STORE": "memory"},
	})

	// Every output a comment states (`# 12`, `# => {…}`) is compared with
	// what its command printed: a comment that disagrees fails the test.
	var exps []expectation
	for i, b := range blocks {
		var e []expectation
		blocks[i], e = instrument(b, len(exps))
		exps = append(exps, e...)
	}
	script := "set -euo pipefail\n" + strings.Join(blocks, "\n") + "\n" + stateLine + "\n"
	ctx, cancel := context.WithTimeout(context.Background(), scriptTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "API="+o.URL+"/api/v1", "OTA_ADMIN_TOKEN="+token)
	raw, err = cmd.CombinedOutput()
	out := []byte(stripMarkers(string(raw)))
	if err != nil {
		t.Fatalf("the README's blocks failed (%v); their output:\n%s", err, out)
	}
	checkExpectations(t, string(raw), exps)
	// The last block ends with the revoke and the statistics after it: the
	// script ran to its end.
	if !strings.Contains(string(out), "revoked\n") || !strings.Contains(string(out), `"cancelled":`) {
		t.Fatalf("the README's blocks stopped short; their output:\n%s", out)
	}
	t.Logf("the README's blocks printed:\n%s", out)

	// The same otad, as the blocks left it, read in a browser.
	model, device, ok := readmeState(string(raw))
	if !ok {
		t.Fatalf("the README's blocks did not print their ids (%s); their output:\n%s", stateMark, out)
	}
	t.Run("ConsolePagesAgreeWithTheAPIInABrowser", func(t *testing.T) {
		consolePagesAgreeWithTheAPI(t, o.URL, token, model, device)
	})
}

// TestReadmeWithAWrongTokenStopsWithOneClearError pastes the blocks as an
// operator would into an interactive shell (no errexit) with a wrong admin
// token: the first answer, 401, is said once with the server's code and a
// hint about the token, and nothing after it prints curl errors, nulls or
// falses.
func TestReadmeWithAWrongTokenStopsWithOneClearError(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.Skip(t, tool, fmt.Sprintf("the README's blocks need %s, which is not installed (apt-get install -y %s)", tool, tool))
		}
	}
	raw, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := runnableBlocks(string(raw))
	if err != nil {
		t.Fatalf("README.md: %v", err)
	}
	o := testenv.StartOtad(t, testenv.OtadConfig{
		Name:        "readme-wrong-token",
		DatabaseURL: "postgres://unused@127.0.0.1:1/unused?sslmode=disable", // OTA_STORE=memory: never dialled
		RedisURL:    "redis://127.0.0.1:1/0",
		AdminToken:  "readme-test-admin-token-0123456789",
		Env:         map[string]string{"OTA_STORE": "memory"},
	})
	ctx, cancel := context.WithTimeout(context.Background(), scriptTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", strings.Join(blocks, "\n"))
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "API="+o.URL+"/api/v1", "OTA_ADMIN_TOKEN=not-the-admin-token-at-all")
	out, _ := cmd.CombinedOutput()
	var stopped []string
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "stopped:") {
			stopped = append(stopped, line)
		}
	}
	if len(stopped) != 1 || !strings.Contains(stopped[0], "HTTP 401 UNAUTHORIZED") || !strings.Contains(stopped[0], "OTA_ADMIN_TOKEN") {
		t.Fatalf("want one line saying the admin token was refused; the blocks printed:\n%s", out)
	}
	for _, noise := range []string{"null", "false", "curl:", "parse error"} {
		if strings.Contains(string(out), noise) {
			t.Errorf("after the first error the blocks printed %q:\n%s", noise, out)
		}
	}
}
