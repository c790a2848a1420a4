package rest

import (
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/ai-device/ota/ports"

	"github.com/ai-device/ota/adapters/httpedge"
)

// Option adds an optional part to the server NewServer builds.
type Option func(*extensions)

// extensions are the optional parts of the server.
type extensions struct {
	fleet     ports.FleetService
	artifacts ports.ArtifactService // artifacts.go
	accounts  ports.AccountService  // accounts.go
	signIn    ports.RateLimiter     // the password route's budget (permissions.go)
	audit     ports.AuditService    // audit.go
	webhooks  ports.WebhookService  // webhooks.go
	mounts    []mount
	// downloads and publicURL serve hosted artifacts (downloads.go).
	downloads ports.DownloadService
	publicURL string
}

// mount is another adapter's http.Handler served under a path prefix.
type mount struct {
	prefix string
	h      http.Handler
}

// WithFleet serves the fleet views of the admin API: the rollout listing
// (GET /admin/rollouts), a rollout's recent failures (GET
// /admin/rollouts/{id}/failures) and the fleet overview (GET /admin/fleet).
func WithFleet(f ports.FleetService) Option {
	return func(x *extensions) { x.fleet = f }
}

// WithMount serves h at prefix and everything below it (prefix "/console"
// serves "/console" and "/console/..."), for every method. The request id,
// access log, request metrics and panic recovery apply as to the API, but
// h answers every request itself, errors included: the API's JSON error
// handler never sees them, so a page can answer in HTML.
func WithMount(prefix string, h http.Handler) Option {
	return func(x *extensions) {
		x.mounts = append(x.mounts, mount{prefix: strings.TrimSuffix(prefix, "/"), h: h})
	}
}

func (s *server) addFleetRoutes(admin httpedge.AddRoute) {
	if s.ext.fleet == nil {
		return
	}
	admin(http.MethodGet, "/rollouts", s.listRollouts)
	admin(http.MethodGet, "/rollouts/:id/failures", s.rolloutFailures)
	admin(http.MethodGet, "/fleet", s.fleetOverview)
}

// mountMethods are the methods a mounted handler receives; it answers
// those it does not serve itself (405 in its own format).
var mountMethods = []string{
	http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
	http.MethodDelete, http.MethodOptions,
}

func (s *server) addMounts(root httpedge.AddRoute) {
	for _, m := range s.ext.mounts {
		h := echo.WrapHandler(m.h)
		for _, method := range mountMethods {
			root(method, m.prefix, h)
			root(method, m.prefix+"/*", h)
		}
	}
}

func (s *server) listRollouts(c echo.Context) error {
	var q ports.RolloutQuery
	if err := queryParams(c, []queryField{{"model", &q.Model}, {"limit", &q.Limit}}); err != nil {
		return err
	}
	list, err := s.ext.fleet.ListRollouts(c.Request().Context(), q)
	if err != nil {
		return err
	}
	return itemsOf(c, list, newRolloutSummaryView)
}

func (s *server) rolloutFailures(c echo.Context) error {
	limit, err := queryParam(c, "limit")
	if err != nil {
		return err
	}
	tasks, err := s.ext.fleet.RecentFailures(c.Request().Context(), pathUUID(c, "id"), limit)
	if err != nil {
		return err
	}
	return itemsOf(c, tasks, newAdminTaskView)
}

func (s *server) fleetOverview(c echo.Context) error {
	model, err := queryParam(c, "model")
	if err != nil {
		return err
	}
	fleet, err := s.ext.fleet.FleetOverview(c.Request().Context(), model)
	if err != nil {
		return err
	}
	return itemsOf(c, fleet, newModelFleetView)
}

// rolloutSummaryView is a rollout with its stats and its firmware's model
// and version, one row of the rollout listing.
type rolloutSummaryView struct {
	rolloutView
	Model   string `json:"model"`
	Version string `json:"version"`
}

func newRolloutSummaryView(r ports.RolloutSummary) rolloutSummaryView {
	return rolloutSummaryView{
		rolloutView: newRolloutStatsView(ports.RolloutView{Rollout: r.Rollout, Stats: r.Stats}),
		Model:       r.Model, Version: r.Version,
	}
}

// modelFleetView is one model's fleet at a glance.
type modelFleetView struct {
	Model          string             `json:"model"`
	Devices        int                `json:"devices"`
	PolledLastHour int                `json:"polled_last_hour"`
	PolledLastDay  int                `json:"polled_last_day"`
	NewestVersion  *string            `json:"newest_version"`
	OnNewest       int                `json:"on_newest"`
	Versions       []versionShareView `json:"versions"`
}

// versionShareView counts a version's devices; a null version stands for
// devices that never reported one.
type versionShareView struct {
	Version *string `json:"version"`
	Devices int     `json:"devices"`
}

func newModelFleetView(m ports.ModelFleet) modelFleetView {
	return modelFleetView{
		Model: m.Model, Devices: m.Devices, PolledLastHour: m.PolledLastHour, PolledLastDay: m.PolledLastDay,
		NewestVersion: optString(m.NewestVersion), OnNewest: m.OnNewest,
		Versions: viewsOf(m.Versions, func(vs ports.VersionShare) versionShareView {
			return versionShareView{Version: optString(vs.Version), Devices: vs.Devices}
		}),
	}
}
