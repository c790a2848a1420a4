package console_test

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ai-device/ota/ports"
)

var deviceRow = regexp.MustCompile(`<tr id="device-([^"]+)">`)

// listed is the device ids a list page shows, in order.
func listed(body string) []string {
	var ids []string
	for _, m := range deviceRow.FindAllStringSubmatch(body, -1) {
		ids = append(ids, m[1])
	}
	return ids
}

// nextLink is the list page's "next" link, "" when there is none.
func nextLink(body string) string {
	m := regexp.MustCompile(`<a href="([^"]+)" id="devices-next"`).FindStringSubmatch(body)
	if m == nil {
		return ""
	}
	return html.UnescapeString(m[1])
}

// The devices page lists devices with the admin listing's filters (model,
// tags, attributes, version, last seen), a keyset page at a time with a "next" link that keeps
// the filters, each device linking to its own page; the navigation leads
// there. A filter the use case refuses is shown with its words and 400.
func TestDeviceListFiltersAndPages(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	for i := 1; i <= 52; i++ {
		id := fmt.Sprintf("cam-%02d", i)
		if _, err := e.admin.RegisterDevice(ctx, testActor, ports.RegisterDevice{DeviceID: id, Model: "cam", CurrentVersion: "1.1.0"}); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"dome-1", "dome-2"} {
		if _, err := e.admin.RegisterDevice(ctx, testActor, ports.RegisterDevice{DeviceID: id, Model: "dome"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.admin.SetDeviceTags(ctx, testActor, asDeviceID("cam-07"), []string{"lab", "beta"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.admin.SetDeviceTags(ctx, testActor, asDeviceID("cam-08"), []string{"lab"}); err != nil {
		t.Fatal(err)
	}
	ident, err := e.devices.IdentifyDevice(ctx, asDeviceID("dome-2"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.devices.Check(ctx, ports.CheckRequest{Device: ident, Model: "dome", CurrentVersion: "3.0.0",
		Attributes: map[string]string{"hw_rev": "B"}}); err != nil {
		t.Fatal(err)
	}
	e.mustSignIn()

	if !strings.Contains(e.get("/console/").body, `<a href="/console/devices"`) {
		t.Error("the navigation does not lead to the device list")
	}
	first := e.get("/console/devices")
	wantStatus(t, "first page", first, http.StatusOK)
	ids := listed(first.body)
	if len(ids) != 50 || ids[0] != "cam-01" || ids[49] != "cam-50" {
		t.Fatalf("first page = %v", ids)
	}
	wantBody(t, "first page", first, `<a href="/console/devices?id=cam-01">cam-01</a>`, "1.1.0", "never")
	next := nextLink(first.body)
	if next != "/console/devices?after=cam-50" {
		t.Fatalf("next link = %q", next)
	}
	second := e.get(next)
	if ids := listed(second.body); strings.Join(ids, " ") != "cam-51 cam-52 dome-1 dome-2" {
		t.Errorf("second page = %v", ids)
	}
	if l := nextLink(second.body); l != "" {
		t.Errorf("the last page links to %q", l)
	}
	wantBody(t, "second page", second, "3.0.0", "just now", "not reported")

	byModel := e.get("/console/devices?model=dome")
	if ids := listed(byModel.body); strings.Join(ids, " ") != "dome-1 dome-2" {
		t.Errorf("model=dome lists %v", ids)
	}
	wantBody(t, "model filter kept in the form", byModel, `id="filter-model" name="model" value="dome"`)
	if ids := listed(e.get("/console/devices?tags=" + url.QueryEscape("lab, beta")).body); strings.Join(ids, " ") != "cam-07" {
		t.Errorf("tags lab+beta list %v", ids)
	}
	if ids := listed(e.get("/console/devices?tags=lab").body); strings.Join(ids, " ") != "cam-07 cam-08" {
		t.Errorf("tag lab lists %v", ids)
	}
	if ids := listed(e.get("/console/devices?attributes=" + url.QueryEscape("hw_rev=B\n")).body); strings.Join(ids, " ") != "dome-2" {
		t.Errorf("hw_rev=B lists %v", ids)
	}
	none := e.get("/console/devices?model=nothing")
	wantBody(t, "no match", none, "No device matches these filters.")

	// The next link keeps the filters.
	filtered := e.get("/console/devices?model=cam")
	if l := nextLink(filtered.body); l != "/console/devices?after=cam-50&model=cam" {
		t.Errorf("filtered next link = %q", l)
	}
	if ids := listed(e.get("/console/devices?after=cam-50&model=cam").body); strings.Join(ids, " ") != "cam-51 cam-52" {
		t.Errorf("filtered second page = %v", ids)
	}

	// By version, and by how long a device has been quiet (never seen
	// counts as quiet): dome-2 reported 3.0.0 just now.
	if ids := listed(e.get("/console/devices?version=3.0.0").body); strings.Join(ids, " ") != "dome-2" {
		t.Errorf("version 3.0.0 lists %v", ids)
	}
	byVersion := e.get("/console/devices?version=1.1.0")
	if l := nextLink(byVersion.body); l != "/console/devices?after=cam-50&version=1.1.0" {
		t.Errorf("next link by version = %q", l)
	}
	if ids := listed(e.get("/console/devices?model=dome&quiet=1h").body); strings.Join(ids, " ") != "dome-1" {
		t.Errorf("domes quiet for an hour: %v", ids)
	}
	e.clock.advance(2 * time.Hour)
	quiet := e.get("/console/devices?model=dome&quiet=1h")
	if ids := listed(quiet.body); strings.Join(ids, " ") != "dome-1 dome-2" {
		t.Errorf("domes quiet for an hour, two hours on: %v", ids)
	}
	wantBody(t, "quiet filter kept in the form", quiet, `<option value="1h" selected>`)
	bv := e.get("/console/devices?version=1.0")
	wantStatus(t, "bad version", bv, http.StatusBadRequest)
	wantBody(t, "bad version", bv, `class="error" role="alert">Version:`)

	bad := e.get("/console/devices?tags=" + url.QueryEscape("no/slash"))
	wantStatus(t, "bad tag", bad, http.StatusBadRequest)
	wantBody(t, "bad tag", bad, `class="error" role="alert">Tag: tag &#34;no/slash&#34;: 1–64 characters`, `id="filter-tags" name="tags" value="no/slash"`)
	if len(listed(bad.body)) != 0 {
		t.Error("a refused filter listed devices")
	}
}
