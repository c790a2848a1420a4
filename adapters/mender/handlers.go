package mender

import (
	"encoding/json"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/ai-device/ota/adapters/httpedge"
	menderapp "github.com/ai-device/ota/application/mender"
	"github.com/ai-device/ota/domain"
)

// authenticate answers a device's signed authentication request with a
// session token as the whole body (the client keeps any 200 body as its
// token), or 401 while it is not admitted.
func (a *Adapter) authenticate(c echo.Context) error {
	body, err := readBody(c)
	if err != nil {
		return err
	}
	tok, err := a.svc.Authenticate(c.Request().Context(), menderapp.Auth{
		Body: body, Signature: c.Request().Header.Get("X-MEN-Signature"), Source: sourceOf(c.Request()),
	})
	if err != nil {
		return err
	}
	return c.Blob(http.StatusOK, "application/jwt", []byte(tok))
}

// sourceOf is the budget key of a request's sender: the connecting
// address (never a forwarding header, which the sender writes), an IPv6
// one by its /64 (what one subscriber is given).
func sourceOf(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	ip = ip.Unmap()
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		return p.String()
	}
	return ip.String()
}

// inventoryItem is one {"name", "value"} of an inventory report; the value
// is a string, a list, or another JSON value (kept as its JSON text).
type inventoryItem struct {
	Name  string          `json:"name"`
	Value json.RawMessage `json:"value"`
}

func values(raw json.RawMessage) []string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []string{s}
	}
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) == nil {
		out := make([]string, 0, len(list))
		for _, v := range list {
			out = append(out, values(v)...)
		}
		return out
	}
	if len(raw) == 0 {
		return nil
	}
	return []string{string(raw)}
}

// inventory stores a report: PUT replaces the attributes, PATCH merges.
// Only 200 counts for mender-client.
func (a *Adapter) inventory(replace bool) echo.HandlerFunc {
	return func(c echo.Context) error {
		var items []inventoryItem
		if err := decode(c, &items, "a list of {name, value}"); err != nil {
			return err
		}
		report := make([]domain.InventoryItem, 0, len(items))
		for _, it := range items {
			report = append(report, domain.InventoryItem{Name: it.Name, Values: values(it.Value)})
		}
		if err := a.svc.Inventory(c.Request().Context(), deviceOf(c), report, replace); err != nil {
			return err
		}
		return c.NoContent(http.StatusOK)
	}
}

// provides reads the artifact name and device type out of what the client
// says it provides: strings (or lists whose first element is taken).
type provides map[string]json.RawMessage

func (p provides) get(k string) string {
	if v := values(p[k]); len(v) > 0 {
		return v[0]
	}
	return ""
}

type source struct {
	URI    string `json:"uri"`
	Expire string `json:"expire"`
}

type artifactView struct {
	ID                    string   `json:"id"`
	ArtifactName          string   `json:"artifact_name"`
	Source                source   `json:"source"`
	DeviceTypesCompatible []string `json:"device_types_compatible"`
}

type deploymentView struct {
	ID       string       `json:"id"`
	Artifact artifactView `json:"artifact"`
}

// sourceTTL is how long an offered download link is said to be valid
// (firmware URLs are the operator's; they do not expire here).
const sourceTTL = 24 * time.Hour

func (a *Adapter) next(c echo.Context, p menderapp.Provides) error {
	v, err := a.svc.Next(c.Request().Context(), deviceOf(c), p)
	if err != nil {
		return err
	}
	if v == nil {
		return c.NoContent(http.StatusNoContent)
	}
	spec := v.Firmware.Spec()
	return c.JSON(http.StatusOK, deploymentView{
		ID: v.Task.ID().String(),
		Artifact: artifactView{
			ID: v.Firmware.ID().String(), ArtifactName: spec.ArtifactName,
			Source:                a.source(v.Firmware, deviceOf(c)),
			DeviceTypesCompatible: []string{spec.Model},
		},
	})
}

func (a *Adapter) nextV2(c echo.Context) error {
	var b struct {
		DeviceProvides provides `json:"device_provides"`
	}
	if err := decode(c, &b, `{"device_provides": {"artifact_name", "device_type"}}`); err != nil {
		return err
	}
	return a.next(c, menderapp.Provides{ArtifactName: b.DeviceProvides.get("artifact_name"), DeviceType: b.DeviceProvides.get("device_type")})
}

