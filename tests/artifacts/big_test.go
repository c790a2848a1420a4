package artifacts

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// bigUploadEnv set to 0 skips TestBigUploadMemory (2 GiB through otad,
// about 30 s on this machine's two cores).
const bigUploadEnv = "OTA_TEST_BIG_UPLOAD"

// patternReader yields n bytes without holding them: one random 1 MiB
// block repeated, each copy stamped with its index, so no two blocks are
// equal and nothing can compress the stream away. Copying blocks (not
// computing bytes) keeps it cheap under the race detector.
type patternReader struct {
	n, off int64
	block  []byte
}

func newPatternReader(n int64, block []byte) *patternReader {
	return &patternReader{n: n, block: block}
}

func (p *patternReader) Read(b []byte) (int, error) {
	if p.off >= p.n {
		return 0, io.EOF
	}
	bs := int64(len(p.block))
	in := p.off % bs
	if in == 0 {
		binary.LittleEndian.PutUint64(p.block, uint64(p.off/bs))
	}
	m := min(int64(len(b)), bs-in, p.n-p.off)
	copy(b, p.block[in:in+m])
	p.off += m
	return int(m), nil
}

// vmHWM is the process's peak resident set (VmHWM) in bytes.
func vmHWM(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatalf("reading otad's status: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc/<pid>/status")
	return 0
}

// A 2 GiB upload streams: otad's peak resident memory stays under
// 100 MiB, and the artifact's size and sha256 are the body's.
func TestBigUploadMemory(t *testing.T) {
	t.Parallel()
	if os.Getenv(bigUploadEnv) == "0" {
		t.Skipf("%s=0", bigUploadEnv)
	}
	const size = int64(2) << 30
	r := startMemory(t, nil)
	block := make([]byte, 1<<20)
	_, _ = rand.Read(block)
	// The body is hashed as it is sent: the answer must carry that sha256.
	h := sha256.New()
	start := time.Now()
	req, _ := http.NewRequest(http.MethodPost, r.otad.URL+"/api/v1/admin/artifacts?filename=big.img",
		io.TeeReader(newPatternReader(size, block), h))
	req.ContentLength = size
	req.Header.Set("Content-Type", "application/octet-stream")
	req.Header.Set("Authorization", "Bearer "+adminToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var a struct {
		SizeBytes int64  `json:"size_bytes"`
		SHA256    string `json:"sha256"`
	}
	body, _ := io.ReadAll(res.Body)
	_ = json.Unmarshal(body, &a)
	want := hex.EncodeToString(h.Sum(nil))
	if res.StatusCode != http.StatusCreated || a.SizeBytes != size || a.SHA256 != want {
		t.Fatalf("2 GiB upload = %d %s", res.StatusCode, body)
	}
	peak := vmHWM(t, r.otad.Pid())
	t.Logf("2 GiB in %v; otad's peak RSS %d MiB", time.Since(start).Round(time.Second), peak>>20)
	if peak >= 100<<20 {
		t.Errorf("otad's peak RSS was %d MiB, want under 100 MiB", peak>>20)
	}
}
