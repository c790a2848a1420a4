package artifactfile_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/ai-device/ota/adapters/artifactfile"
	"github.com/ai-device/ota/domain"
)

func TestMenderRootfsImage(t *testing.T) {
	t.Parallel()
	data := writeMender(t, "rootfs-image", "-t", "cam-x1", "-t", "cam-x2", "-n", "release-2.1.0",
		"-f", "PAYLOAD", "--software-version", "2.1.0", "-p", "camera.firmware:abc", "--no-progress")
	meta := mustInspect(t, "release.mender", data)

	if meta.Format != domain.ArtifactMender {
		t.Errorf("format %v", meta.Format)
	}
	if meta.ArtifactName != "release-2.1.0" {
		t.Errorf("artifact name %q", meta.ArtifactName)
	}
	if !reflect.DeepEqual(meta.DeviceTypes, []string{"cam-x1", "cam-x2"}) {
		t.Errorf("device types %q", meta.DeviceTypes)
	}
	if meta.PayloadType != "rootfs-image" {
		t.Errorf("payload type %q", meta.PayloadType)
	}
	if meta.Version != "2.1.0" {
		t.Errorf("version %q, want rootfs-image.version", meta.Version)
	}
	if meta.Provides["rootfs-image.version"] != "2.1.0" || meta.Provides["camera.firmware"] != "abc" ||
		len(meta.Provides["rootfs-image.checksum"]) != 64 {
		t.Errorf("provides %v", meta.Provides)
	}
}

func TestMenderModuleImage(t *testing.T) {
	t.Parallel()
	data := writeMender(t, "module-image", "-T", "docker", "-t", "box-1", "-n", "app-7",
		"-f", "PAYLOAD", "-p", "app.version:7", "--software-version", "7.0.1")
	meta := mustInspect(t, "app.MENDER", data) // the suffix in any case
	if meta.ArtifactName != "app-7" || meta.PayloadType != "docker" ||
		!reflect.DeepEqual(meta.DeviceTypes, []string{"box-1"}) {
		t.Errorf("meta %+v", meta)
	}
	// A module image's software version is rootfs-image.<module>.version.
	if meta.Version != "7.0.1" || meta.Provides["app.version"] != "7" {
		t.Errorf("version %q, provides %v", meta.Version, meta.Provides)
	}
}

func TestMenderWithoutSoftwareVersionHasNone(t *testing.T) {
	t.Parallel()
	data := writeMender(t, "module-image", "-T", "script", "-t", "box-1", "-n", "no-version",
		"-f", "PAYLOAD", "--no-default-software-version")
	if meta := mustInspect(t, "a.mender", data); meta.Version != "" {
		t.Errorf("version %q from provides %v, want none", meta.Version, meta.Provides)
	}
}

func TestMenderFormat2(t *testing.T) {
	t.Parallel()
	data := writeMender(t, "rootfs-image", "-v", "2", "-t", "old-board", "-n", "legacy-1", "-f", "PAYLOAD", "--no-progress")
	meta := mustInspect(t, "legacy.mender", data)
	if meta.ArtifactName != "legacy-1" || meta.PayloadType != "rootfs-image" ||
		!reflect.DeepEqual(meta.DeviceTypes, []string{"old-board"}) {
		t.Errorf("meta %+v", meta)
	}
}

func TestMenderUncompressedAndSigned(t *testing.T) {
	t.Parallel()
	plain := writeMender(t, "rootfs-image", "--compression", "none", "-t", "d", "-n", "plain-1", "-f", "PAYLOAD", "--no-progress")
	if !bytes.Contains(plain, []byte("header.tar\x00")) {
		t.Fatal("mender-artifact did not write an uncompressed header")
	}
	if meta := mustInspect(t, "plain.mender", plain); meta.ArtifactName != "plain-1" {
		t.Errorf("uncompressed: %+v", meta)
	}

	openssl := requireTool(t, "openssl")
	key := filepath.Join(t.TempDir(), "key.pem")
	if b, err := exec.Command(openssl, "ecparam", "-genkey", "-name", "prime256v1", "-noout", "-out", key).CombinedOutput(); err != nil {
		t.Fatalf("openssl: %v\n%s", err, b)
	}
	signed := writeMender(t, "rootfs-image", "-k", key, "-t", "d", "-n", "signed-1", "-f", "PAYLOAD", "--no-progress")
	if !bytes.Contains(signed, []byte("manifest.sig")) {
		t.Fatal("mender-artifact did not sign")
	}
	if meta := mustInspect(t, "signed.mender", signed); meta.ArtifactName != "signed-1" {
		t.Errorf("signed: %+v", meta)
	}
}

