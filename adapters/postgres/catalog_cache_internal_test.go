package postgres

import (
	"context"
	"testing"
	"time"
)

// A fill that read the database before an invalidation and finished after
// it is not kept: what it read may be what the invalidation announced
// changed. Its caller still gets the answer (a read through is no
// fresher); the next read fills again and that fill is kept.
func TestCatalogCacheDropsAFillThatRacedAnInvalidation(t *testing.T) {
	c := &CatalogCache{}
	c.aliveUntil.Store(time.Now().Add(time.Hour).UnixNano()) // live throughout
	entries := map[string]string{}
	m := func() map[string]string { return entries }
	stored := "before"
	read, release := make(chan struct{}), make(chan struct{})
	type answer struct {
		v   string
		err error
	}
	first := make(chan answer, 1)
	go func() {
		v, err := lookup(context.Background(), c, "test", "k", m, 10, func(context.Context) (string, error) {
			v := stored
			close(read) // the database answered...
			<-release   // ...and the fill is slow to store it
			return v, nil
		})
		first <- answer{v, err}
	}()
	<-read
	stored = "after" // the change, then its invalidation, land mid-fill
	c.invalidate("*")
	close(release)
	if a := <-first; a.err != nil || a.v != "before" {
		t.Fatalf("the racing fill answered %q, %v", a.v, a.err)
	}
	c.mu.RLock()
	v, kept := entries["k"]
	c.mu.RUnlock()
	if kept {
		t.Fatalf("a fill that raced an invalidation was kept: the cache holds %q", v)
	}

	load := func(context.Context) (string, error) { return stored, nil }
	for i, want := range []string{"after", "after"} {
		if got, err := lookup(context.Background(), c, "test", "k", m, 10, load); err != nil || got != want {
			t.Fatalf("read %d after the invalidation: %q, %v; want %q", i+1, got, err, want)
		}
	}
	if hits := c.stats.Hits.Load(); hits != 1 {
		t.Fatalf("%d hits: the fill after the invalidation was not kept", hits)
	}
}
