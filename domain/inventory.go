package domain

import (
	"maps"
	"slices"
	"strings"
	"unicode/utf8"
)

// InventoryItem is one attribute of a device's inventory report: a name
// and its values (Mender sends lists for some, such as device_type).
type InventoryItem struct {
	Name   string
	Values []string
}

// FitInventory turns an inventory report into device attributes within
// their bounds, dropping rather than refusing what does not fit: a device
// whose inventory is refused polls for nothing, so an oversized report must
// still be stored. Lists are joined with ","; values are cut to
// MaxAttributeValueLen bytes (on a character boundary, invalid UTF-8 and
// NUL replaced); names that are empty or too long are dropped; of more
// than MaxAttributes names, device_type and artifact_name are kept first,
// then the others in name order. A repeated name keeps its last value.
func FitInventory(items []InventoryItem) map[string]string {
	all := map[string]string{}
	for _, it := range items {
		if it.Name == "" || len(it.Name) > MaxAttributeKeyLen || ValidateText("name", it.Name, MaxAttributeKeyLen) != nil {
			continue
		}
		all[it.Name] = clip(strings.Join(it.Values, ","), MaxAttributeValueLen)
	}
	if len(all) <= MaxAttributes {
		return all
	}
	out := map[string]string{}
	for _, k := range []string{"device_type", "artifact_name"} {
		if v, ok := all[k]; ok {
			out[k] = v
		}
	}
	for _, k := range slices.Sorted(maps.Keys(all)) {
		if len(out) == MaxAttributes {
			break
		}
		out[k] = all[k]
	}
	return out
}

// clip makes s storable text of at most max bytes.
func clip(s string, max int) string {
	s = strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", " ")
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}
