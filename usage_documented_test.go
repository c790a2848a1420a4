package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// synopsisLine is a command's synopsis: "otad NAME [flags…]" up to the two
// spaces that start its description.
var synopsisLine = regexp.MustCompile(`(?m)^\s*(otad [a-z]+(?: [^ ].*?)?)(?:\s{2,}|$)`)

func synopses(text string) map[string]string {
	out := map[string]string{}
	for _, m := range synopsisLine.FindAllStringSubmatch(text, -1) {
		name := strings.Fields(m[1])[1]
		out[name] = strings.TrimSpace(m[1])
	}
	return out
}

// docs/CONFIGURATION.md's "Commands and flags" block and `otad help` are
// the two places an operator reads the commands from: they list the same
// commands, each with the same flags.
func TestUsageIsConfigurationsCommandBlock(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("docs", "CONFIGURATION.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(raw), "## Commands and flags\n\n```\n")
	block, _, ok2 := strings.Cut(after, "```")
	if !ok || !ok2 {
		t.Fatal("docs/CONFIGURATION.md has no command block under \"Commands and flags\"")
	}
	doc, code := synopses(block), synopses(usage)
	if len(code) < 6 {
		t.Fatalf("found only %d commands in the usage; is the pattern still right?", len(code))
	}
	for name, s := range code {
		switch d, ok := doc[name]; {
		case !ok:
			t.Errorf("otad help lists %q; docs/CONFIGURATION.md's command block does not", s)
		case d != s:
			t.Errorf("otad %s: otad help says %q, docs/CONFIGURATION.md %q", name, s, d)
		}
	}
	for name, d := range doc {
		if _, ok := code[name]; !ok {
			t.Errorf("docs/CONFIGURATION.md lists %q; otad help does not", d)
		}
	}
}
