package main

import (
	"math"
	"math/bits"
	"sync/atomic"
	"time"
)

// histogram records latencies in microseconds into log-linear buckets, in
// the manner of an HDR histogram: values below 64µs are exact, above that
// every power of two is split into 32 buckets, so a reported quantile is at
// most ~3% above the true value. It is lock-free (one atomic add per
// sample), fixed-size (no allocation per sample) and covers every uint64.
type histogram struct {
	counts [histBuckets]atomic.Uint64
	n      atomic.Uint64
	sum    atomic.Uint64 // µs
	max    atomic.Uint64 // µs, exact
}

const (
	histSubBits = 5
	histSub     = 1 << histSubBits
	// The largest index: a 64-bit value shifts by 64-histSubBits-1.
	histBuckets = (64-histSubBits-1)<<histSubBits + 2*histSub
)

// histIndex is the bucket of a value.
func histIndex(v uint64) int {
	e := bits.Len64(v) - histSubBits - 1
	if e < 0 {
		e = 0
	}
	return e<<histSubBits + int(v>>uint(e))
}

// histUpper is the largest value that falls in bucket i.
func histUpper(i int) uint64 {
	e := 0
	if i >= 2*histSub {
		e = i>>histSubBits - 1
	}
	lower := uint64(i-e<<histSubBits) << uint(e)
	return lower + (uint64(1) << uint(e)) - 1
}

// record adds one latency.
func (h *histogram) record(d time.Duration) {
	us := d.Microseconds()
	if us < 0 {
		us = 0
	}
	v := uint64(us)
	h.counts[histIndex(v)].Add(1)
	h.n.Add(1)
	h.sum.Add(v)
	for {
		m := h.max.Load()
		if v <= m || h.max.CompareAndSwap(m, v) {
			break
		}
	}
}

// count is the number of samples.
func (h *histogram) count() uint64 { return h.n.Load() }

// quantile returns the value at quantile q (0 < q ≤ 1): the upper bound
// of the bucket holding the ceil(q·n)-th smallest sample, never above the
// exact maximum. It is 0 without samples.
func (h *histogram) quantile(q float64) time.Duration {
	n := h.n.Load()
	if n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(n)))
	if rank < 1 {
		rank = 1
	}
	maxV := h.max.Load()
	var seen uint64
	for i := range h.counts {
		seen += h.counts[i].Load()
		if seen >= rank {
			return time.Duration(min(histUpper(i), maxV)) * time.Microsecond
		}
	}
	return time.Duration(maxV) * time.Microsecond
}

// maximum is the largest sample, exactly.
func (h *histogram) maximum() time.Duration {
	return time.Duration(h.max.Load()) * time.Microsecond
}

// mean is the average sample.
func (h *histogram) mean() time.Duration {
	n := h.n.Load()
	if n == 0 {
		return 0
	}
	return time.Duration(h.sum.Load()/n) * time.Microsecond
}
