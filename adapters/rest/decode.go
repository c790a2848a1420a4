package rest

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strings"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/ai-device/ota/domain"

	"github.com/ai-device/ota/adapters/httpedge"
)

// readBody reads the request body within the size limit and checks its
// media type. It returns nil for an empty body; the caller decides whether
// one is required.
func (s *server) readBody(c echo.Context) ([]byte, error) {
	req := c.Request()
	limit := s.cfg.BodyLimit
	if req.ContentLength > limit {
		return nil, httpedge.TooLarge()
	}
	if req.Body == nil || req.Body == http.NoBody {
		return nil, nil
	}
	body, err := io.ReadAll(io.LimitReader(req.Body, limit+1))
	if err != nil {
		return nil, unreadable(err)
	}
	if int64(len(body)) > limit {
		return nil, httpedge.TooLarge()
	}
	if len(body) == 0 {
		return nil, nil
	}
	if !isJSON(req.Header.Get(echo.HeaderContentType)) {
		return nil, httpedge.UnsupportedMedia()
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, nil
	}
	return body, nil
}

// unreadable maps an error met while reading the request body. Every byte
// of the body comes from the caller, so a body that cannot be read is the
// caller's fault: a bad chunk length, a chunk shorter than it declared, a
// connection closed before the declared Content-Length. It answers 400
// MALFORMED_JSON ("request body could not be read"), logged as a client
// error (info, with its code), never 500. A body over the size limit keeps
// its own answer, 413 PAYLOAD_TOO_LARGE.
func unreadable(err error) error {
	if mbe, ok := errors.AsType[*http.MaxBytesError](err); ok {
		return mbe
	}
	return httpedge.Malformed("request body could not be read")
}

// isJSON accepts application/json, with no charset or a UTF-8 one: JSON
// text exchanged between systems is UTF-8 (RFC 8259 §8.1).
func isJSON(contentType string) bool {
	if contentType == echo.MIMEApplicationJSON {
		return true // what devices send: no parameters to parse
	}
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil || mt != echo.MIMEApplicationJSON {
		return false
	}
	for k, v := range params {
		if k != "charset" || !(strings.EqualFold(v, "utf-8") || strings.EqualFold(v, "utf8")) {
			return false
		}
	}
	return true
}

// ctxKnownFieldsOnly marks a request whose body may hold only the fields
// its route reads (set by knownFieldsOnly).
const ctxKnownFieldsOnly = "ota.known_fields_only"

// knownFieldsOnly makes the route refuse unknown body fields. Every
// operator route has it: an operator's typo ("tag_all" for "tags_all")
// silently dropped would change what the call does — a rollout meant for
// the lab would cover the whole model. Device routes do not: devices in
// the field run older and newer agents, and an extra field they send must
// not cut them off from updates.
func knownFieldsOnly(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		c.Set(ctxKnownFieldsOnly, true)
		return next(c)
	}
}

func strictBody(c echo.Context) bool {
	strict, _ := c.Get(ctxKnownFieldsOnly).(bool)
	return strict
}

// decodeBody reads and decodes a required JSON object into dst, a struct of
// pointer fields (nil = absent). See decodeJSON for the error mapping.
func (s *server) decodeBody(c echo.Context, dst any) error {
	body, err := s.readBody(c)
	if err != nil {
		return err
	}
	if body == nil {
		return httpedge.Malformed("request body is required")
	}
	return decodeJSON(body, dst, strictBody(c))
}

// acceptEmptyBody is for calls that take no fields (token rotation,
// revocation): an empty body is fine, and a present one must still be a
// well-formed JSON object of the right media type — an empty one on an
// operator route, whose fields are otherwise ignored.
func (s *server) acceptEmptyBody(c echo.Context) error {
	body, err := s.readBody(c)
	if err != nil || body == nil {
		return err
	}
	var ignored struct{}
	return decodeJSON(body, &ignored, strictBody(c))
}