func TestMenderZstdHeader(t *testing.T) {
	t.Parallel()
	p := splitMender(t, writeMender(t, "rootfs-image", "-t", "d", "-n", "zstd-1", "-f", "PAYLOAD", "--no-progress"))
	p.headerName = "header.tar.zst"
	if meta := mustInspect(t, "z.mender", p.build(t)); meta.ArtifactName != "zstd-1" {
		t.Errorf("meta %+v", meta)
	}
}

func TestMenderXZHeader(t *testing.T) {
	t.Parallel()
	data := writeMender(t, "rootfs-image", "--compression", "lzma", "-t", "d", "-n", "xz-1", "-f", "PAYLOAD", "--no-progress")
	if !bytes.Contains(data, []byte("header.tar.xz\x00")) {
		t.Fatal("mender-artifact did not write an xz header")
	}
	meta := mustInspect(t, "x.mender", data)
	if meta.ArtifactName != "xz-1" || meta.PayloadType != "rootfs-image" {
		t.Errorf("meta %+v", meta)
	}
}

// TestMenderXZHostileHeaders: the xz container is read by hand so that a
// declared dictionary is never allocated as declared.
func TestMenderXZHostileHeaders(t *testing.T) {
	t.Parallel()
	real := writeMender(t, "rootfs-image", "--compression", "lzma", "-t", "d", "-n", "xz-2", "-f", "PAYLOAD", "--no-progress")
	p := splitMender(t, real)
	header := compress(t, "header.tar.xz", tarOf(t, p.header))
	// patch changes the first block header (its size byte at 12, the CRC
	// recomputed) and rebuilds the artifact around it.
	patch := func(change func(bh []byte)) []byte {
		h := append([]byte{}, header...)
		n := (int(h[12]) + 1) * 4
		bh := h[12 : 12+n]
		change(bh)
		binary.LittleEndian.PutUint32(bh[n-4:], crc32.ChecksumIEEE(bh[:n-4]))
		q := *p
		q.rawHeader = h
		return q.build(t)
	}
	// The filter's property byte is the last before the padding: flags,
	// then filter id 0x21, size 1, props (ulikunitz's writer adds no
	// sizes).
	props := func(bh []byte) int { return bytes.Index(bh, []byte{0x21, 0x01}) + 2 }

	// A 4 GiB dictionary declared: read with one no larger than the header.
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	meta := mustInspect(t, "x.mender", patch(func(bh []byte) { bh[props(bh)] = 40 }))
	runtime.ReadMemStats(&after)
	if meta.ArtifactName != "xz-2" {
		t.Errorf("meta %+v", meta)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<20 {
		t.Errorf("a 4 GiB dictionary declared: %d bytes allocated", grew)
	}
	wantReason(t, "x.mender", patch(func(bh []byte) { bh[props(bh)] = 41 }), "header.tar.xz: a corrupt xz block header")
	wantReason(t, "x.mender", patch(func(bh []byte) { bh[1] |= 0x01 }), "header.tar.xz: xz filters other than LZMA2 alone are not supported")
	wantReason(t, "x.mender", patch(func(bh []byte) { bh[props(bh)-2] = 0x04 }), "header.tar.xz: xz filters other than LZMA2 alone are not supported")
	// A corrupt checksum: patch, then spoil the CRC.
	spoiled := append([]byte{}, header...)
	spoiled[12+(int(spoiled[12])+1)*4-1] ^= 0xFF
	q := *p
	q.rawHeader = spoiled
	wantReason(t, "x.mender", q.build(t), "header.tar.xz: corrupt (the xz block header's checksum does not match)")
	notXZ := *p
	notXZ.rawHeader = []byte("definitely not xz data")
	wantReason(t, "x.mender", notXZ.build(t), "header.tar.xz: not xz data")
}

// TestMenderRefusals changes one thing in a real artifact and expects the
// reason that names it.
func TestMenderRefusals(t *testing.T) {
	t.Parallel()
	real := writeMender(t, "rootfs-image", "-t", "cam", "-n", "good-1", "-f", "PAYLOAD", "--no-progress")
	mustInspect(t, "good.mender", real)
	headerInfo := func(s string) func(p *menderParts) {
		return func(p *menderParts) { p.setHeader("header-info", []byte(s)) }
	}
	cases := []struct {
		name   string
		change func(p *menderParts)
		want   string
	}{
		{"no artifact name", headerInfo(`{"payloads":[{"type":"rootfs-image"}],"artifact_provides":{},"artifact_depends":{"device_type":["cam"]}}`),
			"header-info: missing artifact_name"},
		{"no device type", headerInfo(`{"payloads":[{"type":"rootfs-image"}],"artifact_provides":{"artifact_name":"a"},"artifact_depends":{}}`),
			"header-info: missing artifact_depends.device_type"},
		{"an empty device type", headerInfo(`{"payloads":[{"type":"rootfs-image"}],"artifact_provides":{"artifact_name":"a"},"artifact_depends":{"device_type":["cam",""]}}`),
			"header-info: an empty device type"},
		{"no payloads", headerInfo(`{"payloads":[],"artifact_provides":{"artifact_name":"a"},"artifact_depends":{"device_type":["cam"]}}`),
			"header-info: no payloads"},
		{"device types not a list", headerInfo(`{"payloads":[{"type":"rootfs-image"}],"artifact_provides":{"artifact_name":"a"},"artifact_depends":{"device_type":"cam"}}`),
			"header-info: artifact_depends.device_type: a JSON string where an array belongs"},
		{"header-info not JSON", headerInfo(`{"payloads":`), "header-info: not valid JSON"},
		{"header-info not first", func(p *menderParts) { p.header[0], p.header[1] = p.header[1], p.header[0] },
			`the first entry is "headers/0000/type-info", not header-info`},
		{"no type-info", func(p *menderParts) { p.setHeader("headers/0000/type-info", nil) },
			"headers/0000/type-info: missing"},
		{"type-info without type", func(p *menderParts) { p.setHeader("headers/0000/type-info", []byte(`{"artifact_provides":{}}`)) },
			"headers/0000/type-info: missing type"},
		{"no payload type anywhere", func(p *menderParts) {
			p.setHeader("header-info", []byte(`{"payloads":[{"type":""}],"artifact_provides":{"artifact_name":"a"},"artifact_depends":{"device_type":["cam"]}}`))
			p.setHeader("headers/0000/type-info", []byte(`{"type":""}`))
		}, "header-info: the payload has no type"},
		{"type-info of a payload not declared", func(p *menderParts) { p.setHeader("headers/0001/type-info", []byte(`{"type":"x"}`)) },
			"headers/0001/type-info: header-info declares 1 payload(s)"},
		{"provides not strings", func(p *menderParts) {
			p.setHeader("headers/0000/type-info", []byte(`{"type":"rootfs-image","artifact_provides":{"a":1}}`))
		}, "headers/0000/type-info: artifact_provides: a JSON number where a string belongs"},
		{"not mender", func(p *menderParts) { p.outerBefore[0].body = []byte(`{"format":"debian","version":3}`) },
			`version: format is "debian", not mender`},
		{"format 1", func(p *menderParts) { p.outerBefore[0].body = []byte(`{"format":"mender","version":1}`) },
			"version: format version 1 is not supported"},
		{"version not first", func(p *menderParts) { p.outerBefore[0], p.outerBefore[1] = p.outerBefore[1], p.outerBefore[0] },
			`the first entry is "manifest", not version`},
		{"no manifest", func(p *menderParts) { p.outerBefore = p.outerBefore[:1] }, "header.tar.gz comes before the manifest"},
		{"a bad manifest line", func(p *menderParts) { p.outerBefore[1].body = []byte("abc  version\n") },
			`manifest: line 1 is not "<sha256>  <name>"`},
		{"a stranger before the header", func(p *menderParts) {
			p.outerBefore = append(p.outerBefore, tarFile{"evil", []byte("x")})
		}, `unexpected entry "evil" before header.tar`},
		{"unknown compression", func(p *menderParts) { p.headerName = "header.tar.bz2" }, `header.tar.bz2: unknown compression ".bz2"`},
		{"a payload missing", func(p *menderParts) { p.outerAfter = nil }, "truncated: the header declares 1 payload(s), the file holds 0"},
		{"a payload too many", func(p *menderParts) {
			p.outerAfter = append(p.outerAfter, tarFile{"data/0001.tar.gz", []byte("x")})
		}, "data/0001.tar.gz: the header declares 1 payload(s)"},
		{"a stranger among payloads", func(p *menderParts) { p.outerAfter[0].name = "data/x.tar.gz" },
			`unexpected entry "data/x.tar.gz" where data/0000.tar is expected`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := splitMender(t, real)
			c.change(p)
			wantReason(t, "x.mender", p.build(t), c.want)
		})
	}
}

