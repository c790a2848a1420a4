package architecture

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// declared is what the module's Go code declares (test files aside, so a
// helper of a test cannot keep a stale name alive), by name: enough to tell
// whether a name docs/ARCHITECTURE.md gives a reader exists.
type declared struct {
	pkgs     map[string]map[string]bool // package name → its top-level names
	anywhere map[string]bool            // every top-level, method and field name
	members  map[string]map[string]bool // type name, bare and "pkg.Type" → methods and fields
	embeds   map[string][]string        // type name, bare and "pkg.Type" → embedded type names
}

// declarations parses every non-test Go file under root.
func declarations(t *testing.T, root string) declared {
	t.Helper()
	d := declared{
		pkgs:     map[string]map[string]bool{},
		anywhere: map[string]bool{},
		members:  map[string]map[string]bool{},
		embeds:   map[string][]string{},
	}
	eachGoFile(t, root, false, parser.SkipObjectResolution, func(_ string, _ *token.FileSet, f *ast.File) { d.add(f) })
	return d
}

func (d declared) add(f *ast.File) {
	pkg := f.Name.Name
	if d.pkgs[pkg] == nil {
		d.pkgs[pkg] = map[string]bool{}
	}
	top := func(name string) {
		d.pkgs[pkg][name] = true
		d.anywhere[name] = true
	}
	member := func(typ, name string) {
		for _, k := range []string{typ, pkg + "." + typ} {
			if d.members[k] == nil {
				d.members[k] = map[string]bool{}
			}
			d.members[k][name] = true
		}
		d.anywhere[name] = true
	}
	embed := func(typ string, expr ast.Expr) {
		if name := typeName(expr); name != "" {
			d.embeds[typ] = append(d.embeds[typ], name)
			d.embeds[pkg+"."+typ] = append(d.embeds[pkg+"."+typ], name)
		}
	}
	for _, decl := range f.Decls {
		switch decl := decl.(type) {
		case *ast.FuncDecl:
			if decl.Recv == nil || len(decl.Recv.List) == 0 {
				top(decl.Name.Name)
				continue
			}
			member(typeName(decl.Recv.List[0].Type), decl.Name.Name)
		case *ast.GenDecl:
			for _, spec := range decl.Specs {
				switch spec := spec.(type) {
				case *ast.ValueSpec:
					for _, n := range spec.Names {
						top(n.Name)
					}
				case *ast.TypeSpec:
					typ := spec.Name.Name
					top(typ)
					var fields *ast.FieldList
					switch body := spec.Type.(type) {
					case *ast.StructType:
						fields = body.Fields
					case *ast.InterfaceType:
						fields = body.Methods
					}
					if fields == nil {
						continue
					}
					for _, field := range fields.List {
						if len(field.Names) == 0 {
							embed(typ, field.Type)
							member(typ, typeName(field.Type))
						}
						for _, n := range field.Names {
							member(typ, n.Name)
						}
					}
				}
			}
		}
	}
}

// typeName is the bare name of a receiver or embedded type: *T, T[K], pkg.T.
func typeName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.StarExpr:
		return typeName(e.X)
	case *ast.IndexExpr:
		return typeName(e.X)
	case *ast.IndexListExpr:
		return typeName(e.X)
	case *ast.SelectorExpr:
		return e.Sel.Name
	}
	return ""
}

// has reports whether typ (bare or "pkg.Type") has the method or field
// name, itself or through what it embeds.
func (d declared) has(typ, name string, seen map[string]bool) bool {
	if seen[typ] {
		return false
	}
	seen[typ] = true
	if d.members[typ][name] {
		return true
	}
	for _, e := range d.embeds[typ] {
		if d.has(e, name, seen) {
			return true
		}
	}
	return false
}

var (
	// codeSpan is a Markdown code span.
	codeSpan = regexp.MustCompile("`([^`\n]+)`")
	// goName is a Go identifier, or identifiers joined by dots, with an
	// optional "()" of a call.
	goName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*(\(\))?$`)
	// camel is a name mixing cases with no underscore: CamelCase or
	// camelCase, not SQL (UPDATE), an error code (NOT_FOUND) or a word (otad).
	camel = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9]*$`)
	// fileName is a file the document names (main.go, wire_gen.go).
	fileName = regexp.MustCompile(`\.(go|md|yaml|sql|sh|lua)$`)
	// placeholder is a family of names: NewX, ErrX, RehydrateX.
	placeholder = regexp.MustCompile(`^([A-Z][a-z]+)X$`)
)