// decodeJSON decodes one JSON object into dst:
//   - invalid UTF-8 anywhere in the body is VALIDATION_FAILED (encoding/json
//     would silently replace it with U+FFFD, storing something the device
//     never sent);
//   - a syntax error, trailing data, or a value that is not an object is
//     MALFORMED_JSON;
//   - a field of the wrong JSON type is VALIDATION_FAILED naming the field;
//   - with strict, a field dst does not have, at any depth, is
//     VALIDATION_FAILED naming it (httpedge.KnownFieldsOnly); without, unknown
//     fields are ignored, so older servers accept newer devices.
func decodeJSON(body []byte, dst any, strict bool) error {
	if err := decodeJSONValue(body, dst); err != nil || !strict {
		return err
	}
	return httpedge.KnownFieldsOnly(body, dst)
}

func decodeJSONValue(body []byte, dst any) error {
	if !utf8.Valid(body) || hasLoneSurrogate(body) {
		return &domain.ValidationError{Reason: "request body must be valid UTF-8"}
	}
	if trimmed := bytes.TrimLeft(body, " \t\r\n"); len(trimmed) == 0 || trimmed[0] != '{' {
		if json.Valid(body) {
			return httpedge.Malformed("request body must be a JSON object")
		}
		return httpedge.Malformed("request body is not valid JSON")
	}
	// The body is already in memory: json.Unmarshal decodes it in place,
	// with no Decoder, reader or copy of the body (4 allocations per
	// check). Its answer equals the Decoder's below for a well-formed
	// single value; on a syntax error (trailing data included) it writes
	// nothing into dst, and the Decoder runs for the exact error it maps.
	err := json.Unmarshal(body, dst)
	if _, syntax := errors.AsType[*json.SyntaxError](err); !syntax {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return &domain.ValidationError{Field: te.Field, Reason: "must be " + jsonKind(te)}
		}
		if err != nil {
			return httpedge.Malformed("request body is not valid JSON")
		}
		return nil
	}
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

// jsonKind names the JSON type a Go field expects, in the caller's terms.
func jsonKind(te *json.UnmarshalTypeError) string {
	if te.Type == nil {
		return "of another type"
	}
	t := te.Type
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer within range"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Slice, reflect.Array:
		return "an array"
	}
	return "of another type"
}

// required reports the first absent field among names/values pairs, as the
// VALIDATION_FAILED the contract asks for.
func required(fields ...field) error {
	for _, f := range fields {
		if !f.present {
			return &domain.ValidationError{Field: f.name, Reason: "is required"}
		}
	}
	return nil
}

type field struct {
	name    string
	present bool
}

func has[T any](name string, p *T) field { return field{name: name, present: p != nil} }

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// hasLoneSurrogate reports a \uD800–\uDFFF escape that is not half of a
// surrogate pair. It has no UTF-8 form, and encoding/json would silently
// store U+FFFD in its place: a string the caller never sent.
func hasLoneSurrogate(body []byte) bool {
	inString := false
	for i := 0; i < len(body); i++ {
		c := body[i]
		if !inString {
			if c == '"' {
				inString = true
			}
			continue
		}
		switch c {
		case '"':
			inString = false
		case '\\':
			if i+1 >= len(body) || body[i+1] != 'u' {
				i++ // a one-character escape
				continue
			}
			r, ok := hex4(body, i+2)
			if !ok {
				return false // not valid JSON; the decoder reports it
			}
			i += 5
			switch {
			case r >= 0xDC00 && r <= 0xDFFF:
				return true // a low half with no high half before it
			case r >= 0xD800 && r <= 0xDBFF:
				if i+6 >= len(body) || body[i+1] != '\\' || body[i+2] != 'u' {
					return true
				}
				lo, ok := hex4(body, i+3)
				if !ok || lo < 0xDC00 || lo > 0xDFFF {
					return true
				}
				i += 6
			}
		}
	}
	return false
}

func hex4(b []byte, at int) (rune, bool) {
	if at+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[at : at+4] {
		var v byte
		switch {
		case c >= '0' && c <= '9':
			v = c - '0'
		case c >= 'a' && c <= 'f':
			v = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			v = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(v)
	}
	return r, true
}
