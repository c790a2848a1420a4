package httpedge

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// docs/ERRORS.md: "`code` is the stable API: clients switch on it" — its
// table lists every code an answer carries. Every Code* constant the edge
// answers with must have its row there.
func TestEveryAnsweredErrorCodeIsInErrorsMD(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "ERRORS.md"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, ent := range entries {
		if !strings.HasSuffix(ent.Name(), ".go") || strings.HasSuffix(ent.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, ent.Name(), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			vs, ok := n.(*ast.ValueSpec)
			if !ok || len(vs.Names) != 1 || len(vs.Values) != 1 || !strings.HasPrefix(vs.Names[0].Name, "Code") {
				return true
			}
			lit, ok := vs.Values[0].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			code, _ := strconv.Unquote(lit.Value)
			if !strings.Contains(string(doc), "| `"+code+"` |") {
				t.Errorf("%s = %q is answered but has no row in docs/ERRORS.md's table", vs.Names[0].Name, code)
			}
			return true
		})
	}
}
