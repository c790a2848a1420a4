package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// S3URLEnv names the variable holding the endpoint of an S3-compatible
// server tests may create buckets on, such as http://127.0.0.1:8333. Its
// credentials are AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (the
// variables otad's s3:// store reads too). Unset, the tests start
// SeaweedFS's `weed` when it is installed (.ci/run installs it).
const S3URLEnv = "OTA_TEST_S3_URL"

// S3Region is the region the test buckets are made and addressed in; an
// S3-compatible server accepts any.
const S3Region = "us-east-1"

// The fixed credentials of a weed the tests start (its -s3.config file).
const (
	weedAccessKey = "otatestaccess"
	weedSecretKey = "otatestsecret0123456789"
)

// S3Server is an S3-compatible endpoint with its credentials.
type S3Server struct {
	Endpoint  string // http://127.0.0.1:port
	AccessKey string
	SecretKey string

	weed *Weed // set when the tests started it: it can be stopped and restarted
}

var (
	s3Once   sync.Once
	s3Shared S3Server
	s3Skip   string
	s3Err    error
	s3Dir    string // the shared weed's directory, removed with it
)

// stopSharedWeed stops the weed S3 started for this test binary, and
// removes its data: Main and RunWithOtad call it once the tests are done,
// so no server outlives its test binary.
func stopSharedWeed() {
	if s3Shared.weed != nil {
		s3Shared.weed.Stop()
	}
	if s3Dir != "" {
		_ = os.RemoveAll(s3Dir)
	}
}

// S3 returns the S3 server of this test binary: S3URLEnv's, else one weed
// started for the binary (tests share it and keep apart by bucket; Main
// and RunWithOtad stop it when the tests are done), else the test is skipped (fails
// under OTA_TEST_REQUIRE_SERVICES=1). It sets AWS_ACCESS_KEY_ID and
// AWS_SECRET_ACCESS_KEY for the process when it starts weed, so that
// blobstore.Open's s3:// buckets find them as otad would.
func S3(t testing.TB) S3Server {
	t.Helper()
	s3Once.Do(s3Setup)
	if s3Skip != "" {
		Skip(t, "weed", s3Skip)
	}
	if s3Err != nil {
		t.Fatalf("testenv: %v", s3Err)
	}
	return s3Shared
}

func s3Setup() {
	if ep := os.Getenv(S3URLEnv); ep != "" {
		s3Shared = S3Server{Endpoint: ep, AccessKey: os.Getenv("AWS_ACCESS_KEY_ID"), SecretKey: os.Getenv("AWS_SECRET_ACCESS_KEY")}
		return
	}
	bin, err := exec.LookPath("weed")
	if err != nil {
		s3Skip = "testenv: no S3 server for this test: set " + S3URLEnv +
			" (with AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY) or install SeaweedFS's weed (see .ci/run)"
		return
	}
	dir, err := os.MkdirTemp("", "ota-weed-")
	if err != nil {
		s3Err = err
		return
	}
	s3Dir = dir
	w, err := startWeed(bin, dir)
	if err != nil {
		s3Err = err
		return
	}
	_ = os.Setenv("AWS_ACCESS_KEY_ID", weedAccessKey)
	_ = os.Setenv("AWS_SECRET_ACCESS_KEY", weedSecretKey)
	s3Shared = w.Server()
}

// StartWeed starts a weed of the test's own (a fault test stops and
// restarts it), stopped when the test ends. It skips like S3 when weed is
// not installed. Its credentials are Server's, which an otad using it must
// be given (WeedCredentials).
func StartWeed(t testing.TB) *Weed {
	t.Helper()
	bin, err := exec.LookPath("weed")
	if err != nil {
		Skip(t, "weed", "testenv: SeaweedFS's weed is not installed (see .ci/run)")
	}
	w, err := startWeed(bin, t.TempDir())
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(func() { w.Stop() })
	return w
}

// Weed is one `weed server -s3` process: master, volume, filer and S3
// gateway, on loopback ports of its own, storing in one directory.
type Weed struct {
	bin, dir string
	s3Port   int
	ports    []string
	log      *LogBuffer
	cmd      *exec.Cmd
	done     chan struct{}
}

// Credentials are the AWS_* variables that let an otad use this weed.
func (w *Weed) Credentials() map[string]string {
	return map[string]string{"AWS_ACCESS_KEY_ID": weedAccessKey, "AWS_SECRET_ACCESS_KEY": weedSecretKey}
}

// Server is the weed's endpoint and credentials.
func (w *Weed) Server() S3Server {
	return S3Server{Endpoint: "http://127.0.0.1:" + strconv.Itoa(w.s3Port), AccessKey: weedAccessKey, SecretKey: weedSecretKey, weed: w}
}

// Log is what weed wrote.
func (w *Weed) Log() string { return w.log.String() }

