package artifactfile_test

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/ai-device/ota/domain"
)

// maxFuzzAlloc bounds what one inspection may allocate: the header bounds
// (16 MiB decompressed) plus the decoders' own buffers. A parser that
// trusted a size from the file would pass it at once.
const maxFuzzAlloc = 64 << 20

// fuzzInspect inspects data as name and checks the promise every upload
// relies on: no panic, any refusal an *ArtifactFormatError (the object
// never fails here, so no other error is acceptable), and a bounded
// allocation however hostile the bytes.
func fuzzInspect(t *testing.T, name string, data []byte) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	meta, err := inspect(name, data)
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > maxFuzzAlloc {
		t.Fatalf("one inspection of %d bytes allocated %d bytes", len(data), grew)
	}
	var fe *domain.ArtifactFormatError
	switch {
	case err == nil:
		if meta.Format.String() == "raw" {
			t.Fatalf("a %s file read as raw", name)
		}
	case !errors.As(err, &fe) || fe.Reason == "":
		t.Fatalf("error %v (%T), want an *ArtifactFormatError with a reason", err, err)
	}
}

// seeds adds the committed hostile files with the given suffix. The
// header bomb is left to TestMenderFixtures: each of its mutations
// decompresses 16 MiB, which under the fuzzer's instrumentation takes
// most of a second and would leave the engine a few hundred runs.
func seeds(f *testing.F, suffix string) {
	paths, _ := filepath.Glob(filepath.Join("testdata", "*"+suffix))
	for _, p := range paths {
		if strings.Contains(p, "bomb") {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

func FuzzInspectMender(f *testing.F) {
	seeds(f, ".mender")
	// A small valid artifact, built in Go so the seed does not depend on
	// mender-artifact being installed.
	f.Add(tinyMender(f, "header.tar"))
	f.Add(tinyMender(f, "header.tar.gz"))
	f.Add(tinyMender(f, "header.tar.xz"))
	f.Add(tinyMender(f, "header.tar.zst"))
	f.Fuzz(func(t *testing.T, data []byte) { fuzzInspect(t, "x.mender", data) })
}

func FuzzInspectSWU(f *testing.F) {
	seeds(f, ".swu")
	f.Add(swuOf(realDescription))
	f.Add(newc{magic: "070702", name: "sw-description", data: []byte(`software = { version = "1"; }`)}.bytes())
	f.Fuzz(func(t *testing.T, data []byte) { fuzzInspect(t, "x.swu", data) })
}

// tinyMender is a minimal format-3 artifact: what mender-artifact writes,
// without its checksums and payload content.
func tinyMender(tb testing.TB, headerName string) []byte {
	p := &menderParts{
		outerBefore: []tarFile{
			{"version", []byte(`{"format":"mender","version":3}`)},
			{"manifest", []byte("0000000000000000000000000000000000000000000000000000000000000000  data/0000/img\n")},
		},
		headerName: headerName,
		header: []tarFile{
			{"header-info", []byte(`{"payloads":[{"type":"rootfs-image"}],"artifact_provides":{"artifact_name":"n"},"artifact_depends":{"device_type":["d"]}}`)},
			{"headers/0000/type-info", []byte(`{"type":"rootfs-image","artifact_provides":{"rootfs-image.version":"1"}}`)},
		},
		outerAfter: []tarFile{{"data/0000.tar", []byte("x")}},
	}
	return p.build(tb)
}