func (a *Adapter) nextV1Post(c echo.Context) error {
	var b provides
	if err := decode(c, &b, `{"artifact_name", "device_type"}`); err != nil {
		return err
	}
	return a.next(c, menderapp.Provides{ArtifactName: b.get("artifact_name"), DeviceType: b.get("device_type")})
}

func (a *Adapter) nextV1Get(c echo.Context) error {
	// A pair the query's parser would drop reads as no artifact_name: the
	// device would seem to run no known image and its success to be
	// reverted (event rule 7). It is refused instead.
	if err := httpedge.QueryPairError(c.Request().URL.RawQuery, ""); err != nil {
		return err
	}
	q := c.QueryParams()
	return a.next(c, menderapp.Provides{ArtifactName: q.Get("artifact_name"), DeviceType: q.Get("device_type")})
}

// status applies a deployment status: 204, or 409 when the task was
// cancelled or is over (the client aborts).
func (a *Adapter) status(c echo.Context) error {
	var b struct {
		Status   *string `json:"status"`
		Substate string  `json:"substate"`
	}
	if err := decode(c, &b, `{"status", "substate"?}`); err != nil {
		return err
	}
	if b.Status == nil {
		return &domain.ValidationError{Field: "status", Reason: "is required"}
	}
	if err := a.svc.Status(c.Request().Context(), deviceOf(c), pathUUID(c, "id"), *b.Status); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// log keeps the deployment log the device uploads (after a failure).
func (a *Adapter) log(c echo.Context) error {
	var b struct {
		Messages []struct {
			Level     string          `json:"level"`
			Message   string          `json:"message"`
			Timestamp json.RawMessage `json:"timestamp"`
		} `json:"messages"`
	}
	body, err := readBodyWithin(c, maxLogBody)
	if err != nil {
		return err
	}
	if err := decodeBytes(body, &b, `{"messages": [{"level", "message", "timestamp"}]}`); err != nil {
		return err
	}
	lines := make([]domain.LogLine, 0, len(b.Messages))
	for _, m := range b.Messages {
		ts := strings.Join(values(m.Timestamp), ",")
		lines = append(lines, domain.LogLine{Level: m.Level, Message: m.Message, Timestamp: ts})
	}
	if err := a.svc.Log(c.Request().Context(), deviceOf(c), pathUUID(c, "id"), lines); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// ---- operators ----

// decodeOperatorBody reads an operator's JSON body into v. A declared
// media type other than JSON is 415, and a field v does not know refuses
// the whole body, as on the REST API's admin routes: a typo must not pass
// as a default.
func decodeOperatorBody(c echo.Context, body []byte, v any, shape string) error {
	if ct := c.Request().Header.Get(echo.HeaderContentType); ct != "" && !strings.HasPrefix(ct, echo.MIMEApplicationJSON) {
		return echo.ErrUnsupportedMediaType
	}
	if err := decodeBytes(body, v, shape); err != nil {
		return err
	}
	return httpedge.KnownFieldsOnly(body, v)
}

// PendingView is a device waiting to be admitted, as operators see it.
type PendingView struct {
	ID             string `json:"id"`
	DeviceID       string `json:"device_id"`
	IDData         string `json:"id_data"`
	PublicKey      string `json:"public_key"`
	KeyFingerprint string `json:"key_fingerprint"`
	DeviceType     string `json:"device_type,omitempty"`
	Status         string `json:"status"`
	CreatedAt      string `json:"created_at"`
	UpdatedAt      string `json:"updated_at"`
	// Registered is set when the device is registered already: accepting
	// then needs replace_key.
	Registered *RegisteredView `json:"registered,omitempty"`
}

// RegisteredView is the registered device a pending request names.
type RegisteredView struct {
	Model string `json:"model"`
	// KeyFingerprint is the admitted key's ("" when it has none).
	KeyFingerprint     string `json:"key_fingerprint,omitempty"`
	DeviceTypeMismatch bool   `json:"device_type_mismatch"`
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func pendingView(r domain.AuthRequest) PendingView {
	return PendingView{
		ID: r.ID().String(), DeviceID: r.DeviceID().String(), IDData: r.Identity(), PublicKey: r.Key().PEM(),
		KeyFingerprint: r.Key().Fingerprint(), DeviceType: r.DeviceType(), Status: r.Status().String(),
		CreatedAt: stamp(r.CreatedAt()), UpdatedAt: stamp(r.UpdatedAt()),
	}
}

func (a *Adapter) listPending(c echo.Context) error {
	rs, err := a.admin.Pending(c.Request().Context())
	if err != nil {
		return err
	}
	items := make([]PendingView, 0, len(rs))
	for _, r := range rs {
		v := pendingView(r.Request)
		if k := r.Conflict; k != nil {
			v.Registered = &RegisteredView{Model: k.RegisteredModel, DeviceTypeMismatch: k.DeviceTypeMismatch}
			if !k.AdmittedKey.IsZero() {
				v.Registered.KeyFingerprint = k.AdmittedKey.Fingerprint()
			}
		}
		items = append(items, v)
	}
	return c.JSON(http.StatusOK, map[string]any{"items": items})
}

// AcceptedView is the device an operator admitted.
type AcceptedView struct {
	DeviceID  string `json:"device_id"`
	Model     string `json:"model"`
	CreatedAt string `json:"created_at"`
}

// accept admits a pending device; the body {"model", "replace_key"} is
// optional when the device's identity data names its device_type and the
// device is not registered yet.
func (a *Adapter) accept(c echo.Context) error {
	body, err := readBody(c)
	if err != nil {
		return err
	}
	var b struct {
		Model      *string `json:"model"`
		ReplaceKey bool    `json:"replace_key"`
	}
	if len(strings.TrimSpace(string(body))) > 0 {
		if err := decodeOperatorBody(c, body, &b, `{"model"?, "replace_key"?}`); err != nil {
			return err
		}
	}
	req := menderapp.AcceptRequest{ReplaceKey: b.ReplaceKey}
	if b.Model != nil {
		req.Model = *b.Model
	}
	d, err := a.admin.Accept(c.Request().Context(), httpedge.ActorIn(c), pathUUID(c, "id"), req)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, AcceptedView{DeviceID: d.ID().String(), Model: d.Model(), CreatedAt: stamp(d.CreatedAt())})
}

func (a *Adapter) reject(c echo.Context) error {
	r, err := a.admin.Reject(c.Request().Context(), httpedge.ActorIn(c), pathUUID(c, "id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, pendingView(r))
}

// deletePending deletes a request, pending or rejected.
func (a *Adapter) deletePending(c echo.Context) error {
	if err := a.admin.Delete(c.Request().Context(), httpedge.ActorIn(c), pathUUID(c, "id")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// LogLineView is one line of a task's device log.
type LogLineView struct {
	Level     string `json:"level"`
	Message   string `json:"message"`
	Timestamp string `json:"timestamp"`
}

func (a *Adapter) taskLog(c echo.Context) error {
	l, err := a.admin.TaskLog(c.Request().Context(), pathUUID(c, "id"))
	if err != nil {
		return err
	}
	lines := make([]LogLineView, 0, len(l.Lines()))
	for _, x := range l.Lines() {
		lines = append(lines, LogLineView(x))
	}
	return c.JSON(http.StatusOK, map[string]any{"task_id": l.TaskID().String(), "messages": lines, "updated_at": stamp(l.UpdatedAt())})
}

// KeyView is a device's admission, as operators see it (the key itself is
// the operator's to know; its fingerprint identifies it).
type KeyView struct {
	DeviceID        string `json:"device_id"`
	KeyFingerprint  string `json:"key_fingerprint"`
	TokenGeneration int64  `json:"token_generation"`
	UpdatedAt       string `json:"updated_at"`
}

// setKey preauthorizes a registered device with {"public_key"}, or
// rotates its key.
func (a *Adapter) setKey(c echo.Context) error {
	body, err := readBody(c)
	if err != nil {
		return err
	}
	var b struct {
		PublicKey *string `json:"public_key"`
	}
	if err := decodeOperatorBody(c, body, &b, `{"public_key"}`); err != nil {
		return err
	}
	if b.PublicKey == nil {
		return &domain.ValidationError{Field: "public_key", Reason: "is required"}
	}
	adm, err := a.admin.SetKey(c.Request().Context(), httpedge.ActorIn(c), pathDeviceID(c), *b.PublicKey)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, KeyView{DeviceID: adm.DeviceID().String(), KeyFingerprint: adm.Key().Fingerprint(),
		TokenGeneration: adm.Generation(), UpdatedAt: stamp(adm.UpdatedAt())})
}