func mixedCase(s string) bool {
	return camel.MatchString(s) && strings.ToLower(s) != s && strings.ToUpper(s) != s
}

// missing judges one code span; it returns why its name names nothing in
// the code, or "" when it does or does not look like Go code.
func (d declared) missing(span string) string {
	span = strings.TrimSuffix(span, "()")
	if !goName.MatchString(span) || fileName.MatchString(span) {
		return ""
	}
	parts := strings.Split(span, ".")
	if _, isPkg := d.pkgs[parts[0]]; isPkg && len(parts) > 1 {
		// pkg.Name or pkg.Type.Member.
		if !d.pkgs[parts[0]][parts[1]] {
			return "package " + parts[0] + " declares no " + parts[1]
		}
		if len(parts) == 3 && !d.has(parts[0]+"."+parts[1], parts[2], map[string]bool{}) {
			return parts[0] + "." + parts[1] + " has no method or field " + parts[2]
		}
		return ""
	}
	if !mixedCase(parts[0]) {
		return "" // a word, a column, an error code, a package outside the module
	}
	switch len(parts) {
	case 1:
		if m := placeholder.FindStringSubmatch(span); m != nil {
			for name := range d.anywhere {
				if strings.HasPrefix(name, m[1]) && len(name) > len(m[1]) {
					return ""
				}
			}
			return "no name starts with " + m[1]
		}
		if !d.anywhere[span] {
			return "nothing is declared " + span
		}
	case 2:
		if d.members[parts[0]] == nil && len(d.embeds[parts[0]]) == 0 {
			return "no type " + parts[0] + " with methods or fields"
		}
		if !d.has(parts[0], parts[1], map[string]bool{}) {
			return parts[0] + " has no method or field " + parts[1]
		}
	}
	return ""
}

// TestArchitectureNamesExistInCode checks that every name of Go code
// docs/ARCHITECTURE.md gives in backticks — `pkg.Name`, `pkg.Type.Method`,
// `Type.Method` or a bare `CamelCase` name — is declared in the module, so
// the walk through one check cannot drift from the code it describes.
func TestArchitectureNamesExistInCode(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	d := declarations(t, root)
	doc, err := os.ReadFile(filepath.Join(root, "docs", "ARCHITECTURE.md"))
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	var stale []string
	for _, m := range codeSpan.FindAllStringSubmatch(string(doc), -1) {
		if !goName.MatchString(strings.TrimSuffix(m[1], "()")) {
			continue
		}
		checked++
		if why := d.missing(m[1]); why != "" {
			stale = append(stale, "`"+m[1]+"`: "+why)
		}
	}
	sort.Strings(stale)
	for _, s := range stale {
		t.Errorf("docs/ARCHITECTURE.md names %s", s)
	}
	if checked < 30 {
		t.Fatalf("only %d code spans checked: the pattern is broken", checked)
	}
}

// TestArchitectureNamesCatches shows the check tells a stale name from a
// real one in each form it judges.
func TestArchitectureNamesCatches(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	d := declarations(t, root)
	for span, stale := range map[string]bool{
		"domain.PlanCheck":             false,
		"domain.Decide":                true,
		"ports.IDGenerator.NewID":      false,
		"ports.IDGenerator.Decide":     true,
		"Task.Settle":                  false,
		"Task.Decide":                  true,
		"Task.ID":                      false,
		"Task.IDX":                     true,
		"ActiveAndFailedCounts":        true,
		"NewX":                         false,
		"QuuxX":                        true,
		"errors.go":                    false,
		"main.go":                      false,
		"UPDATE … FROM unnest(…)":      false,
		"NOT_FOUND":                    false,
		"postgres.CatalogCache":        false,
		"postgres.CatalogCacheMissing": true,
	} {
		if got := d.missing(span) != ""; got != stale {
			t.Errorf("`%s`: stale %v, want %v (%s)", span, got, stale, d.missing(span))
		}
	}
}

// eachGoFile parses every Go file under root (test files too when tests),
// skipping hidden, testdata and vendor folders, and hands each to fn.
func eachGoFile(t *testing.T, root string, tests bool, mode parser.Mode, fn func(path string, fset *token.FileSet, f *ast.File)) {
	t.Helper()
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() {
			if name := e.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || !tests && strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, mode)
		if err != nil {
			return err
		}
		fn(path, fset, f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
