package httpedge

import (
	"net/url"
	"strings"

	"github.com/ai-device/ota/domain"
)

// QueryPairError refuses a query parameter the query's parser would drop
// (url.ParseQuery): a value that is not valid percent-encoding (`%zz`) or
// that holds a raw `;`. Dropped, it would read as absent — a default page,
// a filter silently ignored — where the client sent a bad value. name
// picks the parameter ("": any); the error names it.
func QueryPairError(rawQuery, name string) error {
	for pair := range strings.SplitSeq(rawQuery, "&") {
		if pair == "" {
			continue
		}
		k, v, _ := strings.Cut(pair, "=")
		key, err := url.QueryUnescape(k)
		if err != nil {
			key = k
		}
		if name != "" && key != name {
			continue
		}
		if _, err := url.QueryUnescape(v); err != nil {
			return &domain.ValidationError{Field: key, Reason: "is not valid percent-encoding"}
		}
		if strings.Contains(pair, ";") {
			return &domain.ValidationError{Field: key, Reason: "must not hold a raw ';' (send it encoded, %3B)"}
		}
	}
	return nil
}
