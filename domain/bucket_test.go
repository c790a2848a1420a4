package domain_test

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"

	"github.com/ai-device/ota/domain"
)

// referenceBucket is docs/DOMAIN.md check rule 4 written out independently:
// first 8 bytes of SHA-256(rollout_id ":" device_id), big-endian, mod 100.
func referenceBucket(rolloutID, deviceID string) int {
	sum := sha256.Sum256([]byte(rolloutID + ":" + deviceID))
	return int(binary.BigEndian.Uint64(sum[:8]) % 100)
}

func TestBucketKnownVectors(t *testing.T) {
	// want values were computed outside Go:
	//   printf '%s' "$rollout:$device" | sha256sum  → first 16 hex digits, mod 100.
	tests := []struct {
		rollout, device string
		prefix          string // first 8 bytes of the digest, hex
		want            int
	}{
		{rolloutA, "cam-0001", "8b062115ebf876cf", 67},
		{rolloutA, "speaker-42", "25cdf4fdec7db98b", 19},
		{rolloutB, "aibox.A:01", "99068fe4e3604dc9", 1},
	}
	for _, tt := range tests {
		t.Run(tt.device, func(t *testing.T) {
			sum := sha256.Sum256([]byte(tt.rollout + ":" + tt.device))
			if got := fmt.Sprintf("%x", sum[:8]); got != tt.prefix {
				t.Fatalf("fixture digest prefix %s, want %s", got, tt.prefix)
			}
			if got := referenceBucket(tt.rollout, tt.device); got != tt.want {
				t.Fatalf("reference bucket %d, want %d", got, tt.want)
			}
			if got := domain.Bucket(tt.rollout, tt.device); got != tt.want {
				t.Fatalf("Bucket(%s, %s) = %d, want %d", tt.rollout, tt.device, got, tt.want)
			}
		})
	}
}

func TestBucketMatchesReference(t *testing.T) {
	for _, r := range []string{rolloutA, rolloutB, rolloutC} {
		for i := 0; i < 500; i++ {
			dev := fmt.Sprintf("dev-%04d", i)
			if got, want := domain.Bucket(r, dev), referenceBucket(r, dev); got != want {
				t.Fatalf("Bucket(%s, %s) = %d, reference %d", r, dev, got, want)
			}
		}
	}
}

func TestBucketDeterministicAndInRange(t *testing.T) {
	for i := 0; i < 2000; i++ {
		dev := fmt.Sprintf("device-%d", i)
		b := domain.Bucket(rolloutA, dev)
		if b < 0 || b >= 100 {
			t.Fatalf("Bucket(%s) = %d, outside [0,100)", dev, b)
		}
		if again := domain.Bucket(rolloutA, dev); again != b {
			t.Fatalf("Bucket(%s) not deterministic: %d then %d", dev, b, again)
		}
	}
}

func TestBucketCanonicalLowercaseRolloutID(t *testing.T) {
	upper := strings.ToUpper(rolloutA)
	if upper == rolloutA {
		t.Fatal("fixture must contain letters")
	}
	for _, dev := range []string{"cam-0001", "speaker-42", "x"} {
		if got, want := domain.Bucket(upper, dev), referenceBucket(rolloutA, dev); got != want {
			t.Errorf("Bucket(upper-case id, %s) = %d, want canonical %d", dev, got, want)
		}
	}
}

func TestBucketDeviceIDIsCaseSensitive(t *testing.T) {
	// Device ids are opaque: "CAM-1" and "cam-1" are different devices and
	// must not be folded together. At least one of these pairs differs.
	differ := 0
	for i := 0; i < 20; i++ {
		lo, up := fmt.Sprintf("cam-%d", i), fmt.Sprintf("CAM-%d", i)
		if domain.Bucket(rolloutA, lo) != domain.Bucket(rolloutA, up) {
			differ++
		}
		if got, want := domain.Bucket(rolloutA, up), referenceBucket(rolloutA, up); got != want {
			t.Fatalf("Bucket(%s) = %d, want %d", up, got, want)
		}
	}
	if differ == 0 {
		t.Fatal("device id case never changes the bucket: device ids are being folded")
	}
}

func TestBucketDependsOnRollout(t *testing.T) {
	same := 0
	const n = 1000
	for i := 0; i < n; i++ {
		dev := fmt.Sprintf("dev-%d", i)
		if domain.Bucket(rolloutA, dev) == domain.Bucket(rolloutB, dev) {
			same++
		}
	}
	// Independent rollouts agree about 1% of the time by chance.
	if same > n/20 {
		t.Fatalf("buckets of two rollouts agree for %d of %d devices", same, n)
	}
}

func TestBucketRoughlyUniform(t *testing.T) {
	const n = 10000
	for _, r := range []string{rolloutA, rolloutB} {
		t.Run(r, func(t *testing.T) {
			var deciles [10]int
			for i := 0; i < n; i++ {
				deciles[domain.Bucket(r, fmt.Sprintf("device-%05d", i))/10]++
			}
			// Expected 1000 per decile, σ = 30; ±150 is 5σ.
			for d, c := range deciles {
				if c < 850 || c > 1150 {
					t.Errorf("decile %d has %d of %d devices, want 1000±150 (all: %v)", d, c, n, deciles)
				}
			}
		})
	}
}

func TestAdmissionIsMonotonic(t *testing.T) {
	fw := mustFirmware(t, "fw-1", "cam-x1", "1.2.0", "")
	r := mustRollout(t, rolloutA, fw, domain.RolloutSpec{Percentage: 10}, t0)
	const n = 5000
	at10 := make([]bool, n)
	count10 := 0
	for i := range at10 {
		at10[i] = admits(t, r, fmt.Sprintf("device-%05d", i))
		if at10[i] {
			count10++
		}
	}
	if err := r.SetPercentage(50, t1); err != nil {
		t.Fatal(err)
	}
	count50 := 0
	for i := range at10 {
		admitted := admits(t, r, fmt.Sprintf("device-%05d", i))
		if at10[i] && !admitted {
			t.Fatalf("device-%05d admitted at 10%% but not at 50%%", i)
		}
		if admitted {
			count50++
		}
	}
	// 10% and 50% of 5000 are 500 and 2500 (σ ≈ 21 and 35).
	if count10 < 400 || count10 > 600 {
		t.Errorf("admitted at 10%%: %d of %d", count10, n)
	}
	if count50 < 2300 || count50 > 2700 {
		t.Errorf("admitted at 50%%: %d of %d", count50, n)
	}
}

func TestAdmissionMonotonicAcrossAllPercentages(t *testing.T) {
	fw := mustFirmware(t, "fw-1", "cam-x1", "1.2.0", "")
	for i := 0; i < 200; i++ {
		dev := fmt.Sprintf("dev-%d", i)
		r := mustRollout(t, rolloutC, fw, domain.RolloutSpec{Percentage: 0}, t0)
		first := -1
		for p := 0; p <= 100; p++ {
			if err := r.SetPercentage(p, t1); err != nil {
				t.Fatal(err)
			}
			admitted := admits(t, r, dev)
			if admitted && first < 0 {
				first = p
			}
			if first >= 0 && !admitted {
				t.Fatalf("%s admitted at %d%% but not at %d%%", dev, first, p)
			}
		}
		// The device is admitted exactly from percentage bucket+1.
		if want := referenceBucket(rolloutC, dev) + 1; first != want {
			t.Fatalf("%s first admitted at %d%%, want %d%%", dev, first, want)
		}
	}
}
