package redislock

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/google/uuid"
)

// redisKeySlot is Redis Cluster's keyHashSlot, written from its definition
// (hash the content of the first "{...}" when non-empty, else the whole
// key), independently of the adapter's slotOf.
func redisKeySlot(key string) int {
	if open := strings.IndexByte(key, '{'); open >= 0 {
		if end := strings.IndexByte(key[open+1:], '}'); end > 0 {
			key = key[open+1 : open+1+end]
		}
	}
	var crc uint16
	for _, c := range []byte(key) {
		for b := 7; b >= 0; b-- {
			bit := (crc>>15)&1 != uint16(c>>b)&1
			crc <<= 1
			if bit {
				crc ^= 0x1021
			}
		}
	}
	return int(crc & 0x3fff)
}

// layout builds a keySpread from slot ranges, one range list per master.
func layout(keys int, masters ...[][2]int) *keySpread {
	s := &keySpread{keys: keys}
	for i := range s.owner {
		s.owner[i] = -1
	}
	for m, ranges := range masters {
		for _, r := range ranges {
			for slot := r[0]; slot <= r[1]; slot++ {
				s.owner[slot] = m
			}
		}
	}
	return s
}

// deviceIDShapes are lock names as the service forms them (device id, ":",
// firmware id) for device ids of the lengths fleets use.
func deviceIDShapes(n int) map[string][]string {
	hexID := func(chars int) string {
		b := make([]byte, (chars+1)/2)
		_, _ = rand.Read(b)
		return hex.EncodeToString(b)[:chars]
	}
	shapes := map[string][]string{}
	for i := 0; i < n; i++ {
		fw := uuid.NewString()
		for _, l := range []int{8, 12, 32, 64} {
			k := strconv.Itoa(l) + " chars"
			shapes[k] = append(shapes[k], hexID(l)+":"+fw)
		}
		shapes["uuid"] = append(shapes["uuid"], uuid.NewString()+":"+fw)
		shapes["serial"] = append(shapes["serial"], fmt.Sprintf("SN-%08d", i)+":"+fw)
	}
	return shapes
}

// TestKeysOfALockLandOnDistinctMasters computes, for many names of every
// device-id shape, the keys rueidislock will use ("prefix:i:name" with the
// adapter's prefix and name) and the master Redis would hash each to.
func TestKeysOfALockLandOnDistinctMasters(t *testing.T) {
	even3 := layout(3, [][2]int{{0, 5460}}, [][2]int{{5461, 10922}}, [][2]int{{10923, 16383}})
	layouts := map[string]*keySpread{
		"3 even masters (redis-cli --cluster create)": even3,
		"3 uneven masters":                            layout(3, [][2]int{{0, 999}}, [][2]int{{1000, 13999}}, [][2]int{{14000, 16383}}),
		"3 masters, interleaved ranges": layout(3, [][2]int{{0, 99}, {300, 5000}}, [][2]int{{100, 199}, {5001, 12000}},
			[][2]int{{200, 299}, {12001, 16383}}),
		"5 masters, majority 3": layout(5, [][2]int{{0, 3276}}, [][2]int{{3277, 6553}}, [][2]int{{6554, 9830}},
			[][2]int{{9831, 13107}}, [][2]int{{13108, 16383}}),
		"6 masters, majority 2": layout(3, [][2]int{{0, 2730}}, [][2]int{{2731, 5461}}, [][2]int{{5462, 8192}},
			[][2]int{{8193, 10923}}, [][2]int{{10924, 13654}}, [][2]int{{13655, 16383}}),
	}
	const prefix = "ota:lock{" // as New sets it for a majority above 1
	for lname, s := range layouts {
		for shape, names := range deviceIDShapes(500) {
			for _, name := range names {
				rname := s.rueidisName(name)
				seen := map[int]int{}
				for i := 0; i < s.keys; i++ {
					key := prefix + ":" + strconv.Itoa(i) + ":" + rname // rueidislock's keyname
					if !strings.HasSuffix(key, "}:"+name) {
						t.Fatalf("key %q does not end with the lock's name", key)
					}
					m := s.owner[redisKeySlot(key)]
					if j, dup := seen[m]; dup || m < 0 {
						t.Fatalf("%s, %s: keys %d and %d of %q land on master %d", lname, shape, j, i, name, m)
					}
					seen[m] = i
				}
				if again := s.rueidisName(name); again != rname {
					t.Fatalf("%q named %q then %q: replicas would not share the lock", name, rname, again)
				}
			}
		}
	}

	// Without the tag, CRC16's linearity decides by the name's length alone:
	// this is the layout rueidislock gives plain names.
	for _, l := range []int{8, 12, 32, 64} {
		spread := 0
		names := deviceIDShapes(200)[strconv.Itoa(l)+" chars"]
		for _, name := range names {
			seen := map[int]bool{}
			for i := 0; i < 3; i++ {
				seen[even3.owner[redisKeySlot("ota:lock:"+strconv.Itoa(i)+":"+name)]] = true
			}
			if len(seen) == 3 {
				spread++
			}
		}
		if spread == len(names) {
			t.Errorf("untagged keys of %d-char device ids all spread: the tag would not be needed", l)
		}
	}
}

// A master holding a sliver of the slots leaves some names no spread: the
// layout is refused as a whole at start-up rather than lock by lock.
func TestSpreadNeedsEnoughOfEveryMaster(t *testing.T) {
	sliver := layout(3, [][2]int{{0, 0}}, [][2]int{{1, 8000}}, [][2]int{{8001, 16383}})
	failed := 0
	for i := 0; i < 64; i++ {
		if _, ok := sliver.tag("probe-" + strconv.Itoa(i)); !ok {
			failed++
		}
	}
	if failed == 0 {
		t.Fatal("every probe spread over a master holding one slot; the start-up check could not refuse it")
	}
	if slotOf("123456789") != 0x31c3%clusterSlots {
		t.Fatalf("slotOf(123456789) = %#x, want CRC16-XMODEM's check value 0x31c3", slotOf("123456789"))
	}
	if redisKeySlot("{user1000}.following") != redisKeySlot("{user1000}.followers") ||
		redisKeySlot("foo{}{bar}") != slotOf("foo{}{bar}") || redisKeySlot("a{b}c") != slotOf("b") {
		t.Fatal("the test's hash-tag rule is not Redis's")
	}
}
