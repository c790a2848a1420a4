// Package architecture checks the import rules of docs/ARCHITECTURE.md on
// the real package graph, so that a dependency pointing outward is a test
// failure rather than a review comment.
package architecture

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/ai-device/ota"

// allowedInternal says which of the module's packages a package may import
// (test files aside), by the folder it lives in. The first matching prefix
// wins. "." is the composition root.
var allowedInternal = []struct {
	prefix  string
	allowed []string
}{
	{"domain", nil},
	{"ports", []string{"domain"}},
	// A device protocol's use cases (application/ddi, application/mender)
	// call the core use cases; the core never imports them (below).
	{"application/", []string{"domain", "ports", "application"}},
	{"application", []string{"domain", "ports"}},
	{"adapters", []string{"domain", "ports"}}, // plus its own subtree, below
	{"migrations", nil},
	{"bootstrap", []string{"domain", "ports", "application", "adapters", "migrations"}},
	{"tests", []string{"domain", "ports", "application", "adapters", "migrations", "bootstrap", "tests"}},
	{".", []string{"domain", "ports", "application", "adapters", "bootstrap", "migrations"}},
}

// sharedEdge is the one package every HTTP adapter may import: the plumbing
// they share (request ids, access log, the one error mapping). It is not
// an adapter of its own, and imports no adapter.
const sharedEdge = "adapters/httpedge"

func within(pkg, folder string) bool {
	if sub, ok := strings.CutSuffix(folder, "/"); ok {
		return strings.HasPrefix(pkg, sub+"/") // the subpackages only
	}
	return folder == "." && pkg == "." || pkg == folder || strings.HasPrefix(pkg, folder+"/")
}

// thirdParty reports whether an import path is outside the standard library.
func thirdParty(p string) bool {
	first, _, _ := strings.Cut(p, "/")
	return strings.Contains(first, ".")
}

// firstTwo is a package path's first two elements ("application/ddi").
func firstTwo(pkg string) string {
	parts := strings.SplitN(pkg, "/", 3)
	return strings.Join(parts[:min(2, len(parts))], "/")
}

// violations lists the imports of one package that its folder forbids.
func violations(pkg string, imports []string) []string {
	var bad []string
	rule := -1
	for i, r := range allowedInternal {
		if within(pkg, r.prefix) {
			rule = i
			break
		}
	}
	if rule < 0 {
		return []string{pkg + " is in no folder of docs/ARCHITECTURE.md"}
	}
	for _, imp := range imports {
		rel, internal := strings.CutPrefix(imp, module+"/")
		if !internal {
			// The domain is pure: the standard library, semver and
			// argon2 (password hashing, a computation) only.
			if within(pkg, "domain") && thirdParty(imp) && imp != "golang.org/x/mod/semver" && imp != "golang.org/x/crypto/argon2" {
				bad = append(bad, pkg+" imports "+imp)
			}
			continue
		}
		ok := false
		for _, a := range allowedInternal[rule].allowed {
			if within(rel, a) {
				ok = true
			}
		}
		// A protocol's use cases may call the core use cases, never another
		// protocol's.
		if within(pkg, "application/") && within(rel, "application") {
			ok = rel == "application" || within(rel, firstTwo(pkg))
		}
		// An adapter may use its own subpackages and the shared HTTP
		// plumbing, never another adapter; a protocol's adapter may use its
		// protocol's use cases and words (adapters/ddi: application/ddi),
		// never the core use cases.
		if within(pkg, "adapters") {
			parts := strings.SplitN(pkg, "/", 3)
			if within(rel, "adapters") {
				ok = within(rel, strings.Join(parts[:2], "/")) || within(rel, sharedEdge)
			}
			if within(rel, "application") {
				ok = len(parts) > 1 && within(rel, "application/"+parts[1])
			}
		}
		if !ok {
			bad = append(bad, pkg+" imports "+rel)
		}
	}
	return bad
}

func TestViolationsCatches(t *testing.T) {
	for _, tc := range []struct {
		pkg     string
		imports []string
		bad     bool
	}{
		{"domain", []string{"time", "golang.org/x/mod/semver"}, false},
		{"domain", []string{module + "/ports"}, true},
		{"domain", []string{"github.com/lib/pq"}, true},
		{"ports", []string{module + "/application"}, true},
		{"application", []string{module + "/adapters/postgres"}, true},
		{"application", []string{module + "/application/ddi"}, true},
		{"application/ddi", []string{module + "/application", module + "/ports", module + "/domain"}, false},
		{"application/ddi", []string{module + "/application/mender"}, true},
		{"application/mender", []string{module + "/adapters/postgres"}, true},
		{"adapters/ddi", []string{module + "/application/ddi"}, false},
		{"adapters/ddi", []string{module + "/application/mender"}, true},
		{"adapters/mender", []string{module + "/application/mender"}, false},
		{"adapters/mender", []string{module + "/application"}, true},
		{"adapters/postgres", []string{module + "/application/ddi"}, true},
		{"adapters/rest", []string{module + "/application"}, true},
		{"adapters/rest", []string{module + "/adapters/postgres"}, true},
		{"adapters/rest", []string{module + "/adapters/httpedge"}, false},
		{"adapters/console/views", []string{module + "/adapters/console"}, false},
		{"adapters/console", []string{module + "/adapters/httpedge"}, false},
		{"adapters/ddi", []string{module + "/adapters/httpedge"}, false},
		{"adapters/mender", []string{module + "/adapters/httpedge"}, false},
		{"adapters/console", []string{module + "/adapters/rest"}, true},
		{"adapters/ddi", []string{module + "/adapters/rest"}, true},
		{"adapters/mender", []string{module + "/adapters/rest"}, true},
		{"adapters/httpedge", []string{module + "/adapters/rest"}, true},
		{"adapters/httpedge", []string{module + "/application"}, true},
		{"adapters/postgres", []string{module + "/adapters/rest"}, true},
		{"adapters/console", []string{module + "/adapters/postgres"}, true},
		{"adapters/postgres", []string{module + "/domain", module + "/ports", "github.com/lib/pq"}, false},
		{"bootstrap", []string{module + "/tests/testenv"}, true},
		{".", []string{module + "/bootstrap", module + "/adapters/postgres"}, false},
		{"elsewhere", nil, true},
	} {
		if got := len(violations(tc.pkg, tc.imports)) > 0; got != tc.bad {
			t.Errorf("%s importing %v: violation %v, want %v", tc.pkg, tc.imports, got, tc.bad)
		}
	}
}

// TestImportRules lists every package of the module (without test files)
// and checks its imports against the rules.
func TestImportRules(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	n := 0
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		pkg := strings.TrimPrefix(strings.TrimPrefix(f[0], module), "/")
		if pkg == "" {
			pkg = "."
		}
		n++
		for _, v := range violations(pkg, f[1:]) {
			t.Error(v)
		}
	}
	if n < 10 {
		t.Fatalf("go list found %d packages; the module has more", n)
	}
}
