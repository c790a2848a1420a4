package console

import (
	"errors"
	"net/http"
	"net/url"
	"strings"

	httpadapter "github.com/ai-device/ota/adapters/http"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// The device list: the admin listing (ports.DeviceTargeting.ListDevices)
// with its filters as a form, one keyset page at a time. The console only
// reads the form; the use case judges the filters, as for the API.

// deviceListPage is how many devices one page of the list shows.
const deviceListPage = "50"

// deviceFilters are the list's filters as typed, kept in the form and in
// the next page's link.
type deviceFilters struct {
	Model, Tags, Attributes string
}

// deviceListData is one page of the device list.
type deviceListData struct {
	Filters deviceFilters
	Items   []ports.DeviceListing
	// Next is the link to the next page, "" on the last.
	Next string
	// Filtered: some filter was given, so an empty page means none match.
	Filtered bool
}

func readDeviceFilters(q url.Values) deviceFilters {
	return deviceFilters{Model: strings.TrimSpace(q.Get("model")), Tags: strings.TrimSpace(q.Get("tags")), Attributes: q.Get("attributes")}
}

// query is the use case's query for f, continuing after the given cursor.
func (f deviceFilters) query(after string) ports.DeviceQuery {
	q := ports.DeviceQuery{Model: f.Model, Tags: words(f.Tags), Limit: deviceListPage, After: after}
	for line := range strings.Lines(f.Attributes) {
		if line = strings.TrimSpace(line); line != "" {
			q.Attributes = append(q.Attributes, line)
		}
	}
	return q
}

// link is the list's address for f, continuing after the given cursor.
func (f deviceFilters) link(after string) string {
	v := url.Values{}
	for k, s := range map[string]string{"model": f.Model, "tags": f.Tags, "attributes": f.Attributes, "after": after} {
		if strings.TrimSpace(s) != "" {
			v.Set(k, s)
		}
	}
	if len(v) == 0 {
		return Prefix + "/devices"
	}
	return Prefix + "/devices?" + v.Encode()
}

// deviceList reads one page of the list for r's query. A filter the use
// case refuses is the operator's to fix: it comes back with the API's
// status and words, shown above the list; anything else is an error.
func (c *Console) deviceList(r *http.Request) (deviceListData, int, string, error) {
	q := r.URL.Query()
	d := deviceListData{Filters: readDeviceFilters(q)}
	d.Filtered = d.Filters != deviceFilters{}
	page, err := c.admin.ListDevices(r.Context(), d.Filters.query(q.Get("after")))
	if err != nil {
		var ve *domain.ValidationError
		if errors.As(err, &ve) {
			desc := httpadapter.DescribeError(err)
			return d, desc.Status, sentence(desc.Message), nil
		}
		return d, 0, "", err
	}
	d.Items = page.Items
	if page.Next != "" {
		d.Next = d.Filters.link(page.Next)
	}
	return d, http.StatusOK, "", nil
}
