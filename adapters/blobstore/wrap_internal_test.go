package blobstore

import (
	"errors"
	"io/fs"
	"syscall"
	"testing"

	"github.com/ai-device/ota/domain"
)

// A writer's ENOSPC, however deeply the driver wrapped it, is the store
// being full; any other failure of the store is it being unavailable; both
// are a retryable ErrServiceBusy. A failure of the caller's body is neither.
func TestWrapNamesTheStoresFailure(t *testing.T) {
	s := &Store{scheme: "file"}
	full := s.wrap("writing", "artifacts/x", &fs.PathError{Op: "write", Path: "/d/x.tmp", Err: syscall.ENOSPC})
	if !errors.Is(full, domain.ErrArtifactStoreFull) || !errors.Is(full, domain.ErrServiceBusy) {
		t.Errorf("ENOSPC = %v, want ErrArtifactStoreFull (an ErrServiceBusy)", full)
	}
	down := s.wrap("writing", "artifacts/x", errors.New("connection refused"))
	if !errors.Is(down, domain.ErrArtifactStoreUnavailable) || !errors.Is(down, domain.ErrServiceBusy) || errors.Is(down, domain.ErrArtifactStoreFull) {
		t.Errorf("a refused connection = %v, want ErrArtifactStoreUnavailable only", down)
	}
	body := s.wrap("writing", "artifacts/x", &readerError{errors.New("client gone")})
	if errors.Is(body, domain.ErrServiceBusy) {
		t.Errorf("a failing body = %v, want no ErrServiceBusy", body)
	}
}
