package domain

import (
	"maps"
	"slices"
	"strings"
)

// Limits of the targeting vocabulary: a device's tags and a rollout's
// selector are small by design, so evaluating a selector at every check is
// a handful of comparisons.
const (
	MaxTags            = 32
	MaxTagLen          = 64
	MaxSelectorAttrs   = 16
	MaxVersionRangeLen = 256
	maxVersionTerms    = 8
)

// ValidateTags checks an operator's tags for a device or a selector: at
// most MaxTags, each 1–64 characters of [A-Za-z0-9._:-] (the identifier
// alphabet, so a tag needs no escaping in a query string). It returns them
// sorted without duplicates (never nil).
func ValidateTags(field string, tags []string) ([]string, error) {
	out := make([]string, 0, len(tags))
	for _, t := range tags {
		if err := ValidateIdentifier(field, t); err != nil {
			return nil, invalid(field, "tag %.32q: 1–%d characters of letters, digits and . _ : -", t, MaxTagLen)
		}
		out = append(out, t)
	}
	slices.Sort(out)
	out = slices.Compact(out)
	if len(out) > MaxTags {
		return nil, invalid(field, "at most %d tags", MaxTags)
	}
	return out, nil
}

// versionTerm is one comparison of a version range, such as ">=1.2.0".
type versionTerm struct {
	op string
	v  Version
}

func (t versionTerm) holds(v Version) bool {
	c := v.Compare(t.v)
	switch t.op {
	case ">=":
		return c >= 0
	case ">":
		return c > 0
	case "<=":
		return c <= 0
	case "<":
		return c < 0
	case "!=":
		return c != 0
	}
	return c == 0
}

// VersionRange is a constraint on a device's current version, as in
// ">=1.2.0 <2.0.0": comparisons (>=, >, <=, <, =, !=; none means =)
// separated by spaces or commas, all of which must hold. The zero range
// holds for every version.
type VersionRange struct {
	raw   string
	terms []versionTerm
}

// ParseVersionRange reads a constraint; "" (no range given) is the zero
// range. A range given holds at least one comparison: " " or "," would
// otherwise read as "every version", turning a narrowing the operator
// meant into the whole fleet.
func ParseVersionRange(field, s string) (VersionRange, error) {
	if len(s) > MaxVersionRangeLen {
		return VersionRange{}, invalid(field, "must be at most %d characters", MaxVersionRangeLen)
	}
	fields := strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == ',' || r == '\t' })
	if s != "" && len(fields) == 0 {
		return VersionRange{}, invalid(field, "holds no comparison: give one such as >=1.2.0, or no range to select every version")
	}
	if len(fields) > maxVersionTerms {
		return VersionRange{}, invalid(field, "at most %d comparisons", maxVersionTerms)
	}
	r := VersionRange{}
	for _, f := range fields {
		op := ""
		for _, o := range []string{">=", "<=", "!=", ">", "<", "="} {
			if strings.HasPrefix(f, o) {
				op = o
				break
			}
		}
		rest := strings.TrimPrefix(f, op)
		if op == "" {
			op = "="
		}
		v, err := ParseVersion(field, rest)
		if err != nil {
			return VersionRange{}, invalid(field, "%.40q is not a comparison such as >=1.2.0", f)
		}
		r.terms = append(r.terms, versionTerm{op: op, v: v})
	}
	if len(r.terms) > 0 {
		parts := make([]string, len(r.terms))
		for i, t := range r.terms {
			parts[i] = t.op + t.v.String()
		}
		r.raw = strings.Join(parts, " ")
	}
	return r, nil
}

// IsZero reports whether the range holds for every version.
func (r VersionRange) IsZero() bool { return len(r.terms) == 0 }

// String is the canonical form ("" for the zero range).
func (r VersionRange) String() string { return r.raw }

