package console

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/ai-device/ota/adapters/httpedge"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// The device list: the admin listing (ports.DeviceTargeting.ListDevices)
// with its filters as a form, one keyset page at a time. Last seen is a
// choice of spans, which the listing receives as seen_before = now minus
// the span. The console only reads the form; the use case judges the
// filters, as for the API.

// deviceListPage is how many devices one page of the list shows.
const deviceListPage = "50"

// deviceFilters are the list's filters as typed, kept in the form and in
// the next page's link.
type deviceFilters struct {
	Model, Tags, Attributes, Version string
	// Quiet is how long a device has not been seen, one of quietSpans'
	// keys ("" for any).
	Quiet string
}

// quietSpan is a choice of the list's last-seen filter.
type quietSpan struct {
	Key, Label string
	Span       time.Duration
}

// quietSpans are the last-seen filter's choices: the listing's
// seen_before is now minus the span.
var quietSpans = []quietSpan{
	{"1h", "not seen for an hour", time.Hour},
	{"1d", "not seen for a day", 24 * time.Hour},
	{"7d", "not seen for 7 days", 7 * 24 * time.Hour},
	{"30d", "not seen for 30 days", 30 * 24 * time.Hour},
}

// deviceListData is one page of the device list.
type deviceListData struct {
	Filters deviceFilters
	Items   []ports.DeviceListing
	// Next is the link to the next page, "" on the last.
	Next string
	// Filtered: some filter was given, so an empty page means none match.
	Filtered bool
	// Quiet are the last-seen filter's choices.
	Quiet []quietSpan
}

func readDeviceFilters(q url.Values) deviceFilters {
	return deviceFilters{Model: strings.TrimSpace(q.Get("model")), Tags: strings.TrimSpace(q.Get("tags")), Attributes: q.Get("attributes"),
		Version: strings.TrimSpace(q.Get("version")), Quiet: q.Get("quiet")}
}

// query is the use case's query for f at now, continuing after the given
// cursor. An unknown quiet span is no filter (the select offers no other).
func (f deviceFilters) query(now time.Time, after string) ports.DeviceQuery {
	q := ports.DeviceQuery{Model: f.Model, Tags: words(f.Tags), Version: f.Version, Limit: deviceListPage, After: after}
	for _, s := range quietSpans {
		if s.Key == f.Quiet {
			q.SeenBefore = now.Add(-s.Span).UTC().Format(time.RFC3339)
		}
	}
	for line := range strings.Lines(f.Attributes) {
		if line = strings.TrimSpace(line); line != "" {
			q.Attributes = append(q.Attributes, line)
		}
	}
	return q
}

// link is the list's address for f, continuing after the given cursor.
func (f deviceFilters) link(after string) string {
	return listLink(Prefix+"/devices", map[string]string{"model": f.Model, "tags": f.Tags, "attributes": f.Attributes,
		"version": f.Version, "quiet": f.Quiet, "after": after})
}

// refusedFilter tells a filter the use case refused (a ValidationError)
// from any other error: the refusal is the operator's to fix, so a list
// shows it above itself with the API's status and words, where any other
// error is the page's failure.
func refusedFilter(err error) (status int, msg string, refused bool) {
	var ve *domain.ValidationError
	if !errors.As(err, &ve) {
		return 0, "", false
	}
	desc := httpedge.DescribeError(err)
	return desc.Status, sentence(desc.Message), true
}

// listLink is the address of a page of a filtered list (devices, audit):
// path with every parameter that is not blank. A blank filter filters
// nothing, so it is left out rather than sent back as an empty one, and
// the lists' links stay alike.
func listLink(path string, params map[string]string) string {
	v := url.Values{}
	for k, s := range params {
		if strings.TrimSpace(s) != "" {
			v.Set(k, s)
		}
	}
	if len(v) == 0 {
		return path
	}
	return path + "?" + v.Encode()
}

// deviceList reads one page of the list for r's query. A filter the use
// case refuses is the operator's to fix: it comes back with the API's
// status and words, shown above the list; anything else is an error.
func (c *Console) deviceList(r *http.Request) (deviceListData, int, string, error) {
	q := r.URL.Query()
	d := deviceListData{Filters: readDeviceFilters(q), Quiet: quietSpans}
	if err := httpedge.QueryPairError(r.URL.RawQuery, ""); err != nil { // a filter the parser dropped: refused, as the API does
		status, msg, _ := refusedFilter(err)
		return d, status, msg, nil
	}
	d.Filtered = d.Filters != deviceFilters{}
	page, err := c.admin.ListDevices(r.Context(), d.Filters.query(c.clock.Now(), q.Get("after")))
	if err != nil {
		if status, msg, refused := refusedFilter(err); refused {
			return d, status, msg, nil
		}
		return d, 0, "", err
	}
	d.Items = page.Items
	if page.Next != "" {
		d.Next = d.Filters.link(page.Next)
	}
	return d, http.StatusOK, "", nil
}
