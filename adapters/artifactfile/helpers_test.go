package artifactfile_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"

	"github.com/ai-device/ota/adapters/artifactfile"
	"github.com/ai-device/ota/domain"
)

// memObject is a stored object held in memory: what the blob store hands
// the inspector, without a store.
type memObject struct{ *bytes.Reader }

func (memObject) Close() error       { return nil }
func (memObject) ModTime() time.Time { return time.Unix(0, 0) }
func (m memObject) Size() int64      { return m.Reader.Size() }
func object(data []byte) memObject   { return memObject{bytes.NewReader(data)} }
func ctx() context.Context           { return context.Background() }
func readFile(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// inspect runs the inspector on data named name.
func inspect(name string, data []byte) (domain.ArtifactMeta, error) {
	return artifactfile.Inspector{}.Inspect(ctx(), name, object(data))
}

// mustInspect inspects data and fails on any error.
func mustInspect(t *testing.T, name string, data []byte) domain.ArtifactMeta {
	t.Helper()
	meta, err := inspect(name, data)
	if err != nil {
		t.Fatalf("Inspect(%s): %v", name, err)
	}
	return meta
}

// refusal inspects data, which must be refused as unreadable, and returns
// the reason.
func refusal(t *testing.T, name string, data []byte) string {
	t.Helper()
	_, err := inspect(name, data)
	var fe *domain.ArtifactFormatError
	if !errors.As(err, &fe) || !errors.Is(err, domain.ErrArtifactUnreadable) {
		t.Fatalf("Inspect(%s) = %v, want an *ArtifactFormatError", name, err)
	}
	if want := artifactfile.FormatOf(name); fe.Format != want {
		t.Errorf("the error's format is %v, want %v", fe.Format, want)
	}
	return fe.Reason
}

// wantReason checks a refusal's reason contains want.
func wantReason(t *testing.T, name string, data []byte, want string) {
	t.Helper()
	if got := refusal(t, name, data); !strings.Contains(got, want) {
		t.Errorf("reason %q, want it to contain %q", got, want)
	}
}

// requireTool returns the path of a command the test needs: it skips
// without it, or fails when OTA_TEST_REQUIRE_SERVICES=1 says every test
// must run.
func requireTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		msg := fmt.Sprintf("%s is not installed (apt-get install -y %s)", name, name)
		if os.Getenv("OTA_TEST_REQUIRE_SERVICES") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return p
}

// writeMender runs Debian's mender-artifact with args (after "write") and
// returns the artifact it wrote; a payload file is made if args ask for
// one with "-f PAYLOAD".
func writeMender(t *testing.T, args ...string) []byte {
	t.Helper()
	bin := requireTool(t, "mender-artifact")
	dir := t.TempDir()
	payload := filepath.Join(dir, "payload.img")
	// Incompressible, so the payload is most of the file.
	noise := make([]byte, 16<<10)
	_, _ = rand.Read(noise)
	if err := os.WriteFile(payload, noise, 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "a.mender")
	full := []string{"write"}
	for _, a := range args {
		full = append(full, strings.ReplaceAll(a, "PAYLOAD", payload))
	}
	full = append(full, "-o", out)
	cmd := exec.Command(bin, full...)
	cmd.Dir = dir
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("mender-artifact %s: %v\n%s", strings.Join(full, " "), err, b)
	}
	return readFile(t, out)
}

// tarFile is one entry of a tar archive.
type tarFile struct {
	name string
	body []byte
}

// menderParts is a .mender file taken apart, to be changed and rebuilt
// into files mender-artifact will not write.
type menderParts struct {
	outerBefore []tarFile // version, manifest, …: everything before the header
	headerName  string
	header      []tarFile // the decompressed header's files
	outerAfter  []tarFile // the payloads
	rawHeader   []byte    // when set, the compressed header as it is
}

func splitMender(t *testing.T, data []byte) *menderParts {
	t.Helper()
	p := &menderParts{}
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return p
		}
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case strings.HasPrefix(h.Name, "header.tar"):
			p.headerName = h.Name
			var r io.Reader = bytes.NewReader(body)
			switch {
			case strings.HasSuffix(h.Name, ".gz"):
				if r, err = gzip.NewReader(r); err != nil {
					t.Fatal(err)
				}
			case strings.HasSuffix(h.Name, ".xz"):
				if r, err = xz.NewReader(r); err != nil {
					t.Fatal(err)
				}
			}
			p.header = untar(t, r)
		case p.headerName == "":
			p.outerBefore = append(p.outerBefore, tarFile{h.Name, body})
		default:
			p.outerAfter = append(p.outerAfter, tarFile{h.Name, body})
		}
	}
}