// Contains reports whether v satisfies every comparison. A device that
// reported no version satisfies no non-zero range.
func (r VersionRange) Contains(v Version) bool {
	if r.IsZero() {
		return true
	}
	if v.IsZero() {
		return false
	}
	for _, t := range r.terms {
		if !t.holds(v) {
			return false
		}
	}
	return true
}

// DeviceFacts is what a check knows about a device beyond its identity:
// the tags operators put on it and its attributes — the stored ones, with
// what it reported in this very poll laid over them.
type DeviceFacts struct {
	Tags       []string
	Attributes map[string]string
}

// HasTag reports whether the device carries tag.
func (f DeviceFacts) HasTag(tag string) bool { return slices.Contains(f.Tags, tag) }

// SelectorSpec is an operator's targeting request; empty fields select all.
type SelectorSpec struct {
	TagsAll    []string
	TagsAny    []string
	Attributes map[string]string
	Versions   string
}

// Selector narrows a rollout to part of its model's fleet (targeting rule
// T1): the device must carry every tag of TagsAll, at least one of TagsAny
// (when given), have every attribute equal to the given value, and run a
// version inside Versions. The zero Selector selects every device.
type Selector struct {
	tagsAll, tagsAny []string
	attributes       map[string]string
	versions         VersionRange
}

// NewSelector validates a selector spec.
func NewSelector(spec SelectorSpec) (Selector, error) {
	var s Selector
	var err error
	if s.tagsAll, err = ValidateTags("selector.tags_all", spec.TagsAll); err != nil {
		return Selector{}, err
	}
	if s.tagsAny, err = ValidateTags("selector.tags_any", spec.TagsAny); err != nil {
		return Selector{}, err
	}
	if len(spec.Attributes) > MaxSelectorAttrs {
		return Selector{}, invalid("selector.attributes", "at most %d attributes", MaxSelectorAttrs)
	}
	for _, k := range slices.Sorted(maps.Keys(spec.Attributes)) {
		if k == "" || ValidateText("selector.attributes", k, MaxAttributeKeyLen) != nil ||
			ValidateText("selector.attributes", spec.Attributes[k], MaxAttributeValueLen) != nil {
			return Selector{}, invalid("selector.attributes", "attribute %.32q: names 1–%d and values at most %d characters of valid UTF-8 without NUL",
				k, MaxAttributeKeyLen, MaxAttributeValueLen)
		}
	}
	if len(spec.Attributes) > 0 {
		s.attributes = maps.Clone(spec.Attributes)
	}
	if s.versions, err = ParseVersionRange("selector.versions", spec.Versions); err != nil {
		return Selector{}, err
	}
	if len(s.tagsAll) == 0 {
		s.tagsAll = nil
	}
	if len(s.tagsAny) == 0 {
		s.tagsAny = nil
	}
	return s, nil
}

// IsZero reports whether the selector selects every device.
func (s Selector) IsZero() bool {
	return len(s.tagsAll) == 0 && len(s.tagsAny) == 0 && len(s.attributes) == 0 && s.versions.IsZero()
}

// Spec returns the selector as a spec (copies), for storage and display.
func (s Selector) Spec() SelectorSpec {
	return SelectorSpec{TagsAll: slices.Clone(s.tagsAll), TagsAny: slices.Clone(s.tagsAny),
		Attributes: maps.Clone(s.attributes), Versions: s.versions.String()}
}

// Versions is the selector's version range.
func (s Selector) Versions() VersionRange { return s.versions }

// Matches reports whether a device with these facts, reporting version
// reported in this check, is selected.
func (s Selector) Matches(f DeviceFacts, reported Version) bool {
	for _, t := range s.tagsAll {
		if !f.HasTag(t) {
			return false
		}
	}
	if len(s.tagsAny) > 0 && !slices.ContainsFunc(s.tagsAny, f.HasTag) {
		return false
	}
	for k, v := range s.attributes {
		if got, ok := f.Attributes[k]; !ok || got != v {
			return false
		}
	}
	return s.versions.Contains(reported)
}