func startWeed(bin, dir string) (*Weed, error) {
	cfg := fmt.Sprintf(`{"identities":[{"name":"ota","credentials":[{"accessKey":%q,"secretKey":%q}],"actions":["Admin","Read","List","Tagging","Write"]}]}`,
		weedAccessKey, weedSecretKey)
	cfgPath := filepath.Join(dir, "s3.json")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return nil, err
	}
	// weed listens on each port and on port+10000 (gRPC): pick ports whose
	// both halves are free.
	ports := make([]string, 4)
	for i := range ports {
		p, err := freePortPair()
		if err != nil {
			return nil, err
		}
		ports[i] = strconv.Itoa(p)
	}
	s3Port, _ := strconv.Atoi(ports[3])
	w := &Weed{bin: bin, dir: dir, s3Port: s3Port, ports: ports, log: &LogBuffer{}}
	return w, w.Start()
}

// Start (re)starts the process on its directory and ports, and waits until
// the S3 gateway answers.
func (w *Weed) Start() error {
	data := filepath.Join(w.dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return err
	}
	w.cmd = exec.Command(w.bin, "server", "-s3", "-filer", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
		"-dir="+data, "-master.port="+w.ports[0], "-volume.port="+w.ports[1], "-filer.port="+w.ports[2],
		"-s3.port="+w.ports[3], "-s3.config="+filepath.Join(w.dir, "s3.json"),
		"-master.volumeSizeLimitMB=64", "-volume.max=0")
	w.cmd.Stdout, w.cmd.Stderr = w.log, w.log
	if err := w.cmd.Start(); err != nil {
		return fmt.Errorf("starting weed: %w", err)
	}
	w.done = make(chan struct{})
	cmd, done := w.cmd, w.done
	go func() { _ = cmd.Wait(); close(done) }()
	deadline := time.Now().Add(90 * time.Second)
	srv := w.Server()
	for time.Now().Before(deadline) {
		select {
		case <-done:
			return fmt.Errorf("weed exited at start:\n%s", w.log.Tail(40))
		default:
		}
		if srv.probe() == nil {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	w.Stop()
	return fmt.Errorf("weed's S3 gateway did not take a write within 90s:\n%s", w.log.Tail(40))
}

// Stop ends the process (SIGTERM, then SIGKILL after 2 s: an outage need
// not be graceful); its data stays for Start.
func (w *Weed) Stop() {
	if w.cmd == nil || w.cmd.Process == nil {
		return
	}
	_ = w.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-w.done:
	case <-time.After(2 * time.Second):
		_ = w.cmd.Process.Kill()
		<-w.done
	}
	w.cmd = nil
}

// probe writes an object: the gateway is up, takes the credentials, and
// has a volume to write to (after a restart, listing works well before
// writing does).
func (s S3Server) probe() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c := s.client()
	_, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(probeBucket)})
	var owned *types.BucketAlreadyOwnedByYou
	var exists *types.BucketAlreadyExists
	if err != nil && !errors.As(err, &owned) && !errors.As(err, &exists) {
		return err
	}
	_, err = c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(probeBucket), Key: aws.String("probe"), Body: strings.NewReader("ok")})
	return err
}

// probeBucket is where the readiness probe writes.
const probeBucket = "ota-testenv-probe"

func (s S3Server) client() *s3.Client {
	return s3.New(s3.Options{
		BaseEndpoint: aws.String(s.Endpoint),
		Region:       S3Region,
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(s.AccessKey, s.SecretKey, ""),
		HTTPClient:   &http.Client{Timeout: 10 * time.Second},
	})
}

// NewBucket makes a bucket of the test's own and returns its store URL
// (OTA_ARTIFACT_STORE's form). The bucket is left behind: its objects are
// the test's, and the server is a test server.
func (s S3Server) NewBucket(t testing.TB) string {
	t.Helper()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "ota-test-" + hex.EncodeToString(b)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := s.client().CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		t.Fatalf("testenv: creating bucket %s: %v", name, err)
	}
	return s.StoreURL(name)
}

// StoreURL is the OTA_ARTIFACT_STORE URL of a bucket on this server.
func (s S3Server) StoreURL(bucket string) string {
	q := url.Values{"endpoint": {s.Endpoint}, "use_path_style": {"true"}, "region": {S3Region}}
	return "s3://" + bucket + "?" + q.Encode()
}

// PendingUploads lists the multipart uploads begun and neither completed
// nor aborted in bucket under prefix: an aborted Put must leave none.
func (s S3Server) PendingUploads(ctx context.Context, bucket, prefix string) ([]string, error) {
	out, err := s.client().ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String(bucket), Prefix: aws.String(prefix)})
	if err != nil {
		return nil, err
	}
	var keys []string
	for _, u := range out.Uploads {
		keys = append(keys, aws.ToString(u.Key))
	}
	return keys, nil
}

// Weed is the server's process when the tests started it (nil for
// S3URLEnv's).
func (s S3Server) Weed() (*Weed, error) {
	if s.weed == nil {
		return nil, errors.New("testenv: this S3 server was not started by the tests")
	}
	return s.weed, nil
}

// freePortPair finds a port p such that p and p+10000 are both free.
func freePortPair() (int, error) {
	for range 50 {
		p, err := FreePort()
		if err != nil {
			return 0, err
		}
		if p+10000 > 65535 {
			continue
		}
		if ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p+10000)); err == nil {
			_ = ln.Close()
			return p, nil
		}
	}
	return 0, errors.New("testenv: no free port pair for weed")
}