func untar(t testing.TB, r io.Reader) []tarFile {
	t.Helper()
	var files []tarFile
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, tarFile{h.Name, body})
	}
}

func tarOf(t testing.TB, files []tarFile) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o600, Size: int64(len(f.body))}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(f.body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// setHeader replaces (or, with body nil, removes) a header file.
func (p *menderParts) setHeader(name string, body []byte) {
	for i, f := range p.header {
		if f.name == name {
			if body == nil {
				p.header = append(p.header[:i], p.header[i+1:]...)
			} else {
				p.header[i].body = body
			}
			return
		}
	}
	if body != nil {
		p.header = append(p.header, tarFile{name, body})
	}
}

// compress compresses the header tar as name's suffix says.
func compress(t testing.TB, name string, plain []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	switch {
	case strings.HasSuffix(name, ".gz"):
		zw := gzip.NewWriter(&buf)
		_, _ = zw.Write(plain)
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
	case strings.HasSuffix(name, ".xz"):
		zw, err := xz.NewWriter(&buf)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = zw.Write(plain)
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
	case strings.HasSuffix(name, ".zst"):
		zw, err := zstd.NewWriter(&buf)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = zw.Write(plain)
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
	default:
		buf.Write(plain)
	}
	return buf.Bytes()
}

// build writes the parts back as a .mender file, the manifest's line for
// the header recomputed (and renamed) so only the intended change differs.
func (p *menderParts) build(t testing.TB) []byte {
	t.Helper()
	header := p.rawHeader
	if header == nil {
		header = compress(t, p.headerName, tarOf(t, p.header))
	}
	sum := sha256.Sum256(header)
	var outer []tarFile
	for _, f := range p.outerBefore {
		if f.name == "manifest" {
			var lines []string
			for _, l := range strings.Split(strings.TrimRight(string(f.body), "\n"), "\n") {
				if _, n, _ := strings.Cut(l, "  "); strings.HasPrefix(n, "header.tar") {
					l = hex.EncodeToString(sum[:]) + "  " + p.headerName
				}
				lines = append(lines, l)
			}
			f.body = []byte(strings.Join(lines, "\n") + "\n")
		}
		outer = append(outer, f)
	}
	outer = append(outer, tarFile{p.headerName, header})
	outer = append(outer, p.outerAfter...)
	return tarOf(t, outer)
}

// newc is one cpio entry in the "newc" (070701) or "crc" (070702) format,
// written by hand so a test can put any value in any field.
type newc struct {
	magic    string
	name     string
	data     []byte
	fileSize *uint32 // the header's filesize, when it must lie
	nameSize *uint32 // the header's namesize, when it must lie
	check    *uint32 // the header's check, when it must lie
}

func (e newc) bytes() []byte {
	var buf bytes.Buffer
	magic := e.magic
	if magic == "" {
		magic = "070701"
	}
	size, nsize := uint32(len(e.data)), uint32(len(e.name)+1)
	if e.fileSize != nil {
		size = *e.fileSize
	}
	if e.nameSize != nil {
		nsize = *e.nameSize
	}
	var check uint32
	if magic == "070702" {
		for _, b := range e.data {
			check += uint32(b)
		}
	}
	if e.check != nil {
		check = *e.check
	}
	fmt.Fprintf(&buf, "%s%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		magic, 1, 0o100644, 0, 0, 1, 0, size, 0, 0, 0, 0, nsize, check)
	buf.WriteString(e.name)
	buf.WriteByte(0)
	for buf.Len()%4 != 0 {
		buf.WriteByte(0)
	}
	buf.Write(e.data)
	for buf.Len()%4 != 0 {
		buf.WriteByte(0)
	}
	return buf.Bytes()
}

func u32(v uint32) *uint32 { return &v }

// swuOf is a .swu file: sw-description, a payload and the trailer.
func swuOf(desc string) []byte {
	var b bytes.Buffer
	b.Write(newc{name: "sw-description", data: []byte(desc)}.bytes())
	b.Write(newc{name: "rootfs.img", data: []byte("payload")}.bytes())
	b.Write(newc{name: "TRAILER!!!"}.bytes())
	return b.Bytes()
}

// writeSWUWithCpio builds a .swu the way SWUpdate's documentation does:
// GNU cpio in format (newc or crc) over sw-description and a payload.
func writeSWUWithCpio(t *testing.T, format, desc string) []byte {
	t.Helper()
	bin := requireTool(t, "cpio")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "sw-description"), []byte(desc), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "rootfs.ext4"), bytes.Repeat([]byte{0xA5}, 5000), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--quiet", "-o", "-H", format)
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader("sw-description\nrootfs.ext4\n")
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("cpio: %v\n%s", err, stderr.Bytes())
	}
	return out.Bytes()
}
