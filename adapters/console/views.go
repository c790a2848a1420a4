package console

import (
	"fmt"
	"html/template"
	"math"
	"time"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// The view models the templates render. Geometry for the SVG charts is
// computed here, in Go, so the browser needs no charting code.

// segment is one status's share of a stacked progress bar, in percent of
// the bar's width.
type segment struct {
	Status string
	Count  int
	X, W   float64
}

// barView is a rollout's tasks as a stacked bar and its counts.
type barView struct {
	Total    int
	Segments []segment // only statuses with tasks, in barOrder
	Counts   []segment // every status, in barOrder, for the legend
}

// barOrder puts finished work first, then work in flight, then what went
// wrong, so the bar grows from the left as the rollout progresses.
var barOrder = []string{"succeeded", "installing", "downloaded", "downloading", "pending", "failed", "cancelled"}

func statsByStatus(s domain.TaskStats) map[string]int {
	return map[string]int{
		"pending": s.Pending, "downloading": s.Downloading, "downloaded": s.Downloaded, "installing": s.Installing,
		"succeeded": s.Succeeded, "failed": s.Failed, "cancelled": s.Cancelled,
	}
}

func newBar(s domain.TaskStats) barView {
	counts := statsByStatus(s)
	var b barView
	for _, st := range barOrder {
		b.Total += counts[st]
	}
	x := 0.0
	for _, st := range barOrder {
		n := counts[st]
		b.Counts = append(b.Counts, segment{Status: st, Count: n})
		if n == 0 || b.Total == 0 {
			continue
		}
		w := 100 * float64(n) / float64(b.Total)
		b.Segments = append(b.Segments, segment{Status: st, Count: n, X: x, W: w})
		x += w
	}
	return b
}

// rolloutRow is one row of the rollout listing.
type rolloutRow struct {
	ID, Model, Version string
	Percentage         int
	Status             string
	AutoPaused         bool
	CreatedAt          time.Time
	Bar                barView
	// Revoked: its firmware is revoked, whatever Status says.
	Revoked bool
	// The policy in a few words: "stage 2 of 3", the selector, and what
	// the rollout waits for ("" when there is nothing to say).
	Stage, Selector, Waits string
}

// newRolloutRow is r's row; fw is its firmware as stored now (the listing
// names only its model and version).
func newRolloutRow(r ports.RolloutSummary, fw domain.Firmware, now time.Time) rolloutRow {
	ro := r.Rollout
	row := rolloutRow{
		ID: ro.ID().String(), Model: r.Model, Version: r.Version, Percentage: ro.Percentage(),
		Status: statusLabel(ro), AutoPaused: ro.PausedReason() == domain.PausedAuto,
		CreatedAt: ro.CreatedAt(), Bar: newBar(r.Stats),
		Selector: selectorHint(ro.Selector().Spec()),
		// The listing counts no stage: the hint says which gate, not how far.
		Waits:   waitHint(ro.WaitingFor(now, fw, nil)),
		Revoked: fw.Revoked(),
	}
	if n := len(ro.Stages()); n > 0 {
		row.Stage = fmt.Sprintf("stage %d of %d", ro.Stage()+1, n)
	}
	return row
}

func statusLabel(r domain.Rollout) string {
	if reason := r.PausedReason().String(); reason != "" {
		return r.Status().String() + " (" + reason + ")"
	}
	return r.Status().String()
}

// failureRate is a rollout's failed share of finished tasks, shown beside
// its threshold. Whether the threshold was reached is the domain's call
// (the rollout pauses itself, and its status says so); the page only shows
// the numbers.
type failureRate struct {
	Finished  int
	Failed    int
	Percent   float64
	Threshold *int
	MinSample int
}

func newFailureRate(r domain.Rollout, s domain.TaskStats) failureRate {
	fr := failureRate{Finished: s.Succeeded + s.Failed, Failed: s.Failed, Threshold: r.FailureThresholdPercent(), MinSample: r.MinSample()}
	if fr.Finished > 0 {
		fr.Percent = 100 * float64(fr.Failed) / float64(fr.Finished)
	}
	return fr
}

// chartRow is one version's bar in a model's chart.
type chartRow struct {
	Label   string
	Devices int
	Newest  bool
	Y, W    float64 // top edge, bar width in chart units
}

// chartView is a horizontal bar chart of devices per version.
type chartView struct {
	Width, Height float64
	LabelW, BarW  float64
	Rows          []chartRow
}

// Chart geometry, in SVG user units.
const (
	chartRowH   = 26
	chartBarH   = 18
	chartLabelW = 120
	chartBarW   = 360
	chartCountW = 70
)

func newChart(m ports.ModelFleet) chartView {
	c := chartView{LabelW: chartLabelW, BarW: chartBarW, Width: chartLabelW + chartBarW + chartCountW}
	most := 0
	for _, v := range m.Versions {
		most = max(most, v.Devices)
	}
	newest := ""
	if v, err := domain.ParseVersion("newest_version", m.NewestVersion); err == nil {
		newest = v.Key() // the versions are grouped by precedence
	}
	for i, v := range m.Versions {
		label := v.Version
		if label == "" {
			label = "not reported"
		}
		w := 0.0
		if most > 0 {
			w = math.Max(1, chartBarW*float64(v.Devices)/float64(most))
		}
		c.Rows = append(c.Rows, chartRow{Label: label, Devices: v.Devices, Newest: v.Version != "" && v.Version == newest,
			Y: float64(i * chartRowH), W: w})
	}
	c.Height = float64(max(1, len(c.Rows)) * chartRowH)
	return c
}

// modelView is one model's card on the fleet page.
type modelView struct {
	ports.ModelFleet
	Share string // on the newest version, "–" without devices or release
	Chart chartView
}

func newModelView(m ports.ModelFleet) modelView {
	share := "–"
	if m.Devices > 0 && m.NewestVersion != "" {
		share = fmt.Sprintf("%.0f%%", 100*float64(m.OnNewest)/float64(m.Devices))
	}
	return modelView{ModelFleet: m, Share: share, Chart: newChart(m)}
}

func (c *Console) funcs() template.FuncMap {
	return template.FuncMap{
		"ts": func(t time.Time) string {
			if t.IsZero() {
				return "never"
			}
			return t.UTC().Format("2006-01-02 15:04:05 UTC")
		},
		"ago": func(t time.Time) string {
			if t.IsZero() {
				return "never"
			}
			return ago(c.clock.Now().Sub(t))
		},
		"pct": func(f float64) string { return fmt.Sprintf("%.1f%%", f) },
		"short": func(s string) string {
			if len(s) > 8 {
				return s[:8]
			}
			return s
		},
		"bytes": humanBytes,
		"add":   func(a, b float64) float64 { return a + b },
		"add1":  func(i int) int { return i + 1 },
		"num":   func(f float64) string { return fmt.Sprintf("%.2f", f) },
		"field": func(name, label string, values, errs map[string]string, required string) formField {
			return formField{Name: name, Label: label, Value: values[name], Error: errs[name], Required: required != ""}
		},
	}
}

// formField is one text input of a form, with its error beside it.
type formField struct {
	Name, Label, Value, Error string
	Required                  bool
}

// ago says how long ago, roughly, in the largest whole unit.
func ago(d time.Duration) string {
	switch {
	case d < time.Minute:
		return "just now"
	case d < time.Hour:
		return fmt.Sprintf("%d min ago", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%d h ago", int(d/time.Hour))
	}
	return fmt.Sprintf("%d days ago", int(d/(24*time.Hour)))
}

func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
