package httpedge

import (
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
)

// Error codes of hosted downloads (docs/ERRORS.md).
const (
	CodeFirmwareGone = "FIRMWARE_GONE"
	CodeLinkInvalid  = "LINK_INVALID"
	CodeLinkExpired  = "LINK_EXPIRED"
)

// SignedLinkPath is the route of signed download links, the one place both
// the REST adapter (which serves it) and the Mender adapter (which hands it
// out) read it from.
const SignedLinkPath = "/api/v1/artifacts/:artifact_id/download"

// SignedLinkURL is the absolute URL of a signed link under the configured
// public URL (never a request's Host header).
func SignedLinkURL(publicURL string, l domain.ArtifactLink) string {
	q := url.Values{}
	q.Set("firmware", l.FirmwareID.String())
	q.Set("device", l.DeviceID.String())
	q.Set("expires", strconv.FormatInt(l.Expires.Unix(), 10))
	q.Set("signature", l.Signature)
	return publicURL + "/api/v1/artifacts/" + url.PathEscape(l.ArtifactID.String()) + "/download?" + q.Encode()
}

// ParseSignedLink reads a signed link from a request on SignedLinkPath. A
// link whose parts do not parse cannot carry a valid signature:
// domain.ErrLinkInvalid, as for a forged one.
func ParseSignedLink(c echo.Context) (domain.ArtifactLink, error) {
	q := c.QueryParams()
	art, err1 := domain.ParseUUID("artifact_id", PathParam(c, "artifact_id"))
	fw, err2 := domain.ParseUUID("firmware", q.Get("firmware"))
	dev, err3 := domain.ParseDeviceID(q.Get("device"))
	exp, err4 := strconv.ParseInt(q.Get("expires"), 10, 64)
	sig := q.Get("signature")
	if err1 != nil || err2 != nil || err3 != nil || err4 != nil || sig == "" || len(sig) > 128 {
		return domain.ArtifactLink{}, domain.ErrLinkInvalid
	}
	return domain.ArtifactLink{ArtifactID: art, FirmwareID: fw, DeviceID: dev, Expires: time.Unix(exp, 0).UTC(), Signature: sig}, nil
}

// writeIdle is how long a download may go without the client taking any
// bytes: the server's write timeout (30 s for the whole answer) would cut
// every large download, so a download's deadline moves with its progress
// instead, and only a stalled client is dropped.
const writeIdle = 30 * time.Second

// ServeDownload answers with a hosted artifact: a redirect to a presigned
// URL, or its bytes through http.ServeContent, which answers Range,
// If-Range, If-None-Match, HEAD and Content-Length. The ETag is the
// artifact's sha256, quoted: the same bytes always have the same tag, on
// every replica and every store. It closes the download's object.
func ServeDownload(c echo.Context, dl ports.Download) error {
	if dl.Object != nil {
		defer dl.Object.Close()
	}
	h := c.Response().Header()
	h.Set("ETag", `"`+dl.Artifact.Digest().SHA256+`"`)
	if dl.Redirect != "" {
		return c.Redirect(http.StatusFound, dl.Redirect)
	}
	if rng, dropped := withoutZeroSuffixes(c.Request().Header.Get("Range")); dropped {
		// A zero suffix ("-0") asks for no byte: unsatisfiable (RFC 9110,
		// 14.1.1), which ServeContent answers with a 206 and an inverted
		// Content-Range. The set's other ranges are served; none left, 416.
		if rng == "" {
			h.Set("Content-Range", "bytes */"+strconv.FormatInt(dl.Artifact.Digest().Size, 10))
			return NewError(http.StatusRequestedRangeNotSatisfiable, CodeRangeNotSatisfiable, "the range asks for no byte of the image")
		}
		c.Request().Header.Set("Range", rng)
	}
	h.Set(echo.HeaderContentType, "application/octet-stream")
	h.Set(echo.HeaderContentDisposition, contentDisposition(dl.Artifact.FileName()))
	w := &errorStatusWriter{ResponseWriter: &idleDeadlineWriter{ResponseWriter: c.Response(), rc: http.NewResponseController(c.Response())}}
	http.ServeContent(w, c.Request(), "", dl.Object.ModTime(), dl.Object)
	if w.status < http.StatusBadRequest {
		return nil
	}
	// ServeContent's own error answers (a range past the end, a failed
	// precondition) are plain text and drop Cache-Control; they are
	// answered as every error is: the JSON body, no-store.
	h.Del(echo.HeaderContentDisposition)
	h.Del(echo.HeaderContentType) // http.Error's text/plain: the JSON answer sets its own
	h[echo.HeaderCacheControl] = noStore
	switch w.status {
	case http.StatusRequestedRangeNotSatisfiable:
		return NewError(w.status, CodeRangeNotSatisfiable, "the range starts past the end of the image")
	case http.StatusPreconditionFailed:
		return NewError(w.status, CodePreconditionFailed, "a precondition of the request (If-Match, If-Unmodified-Since) does not hold")
	}
	return fmt.Errorf("serving artifact %s: answered %d", dl.Artifact.ID(), w.status)
}

// withoutZeroSuffixes is a bytes Range header without its zero suffixes
// ("-0", "-00"), and whether it had any: "" when none of its ranges is
// left.
func withoutZeroSuffixes(r string) (string, bool) {
	spec, ok := strings.CutPrefix(r, "bytes=")
	if !ok {
		return r, false
	}
	var kept []string
	dropped := false
	for part := range strings.SplitSeq(spec, ",") {
		if p := strings.TrimSpace(part); len(p) > 1 && p[0] == '-' && strings.Trim(p[1:], "0") == "" {
			dropped = true
			continue
		}
		kept = append(kept, part)
	}
	if !dropped {
		return r, false
	}
	if len(kept) == 0 {
		return "", true
	}
	return "bytes=" + strings.Join(kept, ","), true
}

// errorStatusWriter keeps an error answer of http.ServeContent (a status
// of 400 or more, and its plain-text body) off the wire, so that the edge
// answers it its own way.
type errorStatusWriter struct {
	http.ResponseWriter
	status int
}

func (w *errorStatusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	if code < http.StatusBadRequest {
		w.ResponseWriter.WriteHeader(code)
	}
}

func (w *errorStatusWriter) Write(p []byte) (int, error) {
	if w.status >= http.StatusBadRequest {
		return len(p), nil
	}
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection.
func (w *errorStatusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// contentDisposition quotes a file name safely: mime.FormatMediaType
// escapes quotes and backslashes, and writes a name that is not plain
// ASCII as RFC 2231's filename*. The name was validated on upload (no
// path, no control characters).
func contentDisposition(name string) string {
	if v := mime.FormatMediaType("attachment", map[string]string{"filename": name}); v != "" {
		return v
	}
	return "attachment"
}

// idleDeadlineWriter pushes the connection's write deadline writeIdle into
// the future as bytes go out (at most once a second).
type idleDeadlineWriter struct {
	http.ResponseWriter
	rc   *http.ResponseController
	last time.Time
}

func (w *idleDeadlineWriter) Write(p []byte) (int, error) {
	if now := time.Now(); now.Sub(w.last) >= time.Second {
		w.last = now
		_ = w.rc.SetWriteDeadline(now.Add(writeIdle)) // unsupported by a test recorder: no deadline to move
	}
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection.
func (w *idleDeadlineWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
