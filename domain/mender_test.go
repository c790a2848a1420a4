package domain_test

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/ai-device/ota/domain"
)

type testKey struct {
	pem  string
	sign func([]byte) string
}

func pkixPEM(t *testing.T, pub any) string {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
}

func keysOfEachType(t *testing.T) map[string]testKey {
	t.Helper()
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ek, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	edPub, edPriv, _ := ed25519.GenerateKey(rand.Reader)
	b64 := base64.StdEncoding.EncodeToString
	return map[string]testKey{
		"rsa": {pkixPEM(t, &rk.PublicKey), func(m []byte) string {
			d := sha256.Sum256(m)
			s, _ := rsa.SignPKCS1v15(rand.Reader, rk, crypto.SHA256, d[:])
			return b64(s)
		}},
		"ecdsa": {pkixPEM(t, &ek.PublicKey), func(m []byte) string {
			d := sha256.Sum256(m)
			s, _ := ecdsa.SignASN1(rand.Reader, ek, d[:])
			return b64(s)
		}},
		"ed25519": {pkixPEM(t, edPub), func(m []byte) string { return b64(ed25519.Sign(edPriv, m)) }},
	}
}

func TestDeviceKeyVerifiesEachKeyType(t *testing.T) {
	keys := keysOfEachType(t)
	msg := []byte(`{"id_data":"{\"device_id\":\"d\"}"}` + "\n")
	for name, k := range keys {
		key, err := domain.ParseDeviceKey("public_key", k.pem)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !key.Verify(msg, k.sign(msg)) {
			t.Errorf("%s: a good signature does not verify", name)
		}
		if key.Verify(append(msg, ' '), k.sign(msg)) {
			t.Errorf("%s: a signature verifies other bytes", name)
		}
		if key.Verify(msg, "not base64!") || key.Verify(msg, "") {
			t.Errorf("%s: garbage verifies", name)
		}
		for other, ok := range keys {
			if other != name && key.Verify(msg, ok.sign(msg)) {
				t.Errorf("%s verifies a signature by the %s key", name, other)
			}
		}
		if !strings.HasPrefix(key.PEM(), "-----BEGIN PUBLIC KEY-----") || key.Fingerprint() == "" {
			t.Errorf("%s: PEM %q fingerprint %q", name, key.PEM(), key.Fingerprint())
		}
	}
}

func TestParseDeviceKeyRefusesWhatIsNotAUsablePublicKey(t *testing.T) {
	weak, _ := rsa.GenerateKey(rand.Reader, 1024)
	good, _ := rsa.GenerateKey(rand.Reader, 2048)
	pkcs1 := string(pem.EncodeToMemory(&pem.Block{Type: "RSA PUBLIC KEY", Bytes: x509.MarshalPKCS1PublicKey(&good.PublicKey)}))
	priv := string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(good)}))
	pk := pkixPEM(t, &good.PublicKey)
	for name, text := range map[string]string{
		"empty": "", "not pem": "hello", "weak rsa": pkixPEM(t, &weak.PublicKey), "private key": priv,
		"two blocks": pk + pk, "bad der": "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n",
		"nul": pk + "\x00",
	} {
		_, err := domain.ParseDeviceKey("public_key", text)
		wantValidation(t, err, "public_key")
		_ = name
	}
	a, err := domain.ParseDeviceKey("public_key", pkcs1)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := domain.ParseDeviceKey("public_key", "\n"+pk+"\n")
	if !a.Equal(b) || a.PEM() != b.PEM() {
		t.Fatal("the PKCS#1 and PKIX forms of one key are different keys")
	}
	if (domain.DeviceKey{}).Equal(domain.DeviceKey{}) {
		t.Fatal("two absent keys are equal")
	}
}