func TestMenderHeaderChecksumIsChecked(t *testing.T) {
	t.Parallel()
	p := splitMender(t, writeMender(t, "rootfs-image", "-t", "cam", "-n", "sum-1", "-f", "PAYLOAD", "--no-progress"))
	data := p.build(t)
	// The header as rebuilt, its manifest line left as it was for the old
	// one: change a name inside it.
	p.setHeader("header-info", bytes.Replace(p.header[0].body, []byte("sum-1"), []byte("sum-2"), 1))
	tampered := p.build(t)
	manifestOf := func(b []byte) []byte { return splitMender(t, b).outerBefore[1].body }
	q := splitMender(t, tampered)
	q.outerBefore[1].body = manifestOf(data)
	wantReason(t, "x.mender", buildKeepingManifest(t, q), "header.tar.gz: its sha256 does not match the manifest's")
}

// buildKeepingManifest is build without recomputing the manifest.
func buildKeepingManifest(t *testing.T, p *menderParts) []byte {
	t.Helper()
	outer := append([]tarFile{}, p.outerBefore...)
	outer = append(outer, tarFile{p.headerName, compress(t, p.headerName, tarOf(t, p.header))})
	outer = append(outer, p.outerAfter...)
	return tarOf(t, outer)
}

// TestMenderTruncatedAnywhere cuts a real artifact at every 97th byte:
// each cut is refused as truncated (a cut inside the payload too, found
// by seeking, not reading), and never with another kind of error. Only a
// cut that drops nothing but the tar's zero padding and end blocks, which
// loses no content, is read.
func TestMenderTruncatedAnywhere(t *testing.T) {
	t.Parallel()
	real := writeMender(t, "rootfs-image", "-t", "cam", "-n", "cut-1", "-f", "PAYLOAD", "--no-progress")
	for cut := 1; cut < len(real); cut += 97 {
		if _, err := inspect("x.mender", real[:cut]); err == nil {
			if bytes.Count(real[cut:], []byte{0}) != len(real)-cut {
				t.Fatalf("cut at %d of %d, inside content: accepted", cut, len(real))
			}
			continue
		}
		reason := refusal(t, "x.mender", real[:cut])
		if !strings.HasPrefix(reason, "truncated: ") {
			t.Fatalf("cut at %d of %d: reason %q, want truncated", cut, len(real), reason)
		}
	}
}

