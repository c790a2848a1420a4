package readme

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// mdLink matches the target of a Markdown link: [text](target).
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestDocsLinkInsideTheRepository checks every relative link of README.md
// and docs/*.md: it must name a file of the repository (a clone has nothing
// beside it, so "../shared/…" would be dead), and a #fragment must name a
// heading of the target.
func TestDocsLinkInsideTheRepository(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	docs, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	files := append([]string{filepath.Join(root, "README.md")}, docs...)
	checked := 0
	for _, f := range files {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mdLink.FindAllStringSubmatch(prose(string(text)), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, frag, _ := strings.Cut(target, "#")
			dest := f
			if path != "" {
				dest = filepath.Join(filepath.Dir(f), path)
			}
			rel, err := filepath.Rel(root, dest)
			if err != nil || strings.HasPrefix(rel, "..") {
				t.Errorf("%s links %s, outside the repository", filepath.Base(f), target)
				continue
			}
			body, err := os.ReadFile(dest)
			if err != nil {
				t.Errorf("%s links %s: %v", filepath.Base(f), target, err)
				continue
			}
			if frag != "" && !hasAnchor(string(body), frag) {
				t.Errorf("%s links %s: no heading with anchor #%s", filepath.Base(f), target, frag)
			}
			checked++
		}
	}
	if checked < 10 {
		t.Fatalf("only %d links checked: the link pattern is broken", checked)
	}
}

// inlineCode matches a code span.
var inlineCode = regexp.MustCompile("`[^`\n]*`")

// prose is a Markdown text without its fenced code blocks and code spans,
// where "](x)" is code (a Go generic call, say), not a link.
func prose(text string) string {
	var b strings.Builder
	fenced := false
	for line := range strings.Lines(text) {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			b.WriteString(inlineCode.ReplaceAllString(line, ""))
		}
	}
	return b.String()
}

// hasAnchor reports whether a Markdown text has a heading whose
// GitHub-style anchor is frag.
func hasAnchor(text, frag string) bool {
	for line := range strings.Lines(text) {
		h, ok := strings.CutPrefix(strings.TrimSpace(line), "#")
		if !ok {
			continue
		}
		h = strings.TrimSpace(strings.TrimLeft(h, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(h) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
				b.WriteRune(r)
			}
		}
		if b.String() == frag {
			return true
		}
	}
	return false
}

func TestProseDropsCode(t *testing.T) {
	const doc = "see [a](a.md) and `f[T](x)`\n```go\nerrors.AsType[*E](err)\n```\n[b](b.md)\n"
	var got []string
	for _, m := range mdLink.FindAllStringSubmatch(prose(doc), -1) {
		got = append(got, m[1])
	}
	if strings.Join(got, " ") != "a.md b.md" {
		t.Fatalf("links found: %q", got)
	}
}

func TestHasAnchor(t *testing.T) {
	const doc = "# Top\n## Check rules\n### Departures and additions\ncode # not a heading\n"
	for frag, want := range map[string]bool{"check-rules": true, "departures-and-additions": true, "top": true, "event-rules": false, "not-a-heading": false} {
		if hasAnchor(doc, frag) != want {
			t.Errorf("hasAnchor(%q) = %v", frag, !want)
		}
	}
}
