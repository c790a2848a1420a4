package rest

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/ai-device/ota/domain"
)

// decodeWithDecoder is decodeJSON's mapping done with a json.Decoder only,
// as it was before json.Unmarshal took the common path: the reference the
// faster path must agree with.
func decodeWithDecoder(body []byte, dst any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(dst); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return &domain.ValidationError{Field: te.Field, Reason: "must be " + jsonKind(te)}
		}
		return malformed("request body is not valid JSON")
	}
	if _, err := dec.Token(); err != io.EOF {
		return malformed("request body must hold a single JSON object")
	}
	return nil
}

// decodeJSON answers every object-shaped body exactly as the Decoder did:
// the same error (code, field, message) and the same decoded fields, for
// valid bodies, type errors, syntax errors and trailing data in any order.
func TestDecodeJSONAgreesWithTheDecoder(t *testing.T) {
	type req struct {
		Model   *string            `json:"model"`
		Version *string            `json:"current_version"`
		Count   *int               `json:"count"`
		Attrs   *map[string]string `json:"attrs"`
	}
	bodies := []string{
		`{"model":"cam","current_version":"1.0.0"}`,
		`{"model":"cam","current_version":"1.0.0"}  ` + "\n",
		`{"model":1,"current_version":"1.0.0"}`,
		`{"model":"cam","count":1.5}`,
		`{"model":"cam","count":99999999999999999999999}`,
		`{"attrs":{"a":1}}`,
		`{"model":1} x`,
		`{"model":"cam"} {}`,
		`{"model":"cam"}x`,
		`{"model":"cam",}`,
		`{"model":"cam"`,
		`{"model":"cam","model":2}`,
		`{"unknown":[1,2,{"x":null}],"model":null}`,
		`{"model":"caf\u00e9"}`,
	}
	for _, b := range bodies {
		var got, want req
		gotErr := decodeJSON([]byte(b), &got, false)
		wantErr := decodeWithDecoder([]byte(b), &want)
		if !reflect.DeepEqual(gotErr, wantErr) {
			t.Errorf("%s: error %#v, the Decoder's %#v", b, gotErr, wantErr)
		}
		if wantErr == nil && !reflect.DeepEqual(got, want) {
			t.Errorf("%s: decoded %+v, the Decoder's %+v", b, got, want)
		}
	}
}

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
