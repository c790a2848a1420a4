package httpedge

import (
	"errors"
	"strings"
	"testing"

	"github.com/ai-device/ota/domain"
)

// KnownFieldsOnly names an unknown field by its path, at any depth, and
// takes names exactly as written; known fields of every shape pass.
func TestKnownFieldsOnlyNamesTheUnknownField(t *testing.T) {
	type inner struct {
		A *int `json:"a"`
	}
	type Embedded struct {
		E *int `json:"e"`
	}
	type body struct {
		Embedded
		X     *int             `json:"x"`
		In    *inner           `json:"in"`
		List  []inner          `json:"list"`
		ByKey map[string]inner `json:"by_key"`
		Plain map[string]string
		Skip  *int `json:"-"`
	}
	long := strings.Repeat("é", 100)
	for in, want := range map[string]string{
		`{}`: "",
		`{"x":1,"e":2,"in":{"a":1},"list":[{"a":1}],"by_key":{"k":{"a":1}},"Plain":{"any":"v"}}`: "",
		`{"y":1}`:                     "y",
		`{"X":1}`:                     "X",
		`{"Skip":1}`:                  "Skip",
		`{"-":1}`:                     "-",
		`{"in":{"a":1,"b":2}}`:        "in.b",
		`{"list":[{"a":1},{"c":2}]}`:  "list.c",
		`{"by_key":{"k":{"d":1}}}`:    "by_key.k.d",
		`{"x":1,"in":{"b":1},"z":1}`:  "z",
		`{"` + long + `":1}`:          strings.Repeat("é", maxFieldNameShown) + "…",
		`{"in":"not an object"}`:      "",
		`{"list":{"not":"an array"}}`: "",
	} {
		err := KnownFieldsOnly([]byte(in), &body{})
		if want == "" {
			if err != nil {
				t.Errorf("%s: %v, want nil", in, err)
			}
			continue
		}
		var ve *domain.ValidationError
		if !errors.As(err, &ve) || ve.Field != want {
			t.Errorf("%.60s: %v, want a validation error naming %q", in, err, want)
		}
	}
}