func TestDeviceAdmission(t *testing.T) {
	keys := keysOfEachType(t)
	k1, _ := domain.ParseDeviceKey("public_key", keys["ed25519"].pem)
	k2, _ := domain.ParseDeviceKey("public_key", keys["ecdsa"].pem)
	a, err := domain.NewDeviceAdmission(asDeviceID("dev-1"), k1, t0)
	if err != nil || a.Generation() != 1 || !a.UpdatedAt().Equal(t0.UTC()) {
		t.Fatalf("new admission: %v gen=%d", err, a.Generation())
	}
	body := []byte("body")
	if !a.Admits(k1, body, keys["ed25519"].sign(body)) {
		t.Fatal("the registered key, properly signed, is not admitted")
	}
	if a.Admits(k2, body, keys["ecdsa"].sign(body)) {
		t.Fatal("another key is admitted")
	}
	if a.Admits(k1, body, keys["ecdsa"].sign(body)) {
		t.Fatal("the registered key presented with another key's signature is admitted")
	}
	a.RotateKey(k1, t1)
	if a.Generation() != 1 {
		t.Fatal("rotating to the same key moved the generation")
	}
	a.RotateKey(k2, t1)
	if a.Generation() != 2 || !a.Key().Equal(k2) {
		t.Fatalf("rotation: gen=%d", a.Generation())
	}
	if _, err := domain.NewDeviceAdmission(asDeviceID("dev-1"), domain.DeviceKey{}, t0); err == nil {
		t.Fatal("an admission without a key")
	}
}

// AdmitKey is what setting a key and accepting a request store: a first
// admission, the same one for the same key, a new generation for another.
func TestAdmitKey(t *testing.T) {
	keys := keysOfEachType(t)
	k1, _ := domain.ParseDeviceKey("public_key", keys["ed25519"].pem)
	k2, _ := domain.ParseDeviceKey("public_key", keys["ecdsa"].pem)
	dev := asDeviceID("dev-1")
	first, err := domain.AdmitKey(nil, dev, k1, t0)
	if err != nil || first.Generation() != 1 || !first.Key().Equal(k1) || first.DeviceID() != dev {
		t.Fatalf("first admission: %v %+v", err, first)
	}
	first.RevokeSessions(t0) // generation 2: AdmitKey must build on what is stored
	same, err := domain.AdmitKey(&first, dev, k1, t1)
	if err != nil || same.Generation() != 2 || !same.UpdatedAt().Equal(first.UpdatedAt()) {
		t.Fatalf("the same key again: %v gen=%d, want the admission kept", err, same.Generation())
	}
	other, err := domain.AdmitKey(&first, dev, k2, t1)
	if err != nil || other.Generation() != 3 || !other.Key().Equal(k2) {
		t.Fatalf("another key: %v gen=%d, want 3 with the new key", err, other.Generation())
	}
	if first.Generation() != 2 || !first.Key().Equal(k1) {
		t.Fatal("AdmitKey changed the admission it was handed")
	}
	if _, err := domain.AdmitKey(nil, dev, domain.DeviceKey{}, t0); err == nil {
		t.Fatal("a first admission without a key")
	}
}

