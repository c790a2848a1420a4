package domain_test

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/ai-device/ota/domain"
)

// Native fuzz targets for the domain's parsers and pure functions. Each
// checks the code under test against an independent model written here, so
// a fuzzer-found disagreement is a real divergence from docs/DOMAIN.md, not
// just "it did not panic". Seed corpora live in testdata/fuzz/<FuzzName>/
// and run as ordinary tests under `go test`.

// ---- an independent SemVer 2.0 model ----

// fzSemver is a version as the SemVer 2.0 specification (semver.org)
// describes it, parsed by hand without regular expressions.
type fzSemver struct {
	major, minor, patch string   // decimal digits, no leading zero
	pre                 []string // pre-release identifiers (nil: none)
	build               []string // build identifiers (nil: none)
}

func fzIsDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func fzIsIdentChars(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-') {
			return false
		}
	}
	return true
}

// fzNumeric is a numeric identifier: digits, and no leading zero unless it is "0".
func fzNumeric(s string) bool { return fzIsDigits(s) && (s == "0" || s[0] != '0') }

// fzSemverRegexp is the regular expression semver.org publishes for SemVer
// 2.0.0: ParseVersion scans rather than matching it, and must accept exactly
// what it accepts (FuzzParseVersion).
var fzSemverRegexp = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)` +
	`(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?` +
	`(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`)

// fzParseSemver parses s per the SemVer 2.0 BNF: three numeric core
// identifiers, then optionally "-" and dot-separated pre-release
// identifiers (numeric ones without leading zeros), then optionally "+"
// and dot-separated build identifiers (leading zeros allowed).
func fzParseSemver(s string) (fzSemver, bool) {
	var v fzSemver
	rest := s
	if i := strings.IndexByte(rest, '+'); i >= 0 {
		v.build = strings.Split(rest[i+1:], ".")
		for _, id := range v.build {
			if !fzIsIdentChars(id) {
				return fzSemver{}, false
			}
		}
		rest = rest[:i]
	}
	if i := strings.IndexByte(rest, '-'); i >= 0 {
		v.pre = strings.Split(rest[i+1:], ".")
		for _, id := range v.pre {
			if !fzIsIdentChars(id) || (fzIsDigits(id) && !fzNumeric(id)) {
				return fzSemver{}, false
			}
		}
		rest = rest[:i]
	}
	core := strings.Split(rest, ".")
	if len(core) != 3 {
		return fzSemver{}, false
	}
	for _, n := range core {
		if !fzNumeric(n) {
			return fzSemver{}, false
		}
	}
	v.major, v.minor, v.patch = core[0], core[1], core[2]
	return v, true
}

// fzCmpNum compares two numeric identifiers of any length.
func fzCmpNum(a, b string) int {
	if len(a) != len(b) {
		if len(a) < len(b) {
			return -1
		}
		return 1
	}
	return strings.Compare(a, b)
}

// fzCompare is SemVer 2.0 §11 precedence; build metadata plays no part.
func fzCompare(a, b fzSemver) int {
	for _, p := range [][2]string{{a.major, b.major}, {a.minor, b.minor}, {a.patch, b.patch}} {
		if c := fzCmpNum(p[0], p[1]); c != 0 {
			return c
		}
	}
	switch {
	case a.pre == nil && b.pre == nil:
		return 0
	case a.pre == nil:
		return 1
	case b.pre == nil:
		return -1
	}
	for i := 0; i < len(a.pre) && i < len(b.pre); i++ {
		x, y := a.pre[i], b.pre[i]
		xn, yn := fzIsDigits(x), fzIsDigits(y)
		var c int
		switch {
		case xn && yn:
			c = fzCmpNum(x, y)
		case xn:
			c = -1
		case yn:
			c = 1
		default:
			c = strings.Compare(x, y)
		}
		if c != 0 {
			return c
		}
	}
	switch {
	case len(a.pre) < len(b.pre):
		return -1
	case len(a.pre) > len(b.pre):
		return 1
	}
	return 0
}

// fzIncDigits adds one to a decimal digit string.
func fzIncDigits(s string) string {
	b := []byte(s)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < '9' {
			b[i]++
			return string(b)
		}
		b[i] = '0'
	}
	return "1" + string(b)
}

func fzSign(n int) int {
	switch {
	case n < 0:
		return -1
	case n > 0:
		return 1
	}
	return 0
}

// fzWantRejected checks that a refusal is the documented validation error.
func fzWantRejected(t *testing.T, err error, field string) {
	t.Helper()
	var ve *domain.ValidationError
	if !errors.Is(err, domain.ErrValidation) || !errors.As(err, &ve) {
		t.Fatalf("refusal is %T %v, want *domain.ValidationError", err, err)
	}
	if ve.Field != field || ve.Reason == "" {
		t.Fatalf("refusal names field %q reason %q, want field %q with a reason", ve.Field, ve.Reason, field)
	}
}

// fzVersionSeeds are valid and invalid versions worth starting from; they
// are also committed under testdata/fuzz.
var fzVersionSeeds = []string{
	"0.0.0", "1.2.3", "10.20.30", "1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-0.3.7",
	"1.0.0-x.7.z.92", "1.0.0-alpha+001", "1.0.0+20130313144700", "1.0.0-beta+exp.sha.5114f85",
	"1.0.0+21AF26D3----117B344092BD", "1.0.0-alpha.beta", "1.0.0-beta.11", "1.0.0-rc.1",
	"1.0.0--", "1.0.0-0A", "1.0.0-a-b.-c", "1.1.2-prerelease+meta", "2.0.0-rc.1+build.123",
	"99999999999999999999999.999999999999999999.99999999999",
	"", "1", "1.2", "1.2.3.4", "01.2.3", "1.02.3", "1.2.03", "v1.2.3", "1.2.3-", "1.2.3+",
	"1.2.3-01", "1.2.3-alpha..1", "1.2.3+a..b", "1.2.3-α", "1.2.3\x00", "1.2.3\n", " 1.2.3",
	"1.2.3-a+b+c", "\xff\xfe", "1.2.3-" + strings.Repeat("a", 58), "1.2.3-" + strings.Repeat("a", 59),
	"١.٢.٣", "1.2.3-+", "+1.2.3", "-1.2.3", "1.2.3+0", "1.2.3+00", "1.2.3-0.0",
}

// FuzzParseVersion: ParseVersion never panics, accepts exactly the SemVer
// 2.0 strings of at most MaxVersionLen bytes (by the independent parser
// above, which agrees with semver.org's regexp), and an accepted version keeps its text, has a Key without build
// metadata, and orders antisymmetrically and consistently with Equal.
func FuzzParseVersion(f *testing.F) {
	for _, s := range fzVersionSeeds {
		f.Add(s)
	}
	probes := []string{"0.0.0", "1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-0", "1.0.0", "1.0.0+z", "2.0.0-rc.1", "18446744073709551616.0.0"}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := domain.ParseVersion("version", s)
		ref, refOK := fzParseSemver(s)
		if re := fzSemverRegexp.MatchString(s); re != refOK {
			t.Fatalf("%q: semver.org's regexp says valid=%v, the grammar's parser %v", s, re, refOK)
		}
		want := refOK && len(s) <= domain.MaxVersionLen
		if (err == nil) != want {
			t.Fatalf("ParseVersion(%q) err = %v; the SemVer 2.0 grammar says valid=%v (len %d)", s, err, refOK, len(s))
		}
		if err != nil {
			fzWantRejected(t, err, "version")
			if !v.IsZero() {
				t.Fatalf("ParseVersion(%q) failed but returned a non-zero version %q", s, v)
			}
			return
		}
		if v.IsZero() || v.String() != s {
			t.Fatalf("String() = %q, want %q", v.String(), s)
		}
		key := v.Key()
		if strings.Contains(key, "+") {
			t.Fatalf("Key() = %q contains '+'", key)
		}
		if wantKey, _, _ := strings.Cut(s, "+"); key != wantKey {
			t.Fatalf("Key() = %q, want %q", key, wantKey)
		}
		// Round trips: the text, and the key (build metadata dropped) both
		// parse back to an equal version.
		for _, text := range []string{v.String(), key} {
			w, err := domain.ParseVersion("version", text)
			if err != nil {
				t.Fatalf("re-parsing %q: %v", text, err)
			}
			if !w.Equal(v) || w.Compare(v) != 0 || v.Compare(w) != 0 || w.Key() != key {
				t.Fatalf("%q and %q: Equal=%v Compare=%d/%d", text, s, w.Equal(v), w.Compare(v), v.Compare(w))
			}
		}
		if v.Compare(v) != 0 || !v.Equal(v) || v.Less(v) {
			t.Fatalf("%q is not equal to itself", s)
		}
		var zero domain.Version
		if v.Compare(zero) != 1 || zero.Compare(v) != -1 || v.Equal(zero) || !zero.Less(v) {
			t.Fatalf("%q against the zero version: %d/%d", s, v.Compare(zero), zero.Compare(v))
		}
		for _, p := range probes {
			o := domain.MustParseVersion(p)
			oref, _ := fzParseSemver(p)
			c, back := v.Compare(o), o.Compare(v)
			if c != -back {
				t.Fatalf("Compare(%q, %q) = %d but reverse = %d", s, p, c, back)
			}
			if c < -1 || c > 1 {
				t.Fatalf("Compare(%q, %q) = %d, want -1, 0 or 1", s, p, c)
			}
			if v.Equal(o) != (c == 0) || o.Equal(v) != (c == 0) || v.Less(o) != (c < 0) {
				t.Fatalf("Equal/Less disagree with Compare(%q, %q) = %d", s, p, c)
			}
			if r := fzCompare(ref, oref); c != r {
				t.Fatalf("Compare(%q, %q) = %d, SemVer 2.0 precedence says %d", s, p, c, r)
			}
		}
	})
}

// FuzzCompareVersions: for two versions a, b (and values derived from them
// with a known relation), Compare is antisymmetric, transitive, agrees with
// SemVer 2.0 precedence, and ignores build metadata.
func FuzzCompareVersions(f *testing.F) {
	pairs := [][2]string{
		{"1.0.0", "2.0.0"}, {"2.0.0", "2.1.0"}, {"2.1.0", "2.1.1"},
		{"1.0.0-alpha", "1.0.0"}, {"1.0.0-alpha", "1.0.0-alpha.1"}, {"1.0.0-alpha.1", "1.0.0-alpha.beta"},
		{"1.0.0-alpha.beta", "1.0.0-beta"}, {"1.0.0-beta", "1.0.0-beta.2"}, {"1.0.0-beta.2", "1.0.0-beta.11"},
		{"1.0.0-beta.11", "1.0.0-rc.1"}, {"1.0.0-rc.1", "1.0.0"}, {"1.0.0+a", "1.0.0+b"},
		{"1.0.0-1", "1.0.0-a"}, {"1.0.0-9", "1.0.0-10"}, {"1.0.0-Z", "1.0.0-a"}, {"1.0.0--", "1.0.0-0"},
		{"1.0.0-a-", "1.0.0-a"}, {"9.9.9", "10.0.0"}, {"99999999999999999999.0.0", "100000000000000000000.0.0"},
		{"1.2.3-rc.1+build.5", "1.2.3-rc.1+build.6"}, {"0.0.0", "0.0.0-0"}, {"", "1.0.0"}, {"1.2", "1.2.0"},
	}
	for _, p := range pairs {
		f.Add(p[0], p[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		va, errA := domain.ParseVersion("a", a)
		vb, errB := domain.ParseVersion("b", b)
		if errA != nil || errB != nil {
			return // FuzzParseVersion owns the grammar
		}
		type item struct {
			text string
			v    domain.Version
			ref  fzSemver
		}
		items := []item{}
		add := func(text string) {
			v, err := domain.ParseVersion("version", text)
			ref, ok := fzParseSemver(text)
			if !ok {
				t.Fatalf("derived %q is not SemVer: the derivation is wrong", text)
			}
			if err != nil {
				if len(text) <= domain.MaxVersionLen {
					t.Fatalf("derived %q refused: %v", text, err)
				}
				return // too long to be a version here
			}
			items = append(items, item{text, v, ref})
		}
		add(a)
		add(b)
		rb, _ := fzParseSemver(b)
		core := rb.major + "." + rb.minor + "." + rb.patch
		derived := []struct {
			text string
			rel  int // expected Compare(derived, b)
		}{
			{vb.Key() + "+fuzz.build", 0}, // other build metadata: the same version
			{core, 1},                     // the release of b (or b itself)
			{rb.major + "." + rb.minor + "." + fzIncDigits(rb.patch), 1},
			{fzIncDigits(rb.major) + ".0.0-0", 1},
		}
		if rb.pre == nil {
			derived[1].rel = 0
			derived = append(derived, struct {
				text string
				rel  int
			}{core + "-0", -1})
		} else {
			derived = append(derived, struct {
				text string
				rel  int
			}{vb.Key() + ".0", 1}) // one more pre-release field ranks higher
		}
		for _, d := range derived {
			n := len(items)
			add(d.text)
			if len(items) == n {
				continue
			}
			if got := items[n].v.Compare(vb); got != d.rel {
				t.Fatalf("Compare(%q, %q) = %d, want %d", d.text, b, got, d.rel)
			}
		}
		// Build metadata is ignored: a with and without its build compare
		// the same against every item, and are equal.
		aKey := domain.MustParseVersion(va.Key())
		if !aKey.Equal(va) {
			t.Fatalf("%q differs from its key %q", a, va.Key())
		}
		for _, it := range items {
			if aKey.Compare(it.v) != va.Compare(it.v) {
				t.Fatalf("build metadata changes Compare(%q, %q)", a, it.text)
			}
		}
		// Antisymmetry, agreement with the model, and consistency of Equal
		// and Less over every pair; transitivity over every triple.
		n := len(items)
		cmp := make([][]int, n)
		for i := range items {
			cmp[i] = make([]int, n)
			for j := range items {
				c := items[i].v.Compare(items[j].v)
				cmp[i][j] = c
				if want := fzCompare(items[i].ref, items[j].ref); c != want {
					t.Fatalf("Compare(%q, %q) = %d, SemVer 2.0 precedence says %d", items[i].text, items[j].text, c, want)
				}
				if items[i].v.Equal(items[j].v) != (c == 0) || items[i].v.Less(items[j].v) != (c < 0) {
					t.Fatalf("Equal/Less disagree with Compare(%q, %q) = %d", items[i].text, items[j].text, c)
				}
			}
		}
		for i := range n {
			for j := range n {
				if cmp[i][j] != -cmp[j][i] {
					t.Fatalf("Compare(%q, %q) = %d but reverse = %d", items[i].text, items[j].text, cmp[i][j], cmp[j][i])
				}
				for k := range n {
					if cmp[i][j] <= 0 && cmp[j][k] <= 0 && cmp[i][k] > 0 {
						t.Fatalf("not transitive: %q <= %q <= %q but %q > %q",
							items[i].text, items[j].text, items[k].text, items[i].text, items[k].text)
					}
					if cmp[i][j] == 0 && fzSign(cmp[i][k]) != fzSign(cmp[j][k]) {
						t.Fatalf("equal %q and %q compare differently with %q", items[i].text, items[j].text, items[k].text)
					}
				}
			}
		}
	})
}

// ---- Bucket ----

// fzASCIIUpper and fzASCIILower change only the letters a UUID can hold.
func fzASCIIUpper(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'a' && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}

func fzASCIILower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c - 'A' + 'a'
		}
	}
	return string(b)
}

func fzIsASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// FuzzBucket: Bucket never panics, lands in [0, 100), is deterministic,
// ignores the case of the rollout id (but not of the device id's bytes),
// and for ASCII ids is exactly docs/DOMAIN.md check rule 4.
func FuzzBucket(f *testing.F) {
	f.Add(rolloutA, "cam-0001")
	f.Add(strings.ToUpper(rolloutB), "DEV-1")
	f.Add("", "")
	f.Add(":", ":")
	f.Add(rolloutC+":x", "y")
	f.Add("\x00", "\xff\xfe")
	f.Add("İSTANBUL-ǅ", "ß")
	f.Add(strings.Repeat("f", 4096), "dev")
	f.Fuzz(func(t *testing.T, rolloutID, deviceID string) {
		b := domain.Bucket(rolloutID, deviceID)
		if b < 0 || b >= 100 {
			t.Fatalf("Bucket(%q, %q) = %d, outside [0, 100)", rolloutID, deviceID, b)
		}
		if again := domain.Bucket(rolloutID, deviceID); again != b {
			t.Fatalf("Bucket(%q, %q) = %d then %d", rolloutID, deviceID, b, again)
		}
		for _, r := range []string{fzASCIIUpper(rolloutID), fzASCIILower(rolloutID)} {
			if got := domain.Bucket(r, deviceID); got != b {
				t.Fatalf("Bucket(%q, %q) = %d but Bucket(%q, …) = %d: rollout id case matters", rolloutID, deviceID, b, r, got)
			}
		}
		if fzIsASCII(rolloutID) {
			sum := sha256.Sum256([]byte(fzASCIILower(rolloutID) + ":" + deviceID))
			if want := int(binary.BigEndian.Uint64(sum[:8]) % 100); b != want {
				t.Fatalf("Bucket(%q, %q) = %d, the contract's formula gives %d", rolloutID, deviceID, b, want)
			}
		}
	})
}

// ---- NewEvent ----

var fzEventStatuses = map[string]bool{
	"downloading": true, "downloaded": true, "installing": true, "succeeded": true, "failed": true,
}

// fzTextOK is the contract's rule for string fields: valid UTF-8, no NUL,
// at most max bytes.
func fzTextOK(s string, max int) bool {
	return len(s) <= max && utf8.ValidString(s) && !strings.ContainsRune(s, 0)
}

type fzEventBody struct {
	status      string
	hasProgress bool
	progress    int
	code, msg   string
}

func (b fzEventBody) build(id string) (domain.Event, error) {
	var p *int
	if b.hasProgress {
		v := b.progress
		p = &v
	}
	return domain.NewEvent(id, b.status, p, b.code, b.msg)
}

func (b fzEventBody) valid() bool {
	return fzEventStatuses[b.status] && (!b.hasProgress || b.progress >= 0 && b.progress <= 100) &&
		fzTextOK(b.code, domain.MaxIDLen) && fzTextOK(b.msg, domain.MaxMessageLen)
}

// FuzzNewEvent: NewEvent never panics and accepts exactly the events the
// contract allows; an accepted event has a device-reportable status and,
// applied to a task, leaves its progress in 0..100; two accepted events
// have equal fingerprints exactly when their bodies (everything but the
// event id) are equal.
func FuzzNewEvent(f *testing.F) {
	f.Add("e1", "downloading", true, 50, "", "", "failed", true, 50, "E_IO", "disk full", uint8(0))
	f.Add("e1", "downloading", true, 50, "", "", "", false, 0, "", "", uint8(0xff))
	f.Add("e-2", "succeeded", false, 0, "", "", "succeeded", true, 0, "", "", uint8(0b1101))
	f.Add("e3", "failed", true, 100, "a|b", "", "failed", true, 100, "a", "|b", uint8(0b0011))
	f.Add("e4", "failed", true, 0, `x"`, `"y`, "failed", true, 0, `x`, `""y`, uint8(0b0011))
	f.Add("", "downloading", false, 0, "", "", "downloading", false, 0, "", "", uint8(0xff))
	f.Add("e5", "pending", false, 0, "", "", "cancelled", false, 0, "", "", uint8(0))
	f.Add("e6", "Downloading", true, -1, "", "", "installing", true, 101, "", "", uint8(0))
	f.Add("e7", "installing", true, 1<<62, "\x00", "\xff", "installing", true, -1<<62, "", "", uint8(0))
	f.Add("\xff", "failed", false, 0, "code", strings.Repeat("m", 1025), "failed", false, 0, "", strings.Repeat("m", 1024), uint8(0b0111))
	f.Add(strings.Repeat("i", 65), "downloaded", false, 0, "", "", "downloaded", false, 0, "", "", uint8(0xff))
	f.Add("e8", "failed", false, 0, "é", "ü\u2028", "failed", false, 0, "é", "ü\u2028", uint8(0))
	f.Fuzz(func(t *testing.T, id, st1 string, hasP1 bool, p1 int, code1, msg1, st2 string, hasP2 bool, p2 int, code2, msg2 string, same uint8) {
		b1 := fzEventBody{st1, hasP1, p1, code1, msg1}
		b2 := fzEventBody{st2, hasP2, p2, code2, msg2}
		// Copy some fields of the first body into the second, so that equal
		// bodies and near-misses are common.
		if same&1 != 0 {
			b2.status = b1.status
		}
		if same&2 != 0 {
			b2.hasProgress, b2.progress = b1.hasProgress, b1.progress
		}
		if same&4 != 0 {
			b2.code = b1.code
		}
		if same&8 != 0 {
			b2.msg = b1.msg
		}
		// Without progress the number is not part of the body.
		for _, b := range []*fzEventBody{&b1, &b2} {
			if !b.hasProgress {
				b.progress = 0
			}
		}
		idOK := id != "" && fzTextOK(id, domain.MaxIDLen)
		events := make([]domain.Event, 2)
		for i, b := range []fzEventBody{b1, b2} {
			ev, err := b.build(id)
			if want := idOK && b.valid(); (err == nil) != want {
				t.Fatalf("NewEvent(%q, %+v) err = %v, want accepted=%v", id, b, err, want)
			}
			if err != nil {
				if !errors.Is(err, domain.ErrValidation) {
					t.Fatalf("NewEvent(%q, %+v) refused with %T %v, want a validation error", id, b, err, err)
				}
				return
			}
			if ev.ID() != id || ev.Status().String() != b.status || !fzEventStatuses[ev.Status().String()] {
				t.Fatalf("NewEvent(%q, %+v) = id %q status %q", id, b, ev.ID(), ev.Status())
			}
			if ev.IsFinal() != (b.status == "succeeded" || b.status == "failed") {
				t.Fatalf("IsFinal() = %v for status %q", ev.IsFinal(), b.status)
			}
			if ev.Fingerprint() == "" {
				t.Fatalf("empty fingerprint for %+v", b)
			}
			// The event id is not part of the body.
			if other, err := b.build(id + "x"); len(id) < domain.MaxIDLen && (err != nil || !other.SameBody(ev)) {
				t.Fatalf("changing only the event id changes the body: %v", err)
			}
			// Applied to a task in any active status, the result (accepted
			// or refused) keeps progress within 0..100.
			for _, from := range domain.ActiveTaskStatuses {
				for _, start := range []int{0, 37, 100} {
					task := fzTask(from, start)
					changed, err := task.ApplyEvent(ev, nil, fzNow)
					if p := task.Progress(); p < 0 || p > 100 {
						t.Fatalf("%s@%d + %+v: progress %d (changed=%v err=%v)", from, start, b, p, changed, err)
					}
					if err == nil && changed && task.Status() != ev.Status() {
						t.Fatalf("%s@%d + %+v: status %s", from, start, b, task.Status())
					}
				}
			}
			events[i] = ev
		}
		if got, want := events[0].SameBody(events[1]), b1 == b2; got != want {
			t.Fatalf("SameBody(%+v, %+v) = %v, want %v (fingerprints %q, %q)",
				b1, b2, got, want, events[0].Fingerprint(), events[1].Fingerprint())
		}
		if (events[0].Fingerprint() == events[1].Fingerprint()) != (b1 == b2) {
			t.Fatalf("fingerprints of %+v and %+v: equal=%v", b1, b2, b1 == b2)
		}
		// A stored event (id and fingerprint only) compares like the original.
		stored := domain.RehydrateEvent(id, events[0].Fingerprint())
		if !stored.SameBody(events[0]) || stored.SameBody(events[1]) != (b1 == b2) {
			t.Fatalf("a rehydrated event compares differently from the original")
		}
	})
}

var fzNow = time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)

func fzTask(st domain.TaskStatus, progress int) domain.Task {
	return domain.RehydrateTask(domain.TaskRecord{
		ID: "5c0c6f3e-4a5b-4c53-9d3e-4f1d7f9e0a11", ActionID: 1, DeviceID: "cam-0001",
		FirmwareID: "1b6f4c2e-8a3d-4f5e-9b7a-2c1d0e9f8a76", RolloutID: rolloutA, Status: st,
		Progress: progress, Attempt: 1, CreatedAt: fzNow, UpdatedAt: fzNow,
	})
}
