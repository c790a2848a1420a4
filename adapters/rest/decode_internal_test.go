package rest

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"testing"

	"github.com/ai-device/ota/domain"

	"github.com/ai-device/ota/adapters/httpedge"
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
		return httpedge.Malformed("request body is not valid JSON")
	}
	if _, err := dec.Token(); err != io.EOF {
		return httpedge.Malformed("request body must hold a single JSON object")
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
