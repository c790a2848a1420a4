package readme

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// otaVariable is a variable name as the code spells it, in quotes.
var otaVariable = regexp.MustCompile(`"(OTA_[A-Z0-9_]+)"`)

// TestEveryVariableIsDocumented holds docs/CONFIGURATION.md to the code:
// every OTA_* variable bootstrap/ or main.go reads appears in it, so an
// operator never meets a setting the documentation does not name.
func TestEveryVariableIsDocumented(t *testing.T) {
	root := filepath.Join("..", "..")
	doc, err := os.ReadFile(filepath.Join(root, "docs", "CONFIGURATION.md"))
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(root, "bootstrap", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, filepath.Join(root, "main.go"))
	read := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range otaVariable.FindAllStringSubmatch(string(src), -1) {
			read[m[1]] = true
		}
	}
	if len(read) < 10 {
		t.Fatalf("found only %d variables in the code; is the pattern still right?", len(read))
	}
	var missing []string
	for v := range read {
		if !strings.Contains(string(doc), "`"+v+"`") {
			missing = append(missing, v)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("docs/CONFIGURATION.md does not name these variables the code reads: %s", strings.Join(missing, ", "))
	}
}