// TestMenderFixtures are the committed hostile files.
func TestMenderFixtures(t *testing.T) {
	t.Parallel()
	for file, want := range map[string]string{
		"truncated.mender":   "truncated: the file ends inside header.tar.gz",
		"header-bomb.mender": "header.tar.gz: the header is larger than 16777216 bytes once decompressed",
		"not-a-tar.mender":   "not a tar archive",
	} {
		t.Run(file, func(t *testing.T) {
			t.Parallel()
			wantReason(t, file, readFile(t, filepath.Join("testdata", file)), want)
		})
	}
}

// countingObject counts the bytes read from it.
type countingObject struct {
	memObject
	read int64
}

func (c *countingObject) Read(p []byte) (int, error) {
	n, err := c.memObject.Read(p)
	c.read += int64(n)
	return n, err
}

// TestMenderReadsOnlyTheHead: the payloads are skipped by seeking, so a
// 4 MiB payload costs only the bytes of its tar header and its last byte.
func TestMenderReadsOnlyTheHead(t *testing.T) {
	t.Parallel()
	p := splitMender(t, writeMender(t, "rootfs-image", "-t", "cam", "-n", "big-1", "-f", "PAYLOAD", "--no-progress"))
	p.outerAfter[0].body = bytes.Repeat([]byte{7}, 4<<20)
	data := p.build(t)
	obj := &countingObject{memObject: object(data)}
	if _, err := (artifactfile.Inspector{}).Inspect(context.Background(), "big.mender", obj); err != nil {
		t.Fatal(err)
	}
	if obj.read > 64<<10 {
		t.Errorf("read %d bytes of a %d-byte file", obj.read, len(data))
	}
}

