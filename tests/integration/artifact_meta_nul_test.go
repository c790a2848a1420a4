package integration

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ai-device/ota/adapters/artifactfile"
	"github.com/ai-device/ota/adapters/blobstore"
	"github.com/ai-device/ota/adapters/local"
	"github.com/ai-device/ota/adapters/postgres"
	"github.com/ai-device/ota/adapters/rest"
	"github.com/ai-device/ota/application"
	"github.com/ai-device/ota/tests/testenv"
)

// tarBytes is a tar archive of the named files, in order.
func tarBytes(t *testing.T, files ...[2]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		if err := tw.WriteHeader(&tar.Header{Name: f[0], Mode: 0o600, Size: int64(len(f[1]))}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(f[1])); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// menderWithName is a minimal format-3 .mender file (uncompressed header)
// whose header-info names the artifact with the JSON string name (as it
// appears in the file, escapes and all).
func menderWithName(t *testing.T, jsonName string) []byte {
	t.Helper()
	header := tarBytes(t,
		[2]string{"header-info", `{"payloads":[{"type":"rootfs-image"}],"artifact_provides":{"artifact_name":` + jsonName +
			`},"artifact_depends":{"device_type":["cam-x1"]}}`},
		[2]string{"headers/0000/type-info", `{"type":"rootfs-image","artifact_provides":{"rootfs-image.version":"1.0.0"}}`},
	)
	payload := tarBytes(t, [2]string{"rootfs.img", strings.Repeat("root ", 100)})
	sum := sha256.Sum256(payload)
	manifest := hex.EncodeToString(sum[:]) + "  data/0000.tar\n"
	return tarBytes(t,
		[2]string{"version", `{"format":"mender","version":3}`},
		[2]string{"manifest", manifest},
		[2]string{"header.tar", string(header)},
		[2]string{"data/0000.tar", string(payload)},
	)
}

// cpioNewc is a one-entry cpio "newc" archive (the start of a .swu file).
func cpioNewc(name, data string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "070701%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x",
		1, 0o100644, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(name)+1, 0)
	b.WriteString(name + "\x00")
	for b.Len()%4 != 0 {
		b.WriteByte(0)
	}
	b.WriteString(data)
	for b.Len()%4 != 0 {
		b.WriteByte(0)
	}
	return b.Bytes()
}

// TestUploadedFileMetadataWithNULIsNotAnInternalError: what a .mender or
// .swu file says about itself is hostile input like any other. A header
// whose artifact name (JSON "\u0000") or sw-description whose version or
// description (libconfig "\x00") holds a NUL is read into the artifact's
// meta, which Postgres's jsonb column refuses ("unsupported Unicode escape
// sequence"): the upload answers 500 INTERNAL instead of a 4xx that names
// the file's fault (ARTIFACT_UNREADABLE, as for every other unreadable
// file, or VALIDATION_FAILED). The memory store takes the same file, so
// the stores disagree too.
func TestUploadedFileMetadataWithNULIsNotAnInternalError(t *testing.T) {
	db, _ := testenv.PostgresDB(t)
	dir := t.TempDir()
	blobs, err := blobstore.Open(context.Background(), "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = blobs.Close() })
	arts, err := application.NewArtifacts(blobs, postgres.NewArtifactRepository(db), artifactfile.Inspector{},
		local.NewClock(), local.NewUUIDs(), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	e := rest.NewServer(rest.Config{AdminToken: adminToken}, nil, nil, nil, nil, nil, slog.New(slog.DiscardHandler),
		rest.WithArtifacts(arts))
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)

	for _, c := range []struct{ name, file string }{
		{"mender artifact_name", "nul.mender"},
		{"swu version", "nul-version.swu"},
		{"swu description", "nul-description.swu"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var body []byte
			switch c.file {
			case "nul.mender":
				body = menderWithName(t, `"release-1\u0000"`)
			case "nul-version.swu":
				body = cpioNewc("sw-description", "software =\n{\n\tversion = \"1.0.0\\x00\";\n};\n")
			case "nul-description.swu":
				body = cpioNewc("sw-description", "software =\n{\n\tversion = \"1.0.0\";\n\tdescription = \"a\\x00b\";\n};\n")
			}
			req, _ := http.NewRequest(http.MethodPost, srv.URL+"/api/v1/admin/artifacts?filename="+c.file, bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/octet-stream")
			req.Header.Set("Authorization", "Bearer "+adminToken)
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode >= 500 || res.StatusCode < 400 {
				t.Errorf("upload of %s: %d %s, want a 4xx naming the file's fault (ARTIFACT_UNREADABLE or VALIDATION_FAILED)",
					c.file, res.StatusCode, raw)
			}
			var rows int
			if err := db.Get(&rows, `SELECT count(*) FROM artifacts`); err != nil {
				t.Fatal(err)
			}
			if rows != 0 && res.StatusCode >= 400 {
				t.Errorf("a refused upload left %d artifact row(s)", rows)
			}
		})
	}
	var left []string
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			left = append(left, p)
		}
		return nil
	})
	if len(left) != 0 {
		t.Errorf("refused uploads left objects: %v", left)
	}
	// The same files without the NUL are stored: the refusal above is for
	// the NUL alone.
	for name, body := range map[string][]byte{
		"ok.mender": menderWithName(t, `"release-1"`),
		"ok.swu":    cpioNewc("sw-description", "software =\n{\n\tversion = \"1.0.0\";\n\tdescription = \"ab\";\n};\n"),
	} {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/api/v1/admin/artifacts?filename="+name, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/octet-stream")
		req.Header.Set("Authorization", "Bearer "+adminToken)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusCreated {
			t.Errorf("control upload of %s: %d %s, want 201", name, res.StatusCode, raw)
		}
	}
}
