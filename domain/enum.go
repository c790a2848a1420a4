package domain

import "strings"

// enum is one of the small closed sets of named values (statuses, modes,
// formats) whose zero value means "none".
type enum interface {
	comparable
	String() string
}

// named reads s as one of all, the values of one enum. It is the one
// parser of these enums, so that each lists its values once and its
// refusal names exactly the values it accepts: "must be a, b or c", or
// "must be one of a, b, c, d" for longer lists.
func named[T enum](field, s string, all ...T) (T, error) {
	names := make([]string, len(all))
	for i, v := range all {
		if v.String() == s {
			return v, nil
		}
		names[i] = v.String()
	}
	var none T
	if len(names) > 3 {
		return none, invalid(field, "must be one of %s", strings.Join(names, ", "))
	}
	last := len(names) - 1
	return none, invalid(field, "must be %s or %s", strings.Join(names[:last], ", "), names[last])
}

// namedOr reads s as named does, except that an empty s reads as empty.
// It serves the enums whose stored or reported value may be left out (not
// paused, a stage still running, hawkBit's default mode), so that each
// names only what "" stands for.
func namedOr[T enum](field, s string, empty T, all ...T) (T, error) {
	if s == "" {
		return empty, nil
	}
	return named(field, s, all...)
}
