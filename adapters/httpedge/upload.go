package httpedge

import (
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/ai-device/ota/domain"
)

// UploadIdleTimeout is how long an upload may go without a byte arriving.
// An upload's body is not bounded by the server's 30 s read timeout — a
// 2 GiB image takes longer — only by this, so a stalled client is still
// cut off.
const UploadIdleTimeout = 30 * time.Second

// Upload is a request whose body is a file streamed to the upload use
// case, for every adapter that takes one (the API, the console): it lifts
// the server's write deadline for as long as the body arrives, pushes the
// read deadline back before every read, and tells a failure of the body
// itself (a broken connection, a body shorter than announced) from one of
// the store, so the caller's fault is answered as such.
type Upload struct {
	rc *http.ResponseController
	r  *http.Request
}

// NewUpload starts an upload on w and r.
func NewUpload(w http.ResponseWriter, r *http.Request) *Upload {
	rc := http.NewResponseController(w)
	// The answer comes after the whole body, however long that takes.
	_ = rc.SetWriteDeadline(time.Time{})
	return &Upload{rc: rc, r: r}
}

// Body is the request body, with the read deadline pushed back before
// every read: the upload lasts as long as bytes keep arriving.
func (u *Upload) Body() io.Reader { return idleBody{u} }

type idleBody struct{ u *Upload }

func (b idleBody) Read(p []byte) (int, error) {
	_ = b.u.rc.SetReadDeadline(time.Now().Add(UploadIdleTimeout))
	return b.u.r.Body.Read(p)
}

// Track wraps what the use case reads (the body, or a multipart part of
// it) to remember whether it failed.
func (u *Upload) Track(r io.Reader) *TrackedBody { return &TrackedBody{r: r} }

// Done ends the upload: the answer gets its own write deadline. Given the
// use case's error and the tracked body it read, it answers the error to
// return: the caller's cancelled context when the caller hung up, the
// body's own validation error when the edge refused what it carried (a
// multipart field after the file), 400 UPLOAD_INCOMPLETE when the body
// failed otherwise, else err as it is.
func (u *Upload) Done(err error, body *TrackedBody) error {
	_ = u.rc.SetWriteDeadline(time.Now().Add(UploadIdleTimeout))
	if err == nil || body == nil || body.err == nil {
		return err
	}
	if cerr := u.r.Context().Err(); cerr != nil {
		return cerr // the caller hung up: 499 in the log
	}
	if ve := (*domain.ValidationError)(nil); errors.As(body.err, &ve) {
		return ve
	}
	return NewError(http.StatusBadRequest, CodeUploadIncomplete,
		"the upload ended before its end (a broken connection, or a body shorter than announced); nothing was kept")
}

// TrackedBody remembers a failure of the upload's body (not its end).
type TrackedBody struct {
	r   io.Reader
	err error
}

func (b *TrackedBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil && err != io.EOF {
		b.err = err
	}
	return n, err
}