func TestSessionTokens(t *testing.T) {
	secret := domain.SessionSecret(strings.Repeat("x", 32))
	claims := domain.SessionClaims{DeviceID: asDeviceID("dev-1"), Generation: 3, Expires: t0.Add(time.Hour)}
	tok, err := domain.IssueSessionToken(secret, claims, t0)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := domain.IssueSessionToken(secret, claims, t0)
	if tok == again {
		t.Fatal("two issues made the same token")
	}
	got, err := domain.VerifySessionToken(secret, tok, t0.Add(59*time.Minute))
	if err != nil || got.DeviceID.String() != "dev-1" || got.Generation != 3 || !got.Expires.Equal(claims.Expires.Truncate(time.Second)) {
		t.Fatalf("verify: %v %+v", err, got)
	}
	if _, err := domain.VerifySessionToken(secret, tok, t0.Add(time.Hour)); !errors.Is(err, domain.ErrUnauthorized) {
		t.Fatalf("expired: %v", err)
	}
	// The token is where the Mender edge gets the device id: a signed
	// token naming no valid device id is refused, never handed on.
	noDevice, err := domain.IssueSessionToken(secret, domain.SessionClaims{Generation: 3, Expires: claims.Expires}, t0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := domain.VerifySessionToken(secret, noDevice, t0); !errors.Is(err, domain.ErrUnauthorized) {
		t.Fatalf("token without a device id: %v", err)
	}
	if _, err := domain.VerifySessionToken(domain.SessionSecret(strings.Repeat("y", 32)), tok, t0); !errors.Is(err, domain.ErrUnauthorized) {
		t.Fatalf("other secret: %v", err)
	}
	parts := strings.Split(tok, ".")
	none := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`))
	other := base64.RawURLEncoding.EncodeToString([]byte(`{"sub":"dev-2","gen":3,"exp":99999999999}`))
	for name, bad := range map[string]string{
		"alg none": none + "." + parts[1] + ".", "swapped payload": parts[0] + "." + other + "." + parts[2],
		"two parts": parts[0] + "." + parts[1], "empty": "", "long": strings.Repeat("a", 5000),
	} {
		if _, err := domain.VerifySessionToken(secret, bad, t0); !errors.Is(err, domain.ErrUnauthorized) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := domain.IssueSessionToken(domain.SessionSecret("short"), claims, t0); err == nil {
		t.Fatal("issued with a short secret")
	}
	if fmt.Sprint(secret) != "[redacted]" || fmt.Sprintf("%#v", secret) != "[redacted]" {
		t.Fatal("the secret prints itself")
	}
}

func TestRunningVersionOfAnArtifactName(t *testing.T) {
	fw := mustFirmware(t, "fw-1", "cam-x1", "2.0.0", "")
	if v := domain.RunningVersion(&fw); !v.Equal(domain.MustParseVersion("2.0.0")) {
		t.Fatalf("named firmware: %v", v)
	}
	low := domain.RunningVersion(nil)
	for _, v := range []string{"0.0.0-1", "0.0.0-alpha", "0.0.0", "0.0.1", "1.0.0-rc.1", "2.0.0"} {
		if !low.Less(domain.MustParseVersion(v)) {
			t.Errorf("an unknown artifact name is not below %s", v)
		}
	}
	if !fw.AcceptsSource(low) {
		t.Fatal("a device running an unknown artifact is not offered the firmware")
	}
	gated := mustFirmware(t, "fw-2", "cam-x1", "3.0.0", "1.0.0")
	if gated.AcceptsSource(low) {
		t.Fatal("an unknown source passes min_source_version (documented: it does not)")
	}
}

func TestArtifactNames(t *testing.T) {
	spec := validSpec()
	spec.ArtifactName = "release 1.2"
	fw, err := domain.NewFirmware(idOf("fw-1"), spec, t0)
	if err != nil || fw.ArtifactName() != "release 1.2" || fw.Spec().ArtifactName != "release 1.2" {
		t.Fatalf("artifact name: %v %q", err, fw.ArtifactName())
	}
	if err := fw.CheckArtifactDeliverable(); err != nil {
		t.Fatal(err)
	}
	bare := mustFirmware(t, "fw-2", "cam-x1", "1.0.0", "")
	if err := bare.CheckArtifactDeliverable(); !errors.Is(err, domain.ErrNotDeliverable) {
		t.Fatalf("no artifact name: %v", err)
	}
	for _, bad := range []string{" lead", "trail ", "tab\there", strings.Repeat("a", 257), "nul\x00"} {
		spec.ArtifactName = bad
		_, err := domain.NewFirmware(idOf("fw-3"), spec, t0)
		wantValidation(t, err, "artifact_name")
	}
}

func TestFitInventory(t *testing.T) {
	items := []domain.InventoryItem{
		{Name: "device_type", Values: []string{"cam-x1"}},
		{Name: "ipv4", Values: []string{"10.0.0.1/24", "10.0.0.2/24"}},
		{Name: "", Values: []string{"dropped"}},
		{Name: strings.Repeat("n", 129), Values: []string{"dropped"}},
		{Name: "long", Values: []string{strings.Repeat("é", 400)}},
		{Name: "dup", Values: []string{"first"}},
		{Name: "dup", Values: []string{"last"}},
	}
	got := domain.FitInventory(items)
	if got["ipv4"] != "10.0.0.1/24,10.0.0.2/24" || got["dup"] != "last" || len(got) != 4 {
		t.Fatalf("fitted: %v", got)
	}
	if l := got["long"]; len(l) > domain.MaxAttributeValueLen || len(l) < domain.MaxAttributeValueLen-1 || !strings.HasPrefix(l, "éé") {
		t.Fatalf("cut value: %d bytes", len(l))
	}
	// At the limits exactly: kept whole.
	edge := domain.FitInventory([]domain.InventoryItem{
		{Name: strings.Repeat("n", domain.MaxAttributeKeyLen), Values: []string{strings.Repeat("v", domain.MaxAttributeValueLen)}},
	})
	if v, ok := edge[strings.Repeat("n", domain.MaxAttributeKeyLen)]; !ok || v != strings.Repeat("v", domain.MaxAttributeValueLen) {
		t.Fatalf("a name and a value at the limits: %d attributes, value of %d bytes; want both kept whole", len(edge), len(v))
	}
	var many []domain.InventoryItem
	for i := range 100 {
		many = append(many, domain.InventoryItem{Name: fmt.Sprintf("a%03d", i), Values: []string{"v"}})
	}
	many = append(many, domain.InventoryItem{Name: "artifact_name", Values: []string{"release-1"}}, domain.InventoryItem{Name: "device_type", Values: []string{"cam"}})
	got = domain.FitInventory(many)
	if len(got) != domain.MaxAttributes || got["artifact_name"] != "release-1" || got["device_type"] != "cam" || got["a000"] != "v" {
		t.Fatalf("oversized report: %d attributes, artifact_name=%q", len(got), got["artifact_name"])
	}
	var a domain.DeviceAttributes
	if err := a.Apply(domain.AttributesReplace, got, t0); err != nil {
		t.Fatalf("a fitted report is refused: %v", err)
	}
}

func TestTaskLogBounds(t *testing.T) {
	var lines []domain.LogLine
	for i := range domain.MaxLogLines + 50 {
		lines = append(lines, domain.LogLine{Level: "info", Message: fmt.Sprint(i), Timestamp: "t"})
	}
	lines[len(lines)-1].Message = strings.Repeat("m", 5000) + "\x00"
	l := domain.NewTaskLog(asUUID(taskA), lines, t0)
	got := l.Lines()
	if len(got) != domain.MaxLogLines || got[0].Message != "50" || len(got[len(got)-1].Message) != domain.MaxLogMessageLen {
		t.Fatalf("kept %d lines, first %q, last %d bytes", len(got), got[0].Message, len(got[len(got)-1].Message))
	}
}

func TestStopBeforeInstall(t *testing.T) {
	fw := mustFirmware(t, "fw-1", "cam-x1", "2.0.0", "")
	active := mustRollout(t, rolloutA, fw, domain.RolloutSpec{Percentage: 100}, t0)
	cancelled := active
	if err := cancelled.ChangeStatus(domain.RolloutCancelled, fw, t0); err != nil {
		t.Fatal(err)
	}
	for _, st := range []domain.TaskStatus{domain.TaskPending, domain.TaskDownloading, domain.TaskDownloaded} {
		tk := taskIn(st, 50)
		if tk.StopBeforeInstall(fw, active, t1) {
			t.Errorf("%s: stopped for an active rollout", st)
		}
		if !tk.StopBeforeInstall(fw, cancelled, t1) || tk.Status() != domain.TaskCancelled || tk.ErrorCode() != domain.CodeRolloutCancelled {
			t.Errorf("%s: not stopped for a cancelled rollout: %s %s", st, tk.Status(), tk.ErrorCode())
		}
		tk = taskIn(st, 0)
		if !tk.StopBeforeInstall(revoked(fw), active, t1) || tk.ErrorCode() != domain.CodeFirmwareRevoked {
			t.Errorf("%s: not stopped for a revoked firmware", st)
		}
	}
	for _, st := range []domain.TaskStatus{domain.TaskInstalling, domain.TaskSucceeded, domain.TaskFailed} {
		tk := taskIn(st, 10)
		if tk.StopBeforeInstall(revoked(fw), cancelled, t1) || tk.Status() != st {
			t.Errorf("%s was stopped", st)
		}
	}
}

// TestStopBeforeStart: DDI's stop point stops only a task its device has
// reported nothing on; any progress means the device may be installing
// (its agent reports download and install alike), so the task finishes.
func TestStopBeforeStart(t *testing.T) {
	fw := mustFirmware(t, "fw-1", "cam-x1", "2.0.0", "")
	active := mustRollout(t, rolloutA, fw, domain.RolloutSpec{Percentage: 100}, t0)
	cancelled := active
	if err := cancelled.ChangeStatus(domain.RolloutCancelled, fw, t0); err != nil {
		t.Fatal(err)
	}
	tk := taskIn(domain.TaskPending, 0)
	if tk.StopBeforeStart(fw, active, t1) || tk.Status() != domain.TaskPending {
		t.Errorf("pending: stopped for an active rollout and a released firmware")
	}
	if !tk.StopBeforeStart(fw, cancelled, t1) || tk.Status() != domain.TaskCancelled || tk.ErrorCode() != domain.CodeRolloutCancelled {
		t.Errorf("pending: not stopped for a cancelled rollout: %s %s", tk.Status(), tk.ErrorCode())
	}
	tk = taskIn(domain.TaskPending, 0)
	if !tk.StopBeforeStart(revoked(fw), active, t1) || tk.ErrorCode() != domain.CodeFirmwareRevoked || !tk.UpdatedAt().Equal(t1) {
		t.Errorf("pending: not stopped for a revoked firmware: %s %s", tk.Status(), tk.ErrorCode())
	}
	for _, st := range []domain.TaskStatus{domain.TaskDownloading, domain.TaskDownloaded, domain.TaskInstalling, domain.TaskSucceeded, domain.TaskFailed} {
		tk := taskIn(st, 10)
		if tk.StopBeforeStart(revoked(fw), cancelled, t1) || tk.Status() != st {
			t.Errorf("%s was stopped: a task its device reported progress on finishes", st)
		}
	}
}

func TestAuthRequests(t *testing.T) {
	keys := keysOfEachType(t)
	k1, _ := domain.ParseDeviceKey("pubkey", keys["rsa"].pem)
	k2, _ := domain.ParseDeviceKey("pubkey", keys["ed25519"].pem)
	r, err := domain.NewAuthRequest(idOf("req-1"), asDeviceID("dev-1"), `{"device_id":"dev-1"}`, k1, "not a model!", t0)
	if err != nil || r.Status() != domain.AuthRequestPending || r.DeviceType() != "" {
		t.Fatalf("new: %v %v %q", err, r.Status(), r.DeviceType())
	}
	if _, err := r.AcceptModel(""); err == nil {
		t.Fatal("accepted without a model")
	}
	if m, err := r.AcceptModel("cam-x1"); err != nil || m != "cam-x1" {
		t.Fatalf("operator model: %v %q", err, m)
	}
	r.Reject(t1)
	if r.Status() != domain.AuthRequestRejected || !r.Key().Equal(k1) {
		t.Fatal("a rejected request keeps its key, rejected")
	}
	r2, _ := domain.NewAuthRequest(idOf("req-2"), asDeviceID("dev-1"), `{"device_id":"dev-1"}`, k2, "cam-x2", t1)
	if m, _ := r2.AcceptModel(""); m != "cam-x2" {
		t.Fatalf("device type as model: %q", m)
	}
}

func TestAuthRequestsExpireByTheirLastChange(t *testing.T) {
	k, _ := domain.ParseDeviceKey("pubkey", keysOfEachType(t)["ed25519"].pem)
	r, _ := domain.NewAuthRequest(idOf("req-1"), asDeviceID("dev-1"), `{}`, k, "", t0)
	ttl := time.Hour
	if r.ExpiredBy(domain.AuthRequestCutoff(t0.Add(ttl), ttl)) {
		t.Fatal("expired at exactly its age")
	}
	if !r.ExpiredBy(domain.AuthRequestCutoff(t0.Add(ttl+time.Second), ttl)) {
		t.Fatal("not expired past its age")
	}
	r.Reject(t0.Add(30 * time.Minute))
	if r.ExpiredBy(domain.AuthRequestCutoff(t0.Add(ttl+time.Second), ttl)) {
		t.Fatal("a rejection is a change: its age counts from it")
	}
	if !domain.PendingRoom(2, 3) || domain.PendingRoom(3, 3) {
		t.Fatal("room under the bound")
	}
}

func TestARequestForARegisteredDeviceNeedsReplaceKey(t *testing.T) {
	keys := keysOfEachType(t)
	k1, _ := domain.ParseDeviceKey("pubkey", keys["ed25519"].pem)
	k2, _ := domain.ParseDeviceKey("pubkey", keys["ecdsa"].pem)
	r, _ := domain.NewAuthRequest(idOf("req-1"), asDeviceID("dev-1"), `{}`, k2, "cam-x2", t0)
	if c := r.ConflictWith("", nil); c != nil || c.CheckAccept(r.DeviceID(), false) != nil {
		t.Fatalf("an unregistered device conflicts: %+v", c)
	}
	adm, _ := domain.NewDeviceAdmission(asDeviceID("dev-1"), k1, t0)
	c := r.ConflictWith("cam-x1", &adm)
	if c == nil || c.RegisteredModel != "cam-x1" || !c.AdmittedKey.Equal(k1) || !c.DeviceTypeMismatch {
		t.Fatalf("conflict: %+v", c)
	}
	err := c.CheckAccept(r.DeviceID(), false)
	if !errors.Is(err, domain.ErrInvalidTransition) || !strings.Contains(err.Error(), k1.Fingerprint()) {
		t.Fatalf("accept without replace_key: %v", err)
	}
	if err := c.CheckAccept(r.DeviceID(), true); err != nil {
		t.Fatalf("accept with replace_key: %v", err)
	}
	if c := r.ConflictWith("cam-x2", nil); c == nil || c.DeviceTypeMismatch || !c.AdmittedKey.IsZero() ||
		!errors.Is(c.CheckAccept(r.DeviceID(), false), domain.ErrInvalidTransition) {
		t.Fatalf("a registered device without a key: %+v", c)
	}
}

func TestNewAuthRequestRefusesTheZeroID(t *testing.T) {
	k, _ := domain.ParseDeviceKey("pubkey", keysOfEachType(t)["rsa"].pem)
	_, err := domain.NewAuthRequest(domain.UUID{}, asDeviceID("dev-1"), `{"device_id":"dev-1"}`, k, "", t0)
	wantValidation(t, err, "id")
}

// rsaKeyOfBits is the PKIX PEM of an RSA public key whose modulus has
// exactly bits bits (not a usable key pair: only its size matters here).
func rsaKeyOfBits(t *testing.T, bits int) string {
	t.Helper()
	n := new(big.Int).Lsh(big.NewInt(1), uint(bits-1))
	n.Add(n, big.NewInt(1))
	return pkixPEM(t, &rsa.PublicKey{N: n, E: 65537})
}

func TestParseDeviceKeyRefusesRSAKeysAbove4096Bits(t *testing.T) {
	for _, bits := range []int{4097, 8192, 16384} {
		_, err := domain.ParseDeviceKey("pubkey", rsaKeyOfBits(t, bits))
		wantValidation(t, err, "pubkey")
	}
	if _, err := domain.ParseDeviceKey("pubkey", rsaKeyOfBits(t, 4096)); err != nil {
		t.Fatalf("a 4096-bit key: %v", err)
	}
	// A key stored before the bound existed still loads.
	if _, err := domain.RehydrateDeviceAdmission("dev-1", rsaKeyOfBits(t, 8192), 1, t0); err != nil {
		t.Fatalf("a stored 8192-bit key: %v", err)
	}
}

// TestValidateArtifactName: a Mender device reports its artifact name back
// verbatim, so a control character anywhere, or a leading or trailing
// space, is refused; empty means none.
func TestValidateArtifactName(t *testing.T) {
	for _, ok := range []string{"", "release-1.4.0", "a b"} {
		if err := domain.ValidateArtifactName(ok); err != nil {
			t.Errorf("%q refused: %v", ok, err)
		}
	}
	for _, bad := range []string{"\x01release", "rel\x7fease", "release\x00", " release", "release ", strings.Repeat("a", domain.MaxArtifactNameLen+1)} {
		if err := domain.ValidateArtifactName(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
