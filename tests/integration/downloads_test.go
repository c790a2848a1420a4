package integration

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/ai-device/ota/adapters/blobstore"
	"github.com/ai-device/ota/adapters/httpedge"
	"github.com/ai-device/ota/adapters/memory"
	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/tests/testenv"
)

// TestS3DownloadsProxiedOrRedirected serves a hosted image from a real
// S3-compatible store (SeaweedFS): proxied, Range reads only the range;
// with OTA_ARTIFACT_REDIRECT=presigned the device is sent to a presigned
// URL of the store, which serves the same bytes, Range included, with no
// credentials. The rule is applied before either.
func TestS3DownloadsProxiedOrRedirected(t *testing.T) {
	srv := testenv.S3(t)
	store, err := blobstore.Open(context.Background(), srv.NewBucket(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	ctx := context.Background()
	base := testenv.NewMemoryService(t, testenv.MemoryOptions{})
	deps := base.Deps
	arts := memory.NewArtifacts(base.Store)

	body := bytes.Repeat([]byte("s3 image "), 200_000)
	s256, s1, s5 := sha256.Sum256(body), sha1.Sum(body), md5.Sum(body)
	art, err := domain.NewArtifact(deps.IDs.NewID(), "s3.bin", domain.ArtifactDigest{Size: int64(len(body)),
		SHA256: hex.EncodeToString(s256[:]), SHA1: hex.EncodeToString(s1[:]), MD5: hex.EncodeToString(s5[:])}, domain.ArtifactMeta{}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Put(ctx, art.StorageKey(), bytes.NewReader(body)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := arts.Create(ctx, art, domain.AuditRecord{}); err != nil {
		t.Fatal(err)
	}
	spec, err := domain.FirmwareSpec{Model: "cam-s3", Version: "1.0.0"}.WithArtifact(art)
	if err != nil {
		t.Fatal(err)
	}
	fw, err := domain.NewFirmware(deps.IDs.NewID(), spec, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := deps.Firmwares.Create(ctx, fw, domain.AuditRecord{}); err != nil {
		t.Fatal(err)
	}
	dev := domain.RehydrateDevice("s3-dev", "cam-s3", domain.Version{}, domain.HashToken("t"), time.Time{}, time.Time{})
	other := domain.RehydrateDevice("s3-other", "cam-other", domain.Version{}, domain.HashToken("u"), time.Time{}, time.Time{})
	key, _ := domain.NewLinkKey([]byte(strings.Repeat("3", 32)))

	serve := func(presigned bool) *httptest.Server {
		dl, err := application.NewDownloads(application.DownloadPorts{Firmwares: deps.Firmwares, Devices: deps.Devices,
			Artifacts: arts, Blobs: store, Clock: deps.Clock}, application.DownloadConfig{LinkKey: key, Presigned: presigned})
		if err != nil {
			t.Fatal(err)
		}
		e := echo.New()
		e.HTTPErrorHandler = httpedge.New(nil, nil).HandleError
		e.GET("/:who", func(c echo.Context) error {
			d := dev
			if c.Param("who") == "other" {
				d = other
			}
			got, err := dl.Open(c.Request().Context(), d, fw.ID())
			if err != nil {
				return err
			}
			return httpedge.ServeDownload(c, got)
		})
		s := httptest.NewServer(e)
		t.Cleanup(s.Close)
		return s
	}
	get := func(client *http.Client, url, rng string) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if rng != "" {
			req.Header.Set("Range", rng)
		}
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res, b
	}
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

	proxy := serve(false)
	if res, b := get(http.DefaultClient, proxy.URL+"/dev", "bytes=1000-1999"); res.StatusCode != http.StatusPartialContent || !bytes.Equal(b, body[1000:2000]) {
		t.Errorf("proxied Range: %d, %d bytes", res.StatusCode, len(b))
	}
	if res, b := get(http.DefaultClient, proxy.URL+"/dev", ""); res.StatusCode != http.StatusOK || !bytes.Equal(b, body) {
		t.Errorf("proxied: %d, %d bytes", res.StatusCode, len(b))
	}

	redirect := serve(true)
	res, _ := get(noRedirect, redirect.URL+"/dev", "")
	loc := res.Header.Get("Location")
	if res.StatusCode != http.StatusFound || !strings.HasPrefix(loc, srv.Endpoint) {
		t.Fatalf("presigned: %d to %q, want 302 to the store %s", res.StatusCode, loc, srv.Endpoint)
	}
	if res, b := get(http.DefaultClient, loc, "bytes=10-"); res.StatusCode != http.StatusPartialContent || !bytes.Equal(b, body[10:]) {
		t.Errorf("the presigned URL with Range: %d, %d bytes", res.StatusCode, len(b))
	}
	if res, _ := get(noRedirect, redirect.URL+"/other", ""); res.StatusCode != http.StatusNotFound {
		t.Errorf("another model's device was answered %d, want 404 before any redirect", res.StatusCode)
	}
}
