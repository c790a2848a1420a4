package readme

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// An expectation is what a README block says a command prints: a trailing
// comment that is a value (`... | jq '.items | length'   # 12`, `# true`,
// `# {"count":5,"more":true}`), or a `# => value` line after the command.
// Prose comments (`poll   # about 2 of 20`) say nothing checkable and are
// left alone. A value is JSON (a number, true, an object…) or one bare
// word (`# revoked`).
type expectation struct {
	id   int
	line string // the comment, for the failure message
	want string
}

var (
	trailingComment = regexp.MustCompile(`^(\s*[^#\s].*?)\s+# (.+)$`)
	arrowComment    = regexp.MustCompile(`^\s*# => (.+)$`)
	bareWord        = regexp.MustCompile(`^[A-Za-z0-9._:-]+$`)
)

// value reports whether a comment's text is a value to compare.
func value(text string) bool {
	text = strings.TrimSpace(text)
	return json.Valid([]byte(text)) || bareWord.MatchString(text)
}

// Output markers the instrumented script prints around a command whose
// output a comment states.
const (
	markStart = "@@readme-expect-start "
	markEnd   = "@@readme-expect-end "
)

// instrument returns block with each command whose output a comment states
// wrapped in markers (echoed to stdout, from the command's first line —
// continuation lines included — to its last), and the expectations, ids
// counted from first.
func instrument(block string, first int) (string, []expectation) {
	lines := strings.Split(strings.TrimSuffix(block, "\n"), "\n")
	var (
		out  []string
		exps []expectation
	)
	// start is the index in out of the first line of the last command.
	start := -1
	for i, line := range lines {
		if m := arrowComment.FindStringSubmatch(line); m != nil && start >= 0 && value(m[1]) {
			id := first + len(exps)
			exps = append(exps, expectation{id: id, line: line, want: strings.TrimSpace(m[1])})
			out = wrap(out, start, id)
			out = append(out, line)
			start = -1
			continue
		}
		trimmed := strings.TrimSpace(line)
		if trimmed != "" && !strings.HasPrefix(trimmed, "#") && (i == 0 || !strings.HasSuffix(lines[i-1], "\\")) {
			start = len(out)
		}
		out = append(out, line)
		if m := trailingComment.FindStringSubmatch(line); m != nil && value(m[2]) && start >= 0 {
			id := first + len(exps)
			exps = append(exps, expectation{id: id, line: strings.TrimSpace(line), want: strings.TrimSpace(m[2])})
			out = wrap(out, start, id)
		}
	}
	return strings.Join(out, "\n") + "\n", exps
}

// wrap puts the markers of expectation id around out[start:].
func wrap(out []string, start, id int) []string {
	cmd := append([]string{fmt.Sprintf("echo '%s%d'", markStart, id)}, out[start:]...)
	cmd = append(cmd, fmt.Sprintf("echo '%s%d'", markEnd, id))
	return append(out[:start], cmd...)
}

// checkExpectations compares what the instrumented script printed between
// each expectation's markers with the value its comment states.
func checkExpectations(t *testing.T, output string, exps []expectation) {
	t.Helper()
	for _, e := range exps {
		s, end := markStart+fmt.Sprint(e.id)+"\n", markEnd+fmt.Sprint(e.id)+"\n"
		i := strings.Index(output, s)
		j := strings.Index(output, end)
		if i < 0 || j < i {
			t.Errorf("README: %q: the command's output was not found", e.line)
			continue
		}
		if got := strings.TrimSpace(output[i+len(s) : j]); got != e.want {
			t.Errorf("README: %q says %s; the command printed %q", e.line, e.want, got)
		}
	}
}

// stripMarkers removes the markers from the output shown to a reader.
func stripMarkers(output string) string {
	var b strings.Builder
	for _, l := range strings.SplitAfter(output, "\n") {
		if !strings.HasPrefix(l, markStart) && !strings.HasPrefix(l, markEnd) {
			b.WriteString(l)
		}
	}
	return b.String()
}

func TestInstrumentFindsEveryStatedOutput(t *testing.T) {
	const block = "X=$(echo 1)   # capture, prose\n" +
		"echo 12   # 12\n" +
		"printf '%s\\n' a \\\n  b | wc -l | tr -d ' '   # 2\n" +
		"poll   # about 2 of 20\n" +
		"echo '{\"a\":1}' \\\n  | cat\n# => {\"a\":1}\n" +
		"echo revoked   # revoked\n"
	script, exps := instrument(block, 0)
	wants := []string{"12", "2", `{"a":1}`, "revoked"}
	if len(exps) != len(wants) {
		t.Fatalf("%d expectations, want %d: %+v\n%s", len(exps), len(wants), exps, script)
	}
	for i, w := range wants {
		if exps[i].want != w {
			t.Errorf("expectation %d: %q, want %q", i, exps[i].want, w)
		}
	}
	// The continued command is wrapped whole: its first line follows the marker.
	if !strings.Contains(script, "echo '"+markStart+"1'\nprintf") || !strings.Contains(script, "echo '"+markStart+"2'\necho '{") {
		t.Errorf("a continued command is not wrapped from its first line:\n%s", script)
	}
	checkExpectations(t, "x\n"+markStart+"0\n12\n"+markEnd+"0\n", exps[:1])
}
