package measure

import (
	"math"
	"math/bits"
	"time"
)

// subBits is the number of bits of a value kept below its leading one:
// 2^subBits buckets per power of two, a resolution of 1/64 (about 1.6%).
const subBits = 6

// histBuckets covers every non-negative int64.
const histBuckets = (64 - subBits) << subBits

// histogram counts non-negative durations in log-linear buckets. Its zero
// value is ready; recording allocates nothing.
type histogram struct {
	counts [histBuckets]uint64
	n      uint64
	max    int64
}

func bucketOf(v int64) int {
	if v < 1<<subBits {
		return int(v)
	}
	e := bits.Len64(uint64(v)) - subBits - 1 // v>>e is in [2^subBits, 2^(subBits+1))
	return (e+1)<<subBits + int(v>>e) - 1<<subBits
}

// bucketValue returns the middle of bucket i.
func bucketValue(i int) int64 {
	if i < 1<<subBits {
		return int64(i)
	}
	e := i>>subBits - 1
	m := int64(i&(1<<subBits-1) + 1<<subBits)
	return m<<e + (int64(1)<<e)/2
}

func (h *histogram) record(d time.Duration) {
	v := max(int64(d), 0)
	h.counts[bucketOf(v)]++
	h.n++
	h.max = max(h.max, v)
}

func (h *histogram) merge(o *histogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.max = max(h.max, o.max)
}

// quantile returns the q-quantile (nearest rank), or 0 when empty.
func (h *histogram) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	rank = min(max(rank, 1), h.n)
	if rank == h.n {
		return time.Duration(h.max) // the largest value is known exactly
	}
	var seen uint64
	for i, c := range h.counts {
		if seen += c; seen >= rank {
			return time.Duration(min(bucketValue(i), h.max))
		}
	}
	return time.Duration(h.max)
}

// quantileOf returns the q-quantile (nearest rank) of sorted, or 0 when it
// is empty.
func quantileOf(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}
