package local

import "testing"

// A name's state is shared by everyone who joined it, outlives all but
// its last user, and is what Find and Each reach; a name nobody uses is
// gone. Both lockers rely on it: the in-process one to exclude, redislock's
// also to wake the waiters of a key that changed, or all of them when the
// connection is lost.
func TestNamesShareAStateUntilTheLastLeaves(t *testing.T) {
	made := 0
	n := NewNames(func() *int { made++; v := made; return &v })
	a, b := n.Join("a"), n.Join("a")
	if a != b || made != 1 {
		t.Fatalf("two joins of one name got %p and %p, %d states made; want one shared", a, b, made)
	}
	other := n.Join("b")
	if other == a {
		t.Fatal("two names share a state")
	}
	seen := func(find func(fn func(*int))) map[int]bool {
		got := map[int]bool{}
		find(func(s *int) { got[*s] = true })
		return got
	}
	if got := seen(n.Each); len(got) != 2 || !got[*a] || !got[*other] {
		t.Errorf("Each reached %v, want both states in use", got)
	}
	if got := seen(func(fn func(*int)) { n.Find("a", fn) }); len(got) != 1 || !got[*a] {
		t.Errorf("Find(a) reached %v, want a's state", got)
	}

	n.Leave("a")
	if got := seen(func(fn func(*int)) { n.Find("a", fn) }); !got[*a] {
		t.Error("a's state went while one of its two users was still in")
	}
	n.Leave("a")
	n.Leave("b")
	if got := seen(func(fn func(*int)) { n.Find("a", fn) }); len(got) != 0 {
		t.Errorf("Find(a) reached %v after its last user left", got)
	}
	if got := seen(n.Each); len(got) != 0 || n.inUse() != 0 {
		t.Errorf("Each reached %v, %d names in use, after everyone left", got, n.inUse())
	}
	if c := n.Join("a"); c == a {
		t.Error("a name joined again got the state of its earlier users")
	}
}
