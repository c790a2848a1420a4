package httpedge

import (
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/ai-device/ota/domain"
)

// maxFieldNameShown bounds an unknown field's name in an error message.
const maxFieldNameShown = 64

// KnownFieldsOnly refuses a field of the JSON object body that dst (a
// pointer to the struct body decodes into) does not have, in nested objects
// and in objects inside arrays too, with VALIDATION_FAILED naming it by its
// path ("selector.tag_all", "stages.min_finish"). Names match exactly, as
// documented: encoding/json would also take "Percentage" for "percentage".
// It judges names only: a body that is not an object, or a value of another
// type, is left to the decoder. Every operator body goes through it (the
// edge's routes, and other adapters' operator routes, which call it).
func KnownFieldsOnly(body []byte, dst any) error {
	if f := unknownField(body, reflect.TypeOf(dst), ""); f != "" {
		return &domain.ValidationError{Field: f, Reason: "is not a field of this request (see /openapi.yaml)"}
	}
	return nil
}

// unknownField returns the path of the first unknown field of raw for type
// t ("" when none): the object's own names first, in sorted order, then
// inside its fields.
func unknownField(raw []byte, t reflect.Type, prefix string) string {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return ""
	}
	switch t.Kind() {
	case reflect.Struct:
		var obj map[string]json.RawMessage
		if json.Unmarshal(raw, &obj) != nil {
			return ""
		}
		fields := jsonFields(t)
		keys := slices.Sorted(maps.Keys(obj))
		for _, k := range keys {
			if _, ok := fields[k]; !ok {
				return prefix + shortName(k)
			}
		}
		for _, k := range keys {
			if f := unknownField(obj[k], fields[k], prefix+k+"."); f != "" {
				return f
			}
		}
	case reflect.Slice, reflect.Array:
		var items []json.RawMessage
		if json.Unmarshal(raw, &items) != nil {
			return ""
		}
		for _, it := range items {
			if f := unknownField(it, t.Elem(), prefix); f != "" {
				return f
			}
		}
	case reflect.Map:
		var obj map[string]json.RawMessage
		if json.Unmarshal(raw, &obj) != nil {
			return ""
		}
		for _, k := range slices.Sorted(maps.Keys(obj)) {
			if f := unknownField(obj[k], t.Elem(), prefix+k+"."); f != "" {
				return f
			}
		}
	}
	return ""
}

// shortName bounds a caller's field name for the error message.
func shortName(k string) string {
	if utf8.RuneCountInString(k) <= maxFieldNameShown {
		return k
	}
	return string([]rune(k)[:maxFieldNameShown]) + "…"
}

var jsonFieldCache sync.Map // reflect.Type → map[string]reflect.Type

// jsonFields maps the JSON names of a struct's fields to their types, as
// encoding/json names them (the tag's name, else the Go name; "-" is
// none; an embedded struct's fields are the outer struct's).
func jsonFields(t reflect.Type) map[string]reflect.Type {
	if f, ok := jsonFieldCache.Load(t); ok {
		return f.(map[string]reflect.Type)
	}
	fields := map[string]reflect.Type{}
	for i := range t.NumField() {
		sf := t.Field(i)
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		ft := sf.Type
		if sf.Anonymous && name == "" {
			et := ft
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				for k, v := range jsonFields(et) {
					if _, shadowed := fields[k]; !shadowed {
						fields[k] = v
					}
				}
				continue
			}
		}
		if !sf.IsExported() {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		fields[name] = ft
	}
	jsonFieldCache.Store(t, fields)
	return fields
}
