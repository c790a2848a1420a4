package rest

import (
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/ai-device/ota/domain"
)

// domainRoleRow is a row of docs/DOMAIN.md's roles table.
var domainRoleRow = regexp.MustCompile("^\\| `([a-z_]+)` \\| (.*) \\|$")

// permissionName is a permission as the table writes it, in backticks.
var permissionName = regexp.MustCompile("`([a-z_]+(?::[a-z]+)?)`")

// TestDomainRoleTableIsTheCodes holds docs/DOMAIN.md's roles table (and
// what it says "read" covers) to domain.RolePermissions and the route
// table: an operator grants roles, and mints scoped tokens, from it.
func TestDomainRoleTableIsTheCodes(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "docs", "DOMAIN.md"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(raw), "\n")
	start := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "**Roles**") })
	if start < 0 {
		t.Fatal("docs/DOMAIN.md has no **Roles** table")
	}
	var above []string // every permission of the rows read so far
	rows := 0
	for i := start; i < len(lines) && i < start+20; i++ {
		m := domainRoleRow.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		rows++
		role, err := domain.ParseRole(m[1])
		if err != nil {
			t.Errorf("docs/DOMAIN.md:%d: %q is not a role", i+1, m[1])
			continue
		}
		var doc []string
		if strings.HasPrefix(m[2], "all of the above") {
			doc = append(doc, above...)
		}
		for _, p := range permissionName.FindAllStringSubmatch(m[2], -1) {
			doc = append(doc, p[1])
		}
		var code []string
		for _, p := range domain.RolePermissions(role).List() {
			code = append(code, string(p))
		}
		sort.Strings(doc)
		doc = slices.Compact(doc)
		sort.Strings(code)
		if !slices.Equal(doc, code) {
			t.Errorf("docs/DOMAIN.md:%d: role %s has %v, domain.RolePermissions gives %v", i+1, m[1], doc, code)
		}
		above = append(above, doc...)
	}
	if rows != 5 {
		t.Fatalf("found %d rows of roles in docs/DOMAIN.md, want 5", rows)
	}
	// "Every role reads everything (`read`: every `GET` of `/api/v1/admin`
	// except the accounts listing, the audit log and the webhook
	// subscriptions)".
	except := func(route string) bool {
		return route == "GET /api/v1/admin/users" || route == "GET /api/v1/admin/audit" || strings.HasPrefix(route, "GET /api/v1/admin/webhooks")
	}
	if !strings.Contains(string(raw), "every `GET` of `/api/v1/admin` except\nthe accounts listing, the audit log and the webhook subscriptions") {
		t.Fatal("docs/DOMAIN.md no longer says what read covers: update this test")
	}
	var notRead []string
	for route, p := range adminPermissions {
		if strings.HasPrefix(route, http.MethodGet+" ") && !except(route) && p != domain.PermRead {
			notRead = append(notRead, route+" needs "+string(p))
		}
	}
	sort.Strings(notRead)
	if len(notRead) > 0 {
		t.Errorf("docs/DOMAIN.md says read covers every GET of /api/v1/admin but the accounts listing, the audit log and the webhook subscriptions; the route table disagrees:\n  %s",
			strings.Join(notRead, "\n  "))
	}
}
