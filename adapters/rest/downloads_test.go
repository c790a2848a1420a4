package rest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/ai-device/ota/adapters/httpedge"
	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// The download rig: the real download use case over in-test stores, the
// REST server's fake device services for authentication (every device is
// of model cam-x1).

const (
	publicURL       = "https://ota.example.com/base"
	hostedFwID      = "0c9e2a44-5b1e-4d8a-9f6e-6a2f3b4c5d6e"
	otherModelFwID  = "1d0f3b55-6c2f-4e9b-8a7f-7b3a4c5d6e7f"
	externalFwID    = "2e1a4c66-7d3a-4fac-9b8a-8c4b5d6e7f80"
	hostedArtID     = "3f2b5d77-8e4b-4abd-8c9b-9d5c6e7f8091"
	otherArtID      = "4a3c6e88-9f5c-4bce-9dac-ae6d7f8091a2"
	hostedFileName  = `cam x1 "beta".swu`
	dispositionWant = `attachment; filename="cam x1 \"beta\".swu"`
)

type dlRig struct {
	e    *echo.Echo
	arts dlArtifacts
	dl   *application.Downloads
	body []byte
	sha  string
	fws  map[string]domain.Firmware
	now  time.Time
}

func (r *dlRig) Get(_ context.Context, id domain.UUID) (domain.Firmware, error) {
	if fw, ok := r.fws[id.String()]; ok {
		return fw, nil
	}
	return domain.Firmware{}, domain.ErrNotFound
}

type dlDevices map[string]domain.Device

func (d dlDevices) Get(_ context.Context, id domain.DeviceID) (domain.Device, error) {
	if dev, ok := d[id.String()]; ok {
		return dev, nil
	}
	return domain.Device{}, domain.ErrNotFound
}

type dlArtifacts map[string]domain.Artifact

func (a dlArtifacts) Get(_ context.Context, id domain.UUID) (domain.Artifact, error) {
	if art, ok := a[id.String()]; ok {
		return art, nil
	}
	return domain.Artifact{}, domain.ErrNotFound
}

// dlBlobs holds objects in memory; reads through Seek, as a store does.
type dlBlobs map[string][]byte

type dlObject struct {
	*bytes.Reader
	mod time.Time
}

func (o dlObject) Close() error       { return nil }
func (o dlObject) ModTime() time.Time { return o.mod }

func (b dlBlobs) Put(context.Context, string, io.Reader) (int64, error) { panic("not used") }
func (b dlBlobs) Delete(context.Context, string) error                  { panic("not used") }
func (b dlBlobs) Presign(context.Context, string, time.Duration) (string, error) {
	return "", ports.ErrPresignUnsupported
}
func (b dlBlobs) Open(_ context.Context, key string) (ports.BlobObject, error) {
	data, ok := b[key]
	if !ok {
		return nil, domain.ErrNotFound
	}
	return dlObject{Reader: bytes.NewReader(data), mod: testTime}, nil
}

type fixedClock struct{ r *dlRig }

func (c fixedClock) Now() time.Time { return c.r.now }

func firmwareOf(t *testing.T, id, model string, status domain.FirmwareStatus, art string, sum [32]byte, size int) domain.Firmware {
	t.Helper()
	spec := domain.FirmwareSpec{Model: model, Version: "1.4.0", SizeBytes: int64(size), SHA256: hex.EncodeToString(sum[:])}
	if art != "" {
		spec.ArtifactID, _ = domain.ParseUUID("artifact_id", art)
	} else {
		spec.URL = "https://cdn.example.com/fw.bin"
	}
	fw, err := domain.RehydrateFirmware(id, spec, status, testTime, testTime)
	if err != nil {
		t.Fatal(err)
	}
	return fw
}

func newDownloadRig(t *testing.T) *dlRig {
	t.Helper()
	return newDownloadRigOf(t, 100_000)
}

