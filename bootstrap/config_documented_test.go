package bootstrap_test

import (
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ai-device/ota/bootstrap"
)

// documentedVariable is one row of docs/CONFIGURATION.md's tables of the
// variables otad reads: its name, default cell and allowed cell.
type documentedVariable struct {
	line                 int
	name, deflt, allowed string
}

var configRow = regexp.MustCompile("^\\| `(OTA_[A-Z0-9_]+)` \\| ([^|]*) \\| ([^|]*) \\|")

func documentedVariables(t *testing.T) []documentedVariable {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "docs", "CONFIGURATION.md"))
	if err != nil {
		t.Fatal(err)
	}
	var out []documentedVariable
	for i, l := range strings.Split(string(doc), "\n") {
		if strings.HasPrefix(l, "Variables read only by the tests") {
			break // the tests' table: no defaults nor ranges of otad's
		}
		if m := configRow.FindStringSubmatch(l); m != nil {
			out = append(out, documentedVariable{i + 1, m[1], strings.TrimSpace(m[2]), strings.TrimSpace(m[3])})
		}
	}
	if len(out) < 40 {
		t.Fatalf("found only %d rows in docs/CONFIGURATION.md; is the pattern still right?", len(out))
	}
	return out
}

// baseEnv is a configuration LoadConfig accepts, single sign-on on, so
// that the OTA_OIDC_* defaults can be set on their own.
func baseEnv() map[string]string {
	return map[string]string{
		"OTA_ADMIN_TOKEN":        "0123456789abcdef",
		"OTA_OIDC_ISSUER":        "https://idp.example.com",
		"OTA_OIDC_CLIENT_ID":     "ota",
		"OTA_OIDC_CLIENT_SECRET": "secret",
	}
}

func loadWith(name, value string) (bootstrap.Config, error) {
	m := baseEnv()
	if name != "" {
		m[name] = value
	}
	return bootstrap.LoadConfig(env(m), true)
}

var (
	durationRange = regexp.MustCompile(`^Go duration, (\S+) – (\S+)$`)
	numberRange   = regexp.MustCompile(`^(number|integer|whole number), (\S+) – (\S+)$`)
	numberAtLeast = regexp.MustCompile(`^(number|whole number) ≥ (\S+)`)
	defaultValue  = regexp.MustCompile("^`([^`]+)`( \\(.*\\))?$")
)

// docNumber reads a bound as the table writes it: 5, 0.1, 1e6, 2^40.
func docNumber(t *testing.T, s string) float64 {
	t.Helper()
	if b, e, ok := strings.Cut(s, "^"); ok {
		bf, _ := strconv.ParseFloat(b, 64)
		ef, _ := strconv.ParseFloat(e, 64)
		return math.Pow(bf, ef)
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("bound %q does not parse", s)
	}
	return v
}

// TestDocumentedRangesAndDefaultsAreTheCodes holds every row of
// docs/CONFIGURATION.md to LoadConfig: a documented default set
// explicitly gives the configuration an unset variable gives, the
// documented bounds are accepted, and just past them is refused (an
// operator reads the table to know what a replica will start with).
func TestDocumentedRangesAndDefaultsAreTheCodes(t *testing.T) {
	unset, err := loadWith("", "")
	if err != nil {
		t.Fatal(err)
	}
	accept := func(v documentedVariable, value, why string) {
		t.Helper()
		if _, err := loadWith(v.name, value); err != nil {
			t.Errorf("docs/CONFIGURATION.md:%d: %s=%s is %s (allowed: %q), but LoadConfig refuses it: %v", v.line, v.name, value, why, v.allowed, err)
		}
	}
	refuse := func(v documentedVariable, value, why string) {
		t.Helper()
		if _, err := loadWith(v.name, value); err == nil {
			t.Errorf("docs/CONFIGURATION.md:%d: %s=%s is %s (allowed: %q), but LoadConfig accepts it", v.line, v.name, value, why, v.allowed)
		}
	}
	checked := 0
	for _, v := range documentedVariables(t) {
		if m := defaultValue.FindStringSubmatch(v.deflt); m != nil {
			checked++
			if got, err := loadWith(v.name, m[1]); err != nil {
				t.Errorf("docs/CONFIGURATION.md:%d: the documented default %s=%s is refused: %v", v.line, v.name, m[1], err)
			} else if !reflect.DeepEqual(got, unset) {
				t.Errorf("docs/CONFIGURATION.md:%d: %s=%s (the documented default) configures otherwise than leaving it unset", v.line, v.name, m[1])
			}
		}
		switch a := v.allowed; {
		case durationRange.MatchString(a):
			m := durationRange.FindStringSubmatch(a)
			lo, err1 := time.ParseDuration(m[1])
			hi, err2 := time.ParseDuration(m[2])
			if err1 != nil || err2 != nil {
				t.Errorf("docs/CONFIGURATION.md:%d: %s: bounds %q do not parse", v.line, v.name, a)
				continue
			}
			checked++
			accept(v, lo.String(), "the documented minimum")
			accept(v, hi.String(), "the documented maximum")
			if lo > 0 {
				refuse(v, (lo - time.Millisecond).String(), "under the documented minimum")
			}
			refuse(v, (hi + time.Second).String(), "over the documented maximum")
		case numberRange.MatchString(a):
			m := numberRange.FindStringSubmatch(a)
			lo, hi := docNumber(t, m[2]), docNumber(t, m[3])
			format := func(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
			step := 0.5
			if m[1] != "number" { // a count: written as a whole number
				format = func(f float64) string { return strconv.FormatInt(int64(f), 10) }
				step = 1
			}
			checked++
			accept(v, format(lo), "the documented minimum")
			accept(v, format(hi), "the documented maximum")
			refuse(v, format(lo-step), "under the documented minimum")
			refuse(v, format(hi+step), "over the documented maximum")
		case numberAtLeast.MatchString(a):
			// No upper bound is documented: any larger value is allowed.
			m := numberAtLeast.FindStringSubmatch(a)
			lo := docNumber(t, m[2])
			checked++
			accept(v, strconv.FormatInt(int64(lo), 10), "the documented minimum")
			accept(v, "1000000000", "allowed (no upper bound is documented)")
			refuse(v, strconv.FormatInt(int64(lo)-1, 10), "under the documented minimum")
		}
	}
	if checked < 40 {
		t.Fatalf("checked only %d defaults and ranges; is the table's pattern still right?", checked)
	}
}
