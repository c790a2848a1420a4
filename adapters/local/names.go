package local

import "sync"

// Names holds one state per name for the callers in this process that use
// the name: the first caller to join creates it, the last to leave drops
// it, so a table keyed by names as plentiful as device ids does not grow
// without bound. Both lockers keep their per-name waits in one (this
// package's Locker, and redislock's, which also looks names up when Redis
// says a key changed): the bookkeeping is the same, only the state differs.
type Names[S any] struct {
	newState func() *S

	mu      sync.Mutex
	entries map[string]*nameEntry[S]
}

// nameEntry is one name's state and how many callers hold or await it.
type nameEntry[S any] struct {
	state *S
	users int
}

// NewNames returns an empty table whose states newState makes.
func NewNames[S any](newState func() *S) *Names[S] {
	return &Names[S]{newState: newState, entries: make(map[string]*nameEntry[S])}
}

// Join returns name's state, creating it, and counts the caller in; every
// Join is paired with a Leave.
func (n *Names[S]) Join(name string) *S {
	n.mu.Lock()
	defer n.mu.Unlock()
	e := n.entries[name]
	if e == nil {
		e = &nameEntry[S]{state: n.newState()}
		n.entries[name] = e
	}
	e.users++
	return e.state
}

// Leave counts the caller out and forgets the name when nobody uses it.
func (n *Names[S]) Leave(name string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	e := n.entries[name]
	if e.users--; e.users == 0 {
		delete(n.entries, name)
	}
}

// Find calls fn with name's state when the name is in use; it joins
// nobody. fn runs under the table's lock, so it must not block or call
// the table.
func (n *Names[S]) Find(name string, fn func(*S)) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if e := n.entries[name]; e != nil {
		fn(e.state)
	}
}

// Each calls fn with the state of every name in use, under the table's
// lock, as Find does.
func (n *Names[S]) Each(fn func(*S)) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, e := range n.entries {
		fn(e.state)
	}
}

// inUse is how many names are in use.
func (n *Names[S]) inUse() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.entries)
}