// newDownloadRigOf is newDownloadRig with an image of size bytes.
func newDownloadRigOf(t *testing.T, size int) *dlRig {
	t.Helper()
	r := &dlRig{now: time.Now()}
	r.body = make([]byte, size)
	for i := range r.body {
		r.body[i] = byte(i * 7)
	}
	sum := sha256.Sum256(r.body)
	r.sha = hex.EncodeToString(sum[:])
	artID, _ := domain.ParseUUID("id", hostedArtID)
	otherArt, _ := domain.ParseUUID("id", otherArtID)
	art, err := domain.NewArtifact(artID, hostedFileName, domain.ArtifactDigest{
		Size: int64(len(r.body)), SHA256: r.sha, SHA1: strings.Repeat("1", 40), MD5: strings.Repeat("5", 32),
	}, domain.ArtifactMeta{}, testTime)
	if err != nil {
		t.Fatal(err)
	}
	r.arts = dlArtifacts{hostedArtID: art}
	r.fws = map[string]domain.Firmware{
		hostedFwID:     firmwareOf(t, hostedFwID, "cam-x1", domain.FirmwareReleased, hostedArtID, sum, len(r.body)),
		otherModelFwID: firmwareOf(t, otherModelFwID, "cam-x2", domain.FirmwareReleased, hostedArtID, sum, len(r.body)),
		externalFwID:   firmwareOf(t, externalFwID, "cam-x1", domain.FirmwareReleased, "", sum, len(r.body)),
	}
	key, _ := domain.NewLinkKey([]byte(strings.Repeat("s", 32)))
	r.dl, err = application.NewDownloads(application.DownloadPorts{
		Firmwares: r, Artifacts: r.arts, Clock: fixedClock{r},
		Blobs:   dlBlobs{art.StorageKey(): r.body, domain.ArtifactStorageKey(otherArt): r.body},
		Devices: dlDevices{dev1: fakeDevice(dev1).Device, "cam-x2-dev": domain.RehydrateDevice("cam-x2-dev", "cam-x2", domain.Version{}, domain.HashToken("y"), time.Time{}, time.Time{})},
	}, application.DownloadConfig{LinkKey: key, LinkTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	r.e = NewServer(Config{AdminToken: testAdminToken}, &fakeServices{}, &fakeServices{}, nil, nil, nil, nil, WithDownloads(r.dl, publicURL+"/"))
	return r
}

func (r *dlRig) revoke(id string) {
	fw := r.fws[id]
	fw.Revoke(r.now)
	r.fws[id] = fw
}

func (r *dlRig) do(t *testing.T, method, target, token string, header map[string]string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, target, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	r.e.ServeHTTP(rec, req)
	return rec
}

func devicePath(fw string) string {
	return "/api/v1/devices/" + dev1 + "/ota/firmwares/" + fw + "/artifact"
}

func wantCode(t *testing.T, rec *httptest.ResponseRecorder, status int, code string) {
	t.Helper()
	var b httpedge.ErrorBody
	_ = json.Unmarshal(rec.Body.Bytes(), &b)
	if rec.Code != status || b.Error.Code != code {
		t.Fatalf("answer %d %q, want %d %s: %s", rec.Code, b.Error.Code, status, code, rec.Body)
	}
}

// TestDeviceDownload serves a hosted image to its device with the HTTP
// semantics resumable downloads depend on.
func TestDeviceDownload(t *testing.T) {
	r := newDownloadRig(t)
	etag := `"` + r.sha + `"`

	rec := r.do(t, http.MethodGet, devicePath(hostedFwID), tokenDev1, nil)
	if rec.Code != http.StatusOK || !bytes.Equal(rec.Body.Bytes(), r.body) {
		t.Fatalf("GET: %d, %d bytes", rec.Code, rec.Body.Len())
	}
	h := rec.Header()
	if h.Get("ETag") != etag || h.Get("Content-Length") != "100000" || h.Get("Accept-Ranges") != "bytes" ||
		h.Get("Content-Disposition") != dispositionWant || h.Get("Content-Type") != "application/octet-stream" {
		t.Errorf("headers: %v", h)
	}

	rec = r.do(t, http.MethodGet, devicePath(hostedFwID), tokenDev1, map[string]string{"Range": "bytes=10-19"})
	if rec.Code != http.StatusPartialContent || !bytes.Equal(rec.Body.Bytes(), r.body[10:20]) ||
		rec.Header().Get("Content-Range") != "bytes 10-19/100000" {
		t.Errorf("Range: %d %q %v", rec.Code, rec.Header().Get("Content-Range"), rec.Body.Len())
	}

	rec = r.do(t, http.MethodGet, devicePath(hostedFwID), tokenDev1, map[string]string{"Range": "bytes=99990-", "If-Range": etag})
	if rec.Code != http.StatusPartialContent || !bytes.Equal(rec.Body.Bytes(), r.body[99990:]) {
		t.Errorf("If-Range, same tag: %d, %d bytes", rec.Code, rec.Body.Len())
	}
	rec = r.do(t, http.MethodGet, devicePath(hostedFwID), tokenDev1, map[string]string{"Range": "bytes=99990-", "If-Range": `"stale"`})
	if rec.Code != http.StatusOK || rec.Body.Len() != len(r.body) {
		t.Errorf("If-Range, another tag: %d, %d bytes; want the whole image", rec.Code, rec.Body.Len())
	}
	rec = r.do(t, http.MethodGet, devicePath(hostedFwID), tokenDev1, map[string]string{"If-None-Match": etag})
	if rec.Code != http.StatusNotModified {
		t.Errorf("If-None-Match: %d", rec.Code)
	}
	rec = r.do(t, http.MethodHead, devicePath(hostedFwID), tokenDev1, nil)
	if rec.Code != http.StatusOK || rec.Body.Len() != 0 || rec.Header().Get("Content-Length") != "100000" || rec.Header().Get("ETag") != etag {
		t.Errorf("HEAD: %d, %d bytes, %v", rec.Code, rec.Body.Len(), rec.Header())
	}
	rec = r.do(t, http.MethodGet, devicePath(hostedFwID), tokenDev1, map[string]string{"Range": "bytes=200000-"})
	if rec.Code != http.StatusRequestedRangeNotSatisfiable {
		t.Errorf("range past the end: %d", rec.Code)
	}
}

// TestDeviceDownloadRefusals: every refusal is a 4xx with its code.
func TestDeviceDownloadRefusals(t *testing.T) {
	r := newDownloadRig(t)
	wantCode(t, r.do(t, http.MethodGet, devicePath(hostedFwID), "", nil), http.StatusUnauthorized, httpedge.CodeUnauthorized)
	wantCode(t, r.do(t, http.MethodGet, devicePath(hostedFwID), tokenDev2, nil), http.StatusForbidden, httpedge.CodeForbidden)
	wantCode(t, r.do(t, http.MethodGet, devicePath(otherModelFwID), tokenDev1, nil), http.StatusNotFound, httpedge.CodeNotFound)
	wantCode(t, r.do(t, http.MethodGet, devicePath(externalFwID), tokenDev1, nil), http.StatusNotFound, httpedge.CodeNotFound)
	wantCode(t, r.do(t, http.MethodGet, devicePath("not-a-uuid"), tokenDev1, nil), http.StatusNotFound, httpedge.CodeNotFound)
	wantCode(t, r.do(t, http.MethodGet, devicePath("%2e%2e%2f%2e%2e"), tokenDev1, nil), http.StatusNotFound, httpedge.CodeNotFound)
	r.revoke(hostedFwID)
	wantCode(t, r.do(t, http.MethodGet, devicePath(hostedFwID), tokenDev1, nil), http.StatusGone, httpedge.CodeFirmwareGone)
	wantCode(t, r.do(t, http.MethodHead, devicePath(hostedFwID), tokenDev1, nil), http.StatusGone, httpedge.CodeFirmwareGone)
}

func (r *dlRig) link(t *testing.T, fwID, device string) string {
	t.Helper()
	dev, _ := domain.ParseDeviceID(device)
	l := r.dl.Link(r.fws[fwID], dev)
	full := httpedge.SignedLinkURL(publicURL, l)
	if !strings.HasPrefix(full, publicURL+"/api/v1/artifacts/"+hostedArtID+"/download?") {
		t.Fatalf("link %s is not under the public URL", full)
	}
	return strings.TrimPrefix(full, publicURL)
}

// TestSignedLinkDownload: a link needs no credentials, and only the link
// signed is accepted, until it expires, while the rule holds.
func TestSignedLinkDownload(t *testing.T) {
	r := newDownloadRig(t)
	link := r.link(t, hostedFwID, dev1)
	rec := r.do(t, http.MethodGet, link, "", map[string]string{"Range": "bytes=5-"})
	if rec.Code != http.StatusPartialContent || !bytes.Equal(rec.Body.Bytes(), r.body[5:]) || rec.Header().Get("ETag") != `"`+r.sha+`"` {
		t.Fatalf("signed link with Range: %d, %d bytes", rec.Code, rec.Body.Len())
	}
	if rec := r.do(t, http.MethodHead, link, "", nil); rec.Code != http.StatusOK || rec.Header().Get("Content-Length") != "100000" {
		t.Errorf("HEAD: %d %v", rec.Code, rec.Header())
	}

	u, _ := url.Parse(link)
	forge := func(key, value string) string {
		q := u.Query()
		q.Set(key, value)
		return u.Path + "?" + q.Encode()
	}
	wantCode(t, r.do(t, http.MethodGet, forge("device", "dev-2"), "", nil), http.StatusForbidden, httpedge.CodeLinkInvalid)
	wantCode(t, r.do(t, http.MethodGet, forge("expires", "9999999999"), "", nil), http.StatusForbidden, httpedge.CodeLinkInvalid)
	wantCode(t, r.do(t, http.MethodGet, forge("firmware", otherModelFwID), "", nil), http.StatusForbidden, httpedge.CodeLinkInvalid)
	wantCode(t, r.do(t, http.MethodGet, forge("signature", "AAAA"), "", nil), http.StatusForbidden, httpedge.CodeLinkInvalid)
	wantCode(t, r.do(t, http.MethodGet, forge("expires", "soon"), "", nil), http.StatusForbidden, httpedge.CodeLinkInvalid)
	wantCode(t, r.do(t, http.MethodGet, u.Path, "", nil), http.StatusForbidden, httpedge.CodeLinkInvalid)
	wantCode(t, r.do(t, http.MethodGet, strings.Replace(link, hostedArtID, "..%2F..%2Fetc", 1), "", nil), http.StatusForbidden, httpedge.CodeLinkInvalid)

	// A link for another model's device, correctly signed, is still refused by the rule.
	wantCode(t, r.do(t, http.MethodGet, r.link(t, hostedFwID, "cam-x2-dev"), "", nil), http.StatusNotFound, httpedge.CodeNotFound)
	// Expired.
	r.now = r.now.Add(time.Hour + time.Second)
	wantCode(t, r.do(t, http.MethodGet, link, "", nil), http.StatusForbidden, httpedge.CodeLinkExpired)
	// Revoked after the link was signed.
	link = r.link(t, hostedFwID, dev1)
	r.revoke(hostedFwID)
	wantCode(t, r.do(t, http.MethodGet, link, "", nil), http.StatusGone, httpedge.CodeFirmwareGone)
}

// TestCheckAnswersTheDeviceRoute: a hosted firmware's url in the check
// answer is the device route under the public URL.
func TestCheckAnswersTheDeviceRoute(t *testing.T) {
	r := newDownloadRig(t)
	hosted := ports.TaskView{Task: testTask(domain.TaskPending), Firmware: r.fws[hostedFwID]}
	fake := &fakeServices{checkFn: func(ports.CheckRequest) (ports.CheckResult, error) {
		return ports.CheckResult{Task: &hosted}, nil
	}, eventFn: func(ports.EventRequest) (ports.TaskView, error) { return hosted, nil }}
	e := NewServer(Config{AdminToken: testAdminToken}, fake, fake, nil, nil, nil, nil, WithDownloads(r.dl, publicURL))
	post := func(path, body string) []byte {
		req := httptest.NewRequest(http.MethodPost, "/api/v1/devices/"+dev1+"/ota"+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tokenDev1)
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			t.Fatalf("%s: %d %s", path, rec.Code, rec.Body)
		}
		return rec.Body.Bytes()
	}
	want := publicURL + devicePath(hostedFwID)
	var v checkView
	if err := json.Unmarshal(post("/check", `{"model":"cam-x1","current_version":"1.0.0"}`), &v); err != nil || v.Task == nil {
		t.Fatalf("check: %v", err)
	}
	if v.Task.Firmware.URL != want {
		t.Errorf("check: url = %q, want %q", v.Task.Firmware.URL, want)
	}
	// An event's answer is the task again, with the same url.
	var ev deviceTaskView
	if err := json.Unmarshal(post("/tasks/"+taskID+"/events", `{"event_id":"e1","status":"downloading"}`), &ev); err != nil {
		t.Fatalf("event: %v", err)
	}
	if ev.Firmware.URL != want {
		t.Errorf("event: url = %q, want %q", ev.Firmware.URL, want)
	}
}

// TestOpenAPIDocumentsDownloads: the operations documented as served by
// WithDownloads are exactly the routes it adds.
func TestOpenAPIDocumentsDownloads(t *testing.T) {
	doc := loadSpec(t)
	documented := map[string]bool{}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			if op.Extensions["x-served-by"] == "rest.WithDownloads" {
				documented[method+" "+path] = true
			}
		}
	}
	without := map[string]bool{}
	for _, rt := range newHarness(t).e.Routes() {
		without[rt.Method+" "+rt.Path] = true
	}
	served := map[string]bool{}
	for _, rt := range newDownloadRig(t).e.Routes() {
		if !without[rt.Method+" "+rt.Path] {
			served[rt.Method+" "+echoParam.ReplaceAllString(rt.Path, "{$1}")] = true
		}
	}
	if len(served) != 4 || len(documented) != len(served) {
		t.Errorf("served %v, documented %v", served, documented)
	}
	for k := range served {
		if !documented[k] {
			t.Errorf("%s is not documented", k)
		}
	}
}

