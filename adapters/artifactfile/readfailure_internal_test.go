package artifactfile

import (
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/ai-device/ota/domain"
)

// Every format's reader words a failed read through readFailure: a format
// error found while reading (a bound exceeded inside an entry) passes as it
// is rather than being worded again as a read error, and a cut file reads
// "truncated" whatever its format.
func TestReadFailuresReadAlikeInEveryFormat(t *testing.T) {
	readers := map[string]func(error, string) error{
		"tarError": tarError, "decompressError": decompressError, "swuReadError": swuReadError,
	}
	for name, words := range readers {
		t.Run(name, func(t *testing.T) {
			fe := fmt.Errorf("reading: %w", formatErrorf("header.tar is larger than 10 bytes"))
			if got := words(fe, "header.tar"); got != fe {
				t.Errorf("a format error became %q, want it unchanged: %q", got, fe)
			}
			got := words(fmt.Errorf("reading: %w", io.ErrUnexpectedEOF), "header.tar")
			var out *domain.ArtifactFormatError
			if !errors.As(got, &out) || out.Reason != "truncated: the file ends inside header.tar" {
				t.Errorf("a short read became %#v, want the truncated reason", got)
			}
		})
	}
}
