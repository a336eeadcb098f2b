package strategies

import (
	"math/rand/v2"
	"time"
)

// RetryPolicy returns the delay before the next round of an acquisition,
// given how many rounds have failed so far (1 after the first). It must be
// safe for concurrent use and keep no state between calls: every Acquire
// calls it afresh. Core raises any delay below core.MinRetryDelay to it.
type RetryPolicy func(failedRounds int) time.Duration

// JitterDelay returns a policy that waits a uniformly random time in
// [min, max], so that contenders that failed together do not retry together.
// With max <= min it always waits min.
func JitterDelay(min, max time.Duration) RetryPolicy {
	if max <= min {
		return func(int) time.Duration { return min }
	}
	// In unsigned arithmetic, so that no range overflows (max-min does for
	// JitterDelay(-1, math.MaxInt64), and the +1 for a range of 2^64-1).
	span := uint64(max) - uint64(min) + 1
	return func(int) time.Duration {
		var off uint64
		if span == 0 { // the whole int64 range
			off = rand.Uint64()
		} else {
			off = rand.Uint64N(span)
		}
		return time.Duration(uint64(min) + off)
	}
}

// ExponentialJitter returns a policy of "full jitter" exponential backoff: a
// uniformly random time in [0, min(max, base x 2^(n-1))] after the n-th
// failed round (core raises it to core.MinRetryDelay). It suits outages better than
// contention: waiters back off while nodes are down.
func ExponentialJitter(base, max time.Duration) RetryPolicy {
	return func(n int) time.Duration {
		ceiling := max
		if n < 1 {
			n = 1
		}
		if n <= 62 && base > 0 && base < max>>(n-1) {
			ceiling = base << (n - 1)
		}
		if ceiling <= 0 {
			return 0
		}
		return time.Duration(rand.Uint64N(uint64(ceiling) + 1)) // no overflow: ceiling <= MaxInt64
	}
}
