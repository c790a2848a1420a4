// Package cluster runs the Redis lock on a real three-master Redis Cluster
// started on local ports, to show the service scales out past one Redis:
// mutual exclusion holds, and with OTA_LOCK_MAJORITY=2 the lock survives the
// loss of a master.
package cluster

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/rueidis"

	"github.com/ai-device/ota/adapters/redislock"
	"github.com/ai-device/ota/domain"
	"github.com/ai-device/ota/ports"
	"github.com/ai-device/ota/tests/contract"
	"github.com/ai-device/ota/tests/testenv"
)

// node is one redis-server process of the test cluster.
type node struct {
	port int
	cmd  *exec.Cmd
}

func (n node) addr() string { return "127.0.0.1:" + strconv.Itoa(n.port) }

// freeClusterPort finds a port p with p and p+10000 (the cluster bus) free.
func freeClusterPort(t *testing.T) int {
	t.Helper()
	for i := 0; i < 50; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		p := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if p+10000 > 65535 {
			continue
		}
		bus, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p+10000))
		if err != nil {
			continue
		}
		bus.Close()
		return p
	}
	t.Fatal("no free port pair for a cluster node")
	return 0
}

// startCluster starts three masters (no replicas) and joins them with
// redis-cli --cluster create. Nodes keep serving their own slots when
// another master is gone (cluster-require-full-coverage no), which is what
// a majority lock needs.
func startCluster(t *testing.T) []node {
	t.Helper()
	for _, bin := range []string{"redis-server", "redis-cli"} {
		if _, err := exec.LookPath(bin); err != nil {
			testenv.Skip(t, bin, bin+" not found: the cluster tests need a local Redis installation")
		}
	}
	dir := t.TempDir()
	nodes := make([]node, 3)
	for i := range nodes {
		p := freeClusterPort(t)
		nd := filepath.Join(dir, strconv.Itoa(p))
		if err := os.MkdirAll(nd, 0o755); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("redis-server", "--port", strconv.Itoa(p), "--bind", "127.0.0.1",
			"--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(nd, "nodes.conf"),
			"--cluster-node-timeout", "1000", "--cluster-require-full-coverage", "no",
			"--save", "", "--appendonly", "no", "--dir", nd, "--protected-mode", "no")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		nodes[i] = node{port: p, cmd: cmd}
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
	}
	for _, n := range nodes {
		waitPort(t, n.addr())
	}
	args := []string{"--cluster", "create"}
	for _, n := range nodes {
		args = append(args, n.addr())
	}
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command("redis-cli", args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	// Wait until every node agrees the cluster is up.
	deadline := time.Now().Add(20 * time.Second)
	for _, n := range nodes {
		for {
			out, _ := exec.Command("redis-cli", "-p", strconv.Itoa(n.port), "cluster", "info").Output()
			if strings.Contains(string(out), "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("cluster did not come up: %s", out)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return nodes
}

func waitPort(t *testing.T, addr string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server on %s did not start", addr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func newLocker(t *testing.T, nodes []node, prefix string, majority int32, wait time.Duration) *redislock.Locker {
	t.Helper()
	// One seed address: rueidis asks the node and switches to cluster mode.
	l, cleanup, err := redislock.New(redislock.Config{URL: "redis://" + nodes[0].addr(), KeyPrefix: prefix,
		TTL: 3 * time.Second, Wait: wait, Majority: majority}, ports.NopLockMetrics{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cleanup)
	return l
}

// The lock contract, on a cluster, with two separate clients.
func TestLockerContractOnCluster(t *testing.T) {
	nodes := startCluster(t)
	contract.RunLocker(t, func(t *testing.T, wait time.Duration) (ports.Locker, ports.Locker) {
		prefix := "ota:cl:" + uuid.NewString()
		return newLocker(t, nodes, prefix, 1, wait), newLocker(t, nodes, prefix, 1, wait)
	})
}

// crc16 is the CRC16-XMODEM Redis Cluster hashes keys with.
func crc16(b []byte) uint16 {
	var crc uint16
	for _, c := range b {
		crc ^= uint16(c) << 8
		for i := 0; i < 8; i++ {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// master is which of the three masters --cluster create gave a key's slot
// (it splits 16384 slots into three even ranges, in node order).
func master(key string) int {
	slot := int(crc16([]byte(key)) % 16384)
	switch {
	case slot <= 5460:
		return 0
	case slot <= 10922:
		return 1
	}
	return 2
}

// nodeClient talks to one node alone (no cluster redirection), to see
// which keys that master holds.
func nodeClient(t *testing.T, n node) rueidis.Client {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{n.addr()}, ForceSingleClient: true, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// keysByNode lists, per node, the keys it holds under prefix.
func keysByNode(t *testing.T, clients []rueidis.Client, prefix string) [][]string {
	t.Helper()
	out := make([][]string, len(clients))
	for i, c := range clients {
		keys, err := c.Do(context.Background(), c.B().Keys().Pattern(prefix+"*").Build()).AsStrSlice()
		if err != nil {
			t.Fatalf("KEYS on node %d: %v", i, err)
		}
		out[i] = keys
	}
	return out
}

// deviceLockNames are lock names as the check forms them (device id, ":",
// firmware id) for the device-id shapes fleets use.
func deviceLockNames(perShape int) map[string][]string {
	hexID := func(chars int) string {
		return strings.ReplaceAll(uuid.NewString()+uuid.NewString(), "-", "")[:chars]
	}
	names := map[string][]string{}
	for i := 0; i < perShape; i++ {
		fw := uuid.NewString()
		for _, l := range []int{8, 12, 32, 64} {
			id := hexID(l) // two UUIDs give 64 hex digits
			names[strconv.Itoa(l)+" chars"] = append(names[strconv.Itoa(l)+" chars"], id+":"+fw)
		}
		names["uuid"] = append(names["uuid"], uuid.NewString()+":"+fw)
	}
	return names
}

// With a majority of 2, each of the three keys of a lock sits on its own
// master, for any name: looked up on the masters themselves while the
// lock is held, for device ids of every common shape. (rueidislock's plain
// prefix:i:name put none of them on three masters: CRC16 is linear, so the
// spread depended on the name's length alone.)
func TestMajorityKeysLandOnDistinctMasters(t *testing.T) {
	nodes := startCluster(t)
	clients := make([]rueidis.Client, len(nodes))
	for i, n := range nodes {
		clients[i] = nodeClient(t, n)
	}
	prefix := "ota:maj:" + uuid.NewString()
	l := newLocker(t, nodes, prefix, 2, 2*time.Second)
	for shape, names := range deviceLockNames(15) {
		for _, name := range names {
			err := l.WithLock(context.Background(), name, func(context.Context) error {
				// rueidislock returns once a majority is held and sets the
				// last key right after: give it a moment.
				var byNode [][]string
				for end := time.Now().Add(time.Second); ; time.Sleep(5 * time.Millisecond) {
					byNode = keysByNode(t, clients, prefix)
					if slices.IndexFunc(byNode, func(k []string) bool { return len(k) == 0 }) < 0 || time.Now().After(end) {
						break
					}
				}
				for i, keys := range byNode {
					if len(keys) != 1 || !strings.HasSuffix(keys[0], ":"+name) {
						t.Errorf("%s: lock %q: node %d holds %q, want exactly one of its keys on each of the 3 masters", shape, name, i, keys)
					}
				}
				return nil
			})
			if err != nil {
				t.Fatalf("%s: lock %q: %v", shape, name, err)
			}
		}
	}

	// Five keys cannot sit on five distinct masters of three: refused.
	_, _, err := redislock.New(redislock.Config{URL: "redis://" + nodes[0].addr(), KeyPrefix: prefix, Majority: 3}, ports.NopLockMetrics{})
	if err == nil || !strings.Contains(err.Error(), "5 distinct masters") || !strings.Contains(err.Error(), "has 3") {
		t.Fatalf("majority 3 on 3 masters: New = %v, want a refusal naming 5 masters needed and 3 there", err)
	}
}

// With KeyMajority 2 the three keys of a lock spread over the masters; after
// one master is killed the lock still excludes, and can still be had.
func TestMajorityTwoLockHoldsAfterAMasterDies(t *testing.T) {
	nodes := startCluster(t)
	clients := make([]rueidis.Client, len(nodes))
	for i, n := range nodes {
		clients[i] = nodeClient(t, n)
	}
	prefix := "ota:maj:" + uuid.NewString()
	name := uuid.NewString()[:12] + ":" + uuid.NewString() // a device id as fleets write them, not a chosen one
	a := newLocker(t, nodes, prefix, 2, 5*time.Second)
	b := newLocker(t, nodes, prefix, 2, 5*time.Second)

	// Kill the master holding key 0 of this lock.
	victimIdx := -1
	if err := a.WithLock(context.Background(), name, func(context.Context) error {
		for i, keys := range keysByNode(t, clients, prefix) {
			if len(keys) == 1 && strings.HasPrefix(keys[0], prefix+"{:0:") {
				victimIdx = i
			}
		}
		return nil
	}); err != nil || victimIdx < 0 {
		t.Fatalf("finding key 0 of %q: %v, node %d", name, err, victimIdx)
	}
	victim := nodes[victimIdx]
	if err := victim.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = victim.cmd.Wait()

	// The kill matters: a single-key lock living on the dead master cannot
	// be had any more, while the majority lock below still can.
	// (Seeded with a live node: the victim may be the usual seed, nodes[0].)
	live := []node{nodes[(victimIdx+1)%len(nodes)]}
	single := newLocker(t, live, prefix+":single", 1, 300*time.Millisecond)
	var deadName string
	for deadName = uuid.NewString(); master(prefix+":single:0:"+deadName) != victimIdx; deadName = uuid.NewString() {
	}
	if err := single.WithLock(context.Background(), deadName, func(context.Context) error { return nil }); !errors.Is(err, domain.ErrServiceBusy) {
		t.Fatalf("lock on the dead master: got %v, want SERVICE_BUSY", err)
	}

	var inside, maxInside, entered atomic.Int64
	counter := 0
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			l := a
			if i%2 == 1 {
				l = b
			}
			err := l.WithLock(context.Background(), name, func(ctx context.Context) error {
				n := inside.Add(1)
				for {
					m := maxInside.Load()
					if n <= m || maxInside.CompareAndSwap(m, n) {
						break
					}
				}
				c := counter
				time.Sleep(2 * time.Millisecond)
				counter = c + 1
				inside.Add(-1)
				entered.Add(1)
				return nil
			})
			if err != nil {
				t.Errorf("caller %d: %v", i, err)
			}
		}(i)
	}
	wg.Wait()
	if maxInside.Load() != 1 {
		t.Fatalf("%d callers were inside at once", maxInside.Load())
	}
	if entered.Load() != 20 || counter != 20 {
		t.Fatalf("entered %d, counter %d, want 20", entered.Load(), counter)
	}
}

// OTA_REDIS_URL may list several cluster nodes, comma-separated.
func TestSeveralSeedAddresses(t *testing.T) {
	nodes := startCluster(t)
	url := "redis://" + nodes[0].addr() + "," + nodes[1].addr() + "," + nodes[2].addr()
	l, cleanup, err := redislock.New(redislock.Config{URL: url, KeyPrefix: "ota:seeds:" + uuid.NewString(),
		TTL: 3 * time.Second, Wait: time.Second, Majority: 1}, ports.NopLockMetrics{})
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	ran := 0
	for i := 0; i < 20; i++ { // names spread over every master's slots
		if err := l.WithLock(context.Background(), uuid.NewString(), func(context.Context) error { ran++; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if ran != 20 {
		t.Fatalf("ran %d of 20", ran)
	}
}
