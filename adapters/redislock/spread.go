package redislock

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"

	"github.com/redis/rueidis"
)

// clusterSlots is the number of hash slots of a Redis Cluster.
const clusterSlots = 16384

// spreadTries bounds the search for a lock's hash tag. With k keys on m
// masters owning equal shares, one candidate spreads with probability
// about m!/((m-k)!·m^k) (2/9 for 3 keys on 3 masters, 1/26 for 5 on 5),
// though CRC16's linearity makes candidates of one length correlated;
// hence lengths of 2 to 13 digits, and many candidates.
const spreadTries = 4096

// keySpread places the 2·Majority−1 keys of one lock on as many distinct
// masters of a Redis Cluster, for any lock name.
//
// rueidislock names key i of lock n "prefix:i:n", and Redis Cluster hashes
// a key with CRC16, which is linear: keys differing in one byte at a fixed
// distance from the end have slots differing by a fixed XOR, so whether the
// keys of a lock spread depends only on the length of n. For device ids of
// 8, 12, 32 or 64 characters none of a lock's three keys landed on three
// masters. So with Majority > 1 the keys carry a hash tag that includes the
// index: the locker's prefix ends with "{" and the name rueidislock sees is
// "x}:n", making key i "prefix{:i:x}:n", hashed on ":i:x" only. x is the
// first of a sequence of candidates derived from n alone whose tags put
// every index on its own master, under the slot layout read at start-up.
//
// Every replica computes the same x for the same name as long as they saw
// the same slot layout. A cluster resharded while replicas run keeps
// working (keys are redirected) but may spread less until every replica
// has restarted; replicas that started on both sides of a resharding can
// name one lock differently for that time, and then the database's unique
// index alone prevents a duplicate task (as it does when Redis is down).
type keySpread struct {
	owner [clusterSlots]int // master index of each slot, -1 when unserved
	keys  int
}

// readSpread reads the cluster's slot layout through client and refuses a
// layout over which keys of one lock cannot all land on distinct masters:
// not a cluster, fewer masters than keys, or slots so unevenly shared that
// some names find no spread.
func readSpread(ctx context.Context, client rueidis.Client, majority int32) (*keySpread, error) {
	keys := int(2*majority - 1)
	refuse := func(why string) error {
		return fmt.Errorf("redislock: a majority of %d puts each lock on %d keys, which must live on %d distinct masters of a Redis Cluster; %s (use a majority of 1 on a single Redis)",
			majority, keys, keys, why)
	}
	msgs, err := client.Do(ctx, client.B().ClusterSlots().Build()).ToArray()
	if err != nil {
		if strings.Contains(err.Error(), "cluster support disabled") {
			return nil, refuse("this Redis is not a cluster")
		}
		return nil, refuse(fmt.Sprintf("reading the cluster's slots failed: %v", err))
	}
	s := &keySpread{keys: keys}
	for i := range s.owner {
		s.owner[i] = -1
	}
	masters := map[string]int{}
	for _, m := range msgs {
		start, end, master, err := slotRange(m)
		if err != nil {
			return nil, refuse(fmt.Sprintf("unexpected CLUSTER SLOTS answer: %v", err))
		}
		idx, ok := masters[master]
		if !ok {
			idx = len(masters)
			masters[master] = idx
		}
		for slot := start; slot <= end; slot++ {
			s.owner[slot] = idx
		}
	}
	if len(masters) < keys {
		return nil, refuse(fmt.Sprintf("the cluster has %d", len(masters)))
	}
	// Names of every shape spread under an even layout; a layout where one
	// master holds a sliver of the slots does not, and is refused here
	// rather than lock by lock.
	for i := 0; i < 64; i++ {
		if _, ok := s.tag("probe-" + strconv.Itoa(i)); !ok {
			return nil, refuse("the slots are too unevenly shared between the masters for every lock to find one tag")
		}
	}
	return s, nil
}

// slotRange decodes one CLUSTER SLOTS entry: [start, end, [host, port, id?], replicas...].
func slotRange(m rueidis.RedisMessage) (int, int, string, error) {
	parts, err := m.ToArray()
	if err != nil || len(parts) < 3 {
		return 0, 0, "", errors.New("entry is not [start, end, master, ...]")
	}
	start, err1 := parts[0].AsInt64()
	end, err2 := parts[1].AsInt64()
	node, err3 := parts[2].ToArray()
	if err1 != nil || err2 != nil || err3 != nil || len(node) < 2 || start < 0 || end >= clusterSlots || start > end {
		return 0, 0, "", errors.New("bad slot range or master")
	}
	host, _ := node[0].ToString()
	port, _ := node[1].AsInt64()
	id := host + ":" + strconv.FormatInt(port, 10)
	if len(node) > 2 {
		if nodeID, err := node[2].ToString(); err == nil && nodeID != "" {
			id = nodeID
		}
	}
	return int(start), int(end), id, nil
}

// rueidisName is the name rueidislock gets for lock name: "x}:name", so
// that its key i, "prefix{:i:x}:name", hashes on ":i:x".
func (s *keySpread) rueidisName(name string) string {
	x, _ := s.tag(name)
	return x + "}:" + name
}

// tag returns the first candidate x for name whose keys land on distinct
// masters, or, when none of spreadTries does, the first candidate and false.
func (s *keySpread) tag(name string) (string, bool) {
	h := fnv.New64a()
	_, _ = h.Write([]byte(name))
	seed := h.Sum64()
	first := ""
	for k := 0; k < spreadTries; k++ {
		x := candidate(seed, k)
		if k == 0 {
			first = x
		}
		if s.spreads(x) {
			return x, true
		}
	}
	return first, false
}

// candidate is the k-th tag candidate of a name: base-36 digits of a mix of
// the name's hash and k, of a length varying with k (CRC16 being linear,
// the XOR between the slots of one lock's keys depends on that length).
func candidate(seed uint64, k int) string {
	z := seed + uint64(k+1)*0x9e3779b97f4a7c15 // splitmix64
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	z ^= z >> 31
	digits := strconv.FormatUint(z|1<<63, 36) // 13 digits
	return digits[:2+k%12]
}

// spreads reports whether the keys tagged ":i:x" sit on distinct, served masters.
func (s *keySpread) spreads(x string) bool {
	var seen [16]int
	for i := 0; i < s.keys; i++ {
		m := s.owner[slotOf(":"+strconv.Itoa(i)+":"+x)]
		if m < 0 {
			return false
		}
		for _, o := range seen[:i] {
			if o == m {
				return false
			}
		}
		seen[i] = m
	}
	return true
}

// slotOf is the hash slot of a hash tag's content: CRC16-XMODEM mod 16384,
// as Redis Cluster computes it.
func slotOf(tag string) int {
	var crc uint16
	for i := 0; i < len(tag); i++ {
		crc ^= uint16(tag[i]) << 8
		for b := 0; b < 8; b++ {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % clusterSlots
}