// TestLinkToAnotherArtifactIsRefused: a link names the artifact it was
// signed for; a firmware that names another one now does not serve it.
func TestLinkToAnotherArtifactIsRefused(t *testing.T) {
	r := newDownloadRig(t)
	link := r.link(t, hostedFwID, dev1)
	sum := sha256.Sum256(r.body)
	other := r.arts[hostedArtID]
	r.arts[otherArtID] = domain.RehydrateArtifact(otherArtID, "other.bin", other.Digest(), other.Meta(), testTime)
	r.fws[hostedFwID] = firmwareOf(t, hostedFwID, "cam-x1", domain.FirmwareReleased, otherArtID, sum, len(r.body))
	wantCode(t, r.do(t, http.MethodGet, link, "", nil), http.StatusNotFound, httpedge.CodeNotFound)
}

// TestSlowDownloadOutlivesTheWriteTimeout: the server's write timeout
// bounds an answer's whole write; a download's deadline moves with its
// progress instead, so a slow but steady client gets the whole image.
func TestSlowDownloadOutlivesTheWriteTimeout(t *testing.T) {
	// Larger than the sockets' buffers, so the server's writes wait for
	// the client.
	r := newDownloadRigOf(t, 32<<20)
	srv := httptest.NewUnstartedServer(r.e)
	srv.Config.WriteTimeout = 300 * time.Millisecond
	srv.Start()
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodGet, srv.URL+devicePath(hostedFwID), nil)
	req.Header.Set("Authorization", "Bearer "+tokenDev1)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var got []byte
	buf := make([]byte, 512<<10)
	for {
		time.Sleep(25 * time.Millisecond) // ~20 MB/s: 1.6 s for the image
		n, err := res.Body.Read(buf)
		got = append(got, buf[:n]...)
		if err != nil {
			break
		}
	}
	if !bytes.Equal(got, r.body) {
		t.Fatalf("got %d of %d bytes", len(got), len(r.body))
	}
}
