package blobstore

import (
	"bytes"
	"context"
	"io"
	"testing"

	"gocloud.dev/blob/memblob"
)

// A Seek that moves drops the current read, and the next Read opens a
// range read at the new offset: what was skipped is never fetched (on S3
// a Range GET, not a read-and-discard).
func TestSeekReopensAtTheOffset(t *testing.T) {
	ctx := context.Background()
	s := &Store{bucket: memblob.OpenBucket(nil), scheme: "mem"}
	body := bytes.Repeat([]byte("0123456789"), 10_000)
	if _, err := s.Put(ctx, "k", bytes.NewReader(body)); err != nil {
		t.Fatal(err)
	}
	ob, err := s.Open(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	o := ob.(*object)
	if o.r != nil {
		t.Fatal("Open started a read before any Read")
	}
	head := make([]byte, 10)
	if _, err := io.ReadFull(o, head); err != nil {
		t.Fatal(err)
	}
	first := o.r
	if _, err := o.Seek(90_000, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	if o.r != nil {
		t.Fatal("a Seek that moved kept the old read, which would read through what it skips")
	}
	tail := make([]byte, 5)
	if _, err := io.ReadFull(o, tail); err != nil {
		t.Fatal(err)
	}
	if o.r == first || !bytes.Equal(tail, body[90_000:90_005]) {
		t.Fatalf("after Seek read %q from reader %p (first %p), want %q from a new range read", tail, o.r, first, body[90_000:90_005])
	}
	// A Seek to where the read already is keeps it.
	cur := o.r
	if _, err := o.Seek(0, io.SeekCurrent); err != nil || o.r != cur {
		t.Fatalf("Seek(0, SeekCurrent) dropped the open read (%v)", err)
	}
	_ = o.Close()
}
