package packaging

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// ignored reports whether .dockerignore's patterns exclude rel (a
// slash-separated path in the repository), or a folder above it. It reads
// the subset of the syntax the file uses: comments, globs, a leading "/" and
// a leading "**/"; "!" exceptions are refused.
func ignored(patterns []string, rel string) bool {
	parts := strings.Split(rel, "/")
	for _, p := range patterns {
		anyDepth := strings.HasPrefix(p, "**/")
		p = strings.TrimPrefix(strings.TrimPrefix(p, "**/"), "/")
		for i := 1; i <= len(parts); i++ {
			prefix := strings.Join(parts[:i], "/")
			if ok, _ := filepath.Match(p, prefix); ok {
				return true
			}
			if ok, _ := filepath.Match(p, parts[i-1]); ok && anyDepth {
				return true
			}
		}
	}
	return false
}

func dockerignorePatterns(t *testing.T) []string {
	t.Helper()
	var patterns []string
	for line := range strings.Lines(readRepoFile(t, ".dockerignore")) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasPrefix(line, "!") {
			t.Fatalf(".dockerignore: exceptions (%s) are not understood by this check", line)
		}
		patterns = append(patterns, line)
	}
	return patterns
}

// The build context keeps everything `go build .` needs — every package the
// binary is made of, with the files they embed — and leaves out the git
// history and the tests.
func TestDockerignore(t *testing.T) {
	patterns := dockerignorePatterns(t)
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if .Module}}{{if .Module.Main}}{{.Dir}}{{end}}{{end}}", "../..").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	root, _ := filepath.Abs(filepath.Join("..", ".."))
	need := []string{"go.mod", "go.sum", "main.go", "wire_gen.go", "migrations/00001_init.sql", "adapters/rest/openapi.yaml"}
	for dir := range strings.Lines(string(out)) {
		rel, err := filepath.Rel(root, strings.TrimSpace(dir))
		if err != nil || rel == "." {
			continue
		}
		need = append(need, filepath.ToSlash(rel)+"/x.go")
	}
	if len(need) < 12 {
		t.Fatalf("go list found only %d needed paths", len(need))
	}
	for _, p := range need {
		if ignored(patterns, p) {
			t.Errorf(".dockerignore excludes %s, which the build needs", p)
		}
	}
	for _, p := range []string{".git/config", "otad", "tests/e2e/e2e_test.go", "domain/testdata/fuzz/x"} {
		if !ignored(patterns, p) {
			t.Errorf(".dockerignore lets %s into the build context", p)
		}
	}
}

func TestIgnored(t *testing.T) {
	pats := []string{".git", "/otad", "**/testdata", "*.test", "docs"}
	for path, want := range map[string]bool{
		".git/HEAD": true, "otad": true, "domain/testdata/x": true, "a.test": true, "docs/x.md": true,
		"domain/x.go": false, "adapters/rest/openapi.yaml": false, "otadx": false,
	} {
		if ignored(pats, path) != want {
			t.Errorf("ignored(%q) = %v", path, !want)
		}
	}
}
