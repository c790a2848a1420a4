package readme

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadmeOrdersSectionsForANewcomer: the quick start says how to tell
// the server is up, and the operator console (what a newcomer opens next)
// comes before the device protocols' sections.
func TestReadmeOrdersSectionsForANewcomer(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	at := func(heading string) int {
		t.Helper()
		i := strings.Index(doc, "\n"+heading+"\n")
		if i < 0 {
			t.Fatalf("README.md has no %q", heading)
		}
		return i
	}
	quick, walk := at("## Quick start"), at("## Walk-through with curl")
	if !strings.Contains(doc[quick:walk], "/healthz") || !strings.Contains(doc[quick:walk], "minute") {
		t.Error("the quick start does not say how long the first build takes and how to see the server is up (/healthz)")
	}
	console := at("## Operator console")
	for _, h := range []string{"## Pointing SWUpdate / RAUC devices at this service", "## Pointing mender-client devices at this service"} {
		if at(h) < console {
			t.Errorf("%q comes before the operator console", h)
		}
	}
	dev := at("## Development")
	if !strings.Contains(doc[dev:console], "`make bench`") {
		t.Error("the development notes do not list make bench")
	}
}