// failingObject fails every read after the first n bytes, as a store in
// an outage does.
type failingObject struct {
	memObject
	left int
}

var errStore = errors.New("store unreachable")

func (f *failingObject) Read(p []byte) (int, error) {
	if f.left <= 0 {
		return 0, errStore
	}
	if len(p) > f.left {
		p = p[:f.left]
	}
	n, err := f.memObject.Read(p)
	f.left -= n
	return n, err
}

// TestStoreFailureIsNotTheFilesFault: a read that fails mid-file is the
// store's error, never a format error (which would be a 422 blaming the
// operator's file), for both formats and at any point.
func TestStoreFailureIsNotTheFilesFault(t *testing.T) {
	t.Parallel()
	files := map[string][]byte{
		"a.mender": writeMender(t, "rootfs-image", "-t", "cam", "-n", "s-1", "-f", "PAYLOAD", "--no-progress"),
		"a.swu":    swuOf(`software = { version = "1.0"; };`),
	}
	// Points inside what each format reads: the version, the manifest,
	// the header; the cpio header, the name, sw-description.
	failAfter := map[string][]int{"a.mender": {0, 100, 600, 1100, 1600}, "a.swu": {0, 50, 120, 130}}
	for name, data := range files {
		for _, after := range failAfter[name] {
			_, err := artifactfile.Inspector{}.Inspect(context.Background(), name, &failingObject{memObject: object(data), left: after})
			if !errors.Is(err, errStore) || errors.Is(err, domain.ErrArtifactUnreadable) {
				t.Errorf("%s failing after %d bytes: %v, want the store's error", name, after, err)
			}
		}
		cancelled, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := (artifactfile.Inspector{}).Inspect(cancelled, name, object(data)); !errors.Is(err, context.Canceled) {
			t.Errorf("%s with a cancelled context: %v", name, err)
		}
	}
}

func TestRawFilesAreNotRead(t *testing.T) {
	t.Parallel()
	obj := &failingObject{memObject: object([]byte("whatever")), left: 0}
	for _, name := range []string{"rootfs.img", "image.mender.gz", "x.swu.bak", "noext"} {
		meta, err := artifactfile.Inspector{}.Inspect(context.Background(), name, obj)
		if err != nil || meta.Format != domain.ArtifactRaw || meta.ArtifactName != "" {
			t.Errorf("%s: %+v, %v", name, meta, err)
		}
	}
}

// TestWriteFixtures rewrites testdata's hostile files from real ones when
// run with OTA_WRITE_FIXTURES=1; otherwise it checks nothing.
func TestWriteFixtures(t *testing.T) {
	if os.Getenv("OTA_WRITE_FIXTURES") != "1" {
		t.Skip("set OTA_WRITE_FIXTURES=1 to rewrite testdata")
	}
	real := writeMender(t, "rootfs-image", "-t", "cam", "-n", "fixture-1", "-f", "PAYLOAD", "--no-progress")
	write := func(name string, b []byte) {
		if err := os.WriteFile(filepath.Join("testdata", name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Cut 100 bytes into the compressed header (its tar header is 512).
	idx := bytes.Index(real, []byte("header.tar.gz\x00"))
	write("truncated.mender", real[:idx+512+100])
	p := splitMender(t, real)
	// A header that decompresses past the bound: a script of 20 MiB of
	// zeros, about 20 KiB compressed.
	p.setHeader("scripts/ArtifactInstall_Enter_00", make([]byte, 20<<20))
	write("header-bomb.mender", p.build(t))
	write("not-a-tar.mender", []byte(strings.Repeat("this is not a tar archive\n", 40)))

	write("wrong-magic.swu", append([]byte("070707"), swuOf(`software = { version = "1"; };`)[6:]...))
	write("malformed-sw-description.swu", swuOf("software =\n{\n\tversion = \"1.0\";\n\thardware-compatibility [\"1.0\", \"revB\"];\n};\n"))
	var bomb bytes.Buffer
	bomb.Write(newc{name: "sw-description", data: []byte("software = {"), fileSize: u32(0xFFFFFFFF)}.bytes())
	write("huge-sw-description.swu", bomb.Bytes())
}
