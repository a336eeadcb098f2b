package measure

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestHistogramQuantiles(t *testing.T) {
	var h histogram
	var all []time.Duration
	r := rand.New(rand.NewPCG(1, 2))
	for range 100_000 {
		d := time.Duration(r.ExpFloat64() * float64(200*time.Microsecond))
		h.record(d)
		all = append(all, d)
	}
	slices.Sort(all)
	for _, q := range []float64{0.5, 0.9, 0.99, 0.999} {
		got, want := h.quantile(q), quantileOf(all, q)
		if diff := float64(got-want) / float64(want); diff > 0.02 || diff < -0.02 {
			t.Errorf("q%.3f: histogram %v, exact %v", q, got, want)
		}
	}
	if h.quantile(1) != all[len(all)-1] {
		t.Errorf("q1: %v, want the maximum %v", h.quantile(1), all[len(all)-1])
	}
}

func TestBucketsRoundTrip(t *testing.T) {
	for _, v := range []int64{0, 1, 63, 64, 127, 128, 200, 1 << 20, 1<<40 + 12345, 1<<63 - 1} {
		i := bucketOf(v)
		if i < 0 || i >= histBuckets {
			t.Fatalf("bucketOf(%d) = %d, out of range", v, i)
		}
		mid := bucketValue(i)
		if bucketOf(mid) != i && mid > 0 {
			t.Errorf("bucketValue(%d) = %d, which falls in bucket %d", i, mid, bucketOf(mid))
		}
	}
}

func TestKeyRing(t *testing.T) {
	k := newKeyRing("p:", 7, 3)
	got := []string{k.key(), k.key(), k.key(), k.key()}
	want := []string{"p:7:0000000", "p:7:0000001", "p:7:0000002", "p:7:0000000"}
	if !slices.Equal(got, want) {
		t.Fatalf("keys %q, want %q", got, want)
	}
	if n := testing.AllocsPerRun(100, func() { _ = k.key() }); n != 0 {
		t.Errorf("key allocates %v times", n)
	}
}

func TestSummarise(t *testing.T) {
	ms := time.Millisecond
	// Holders 0, 0, 1, 0: one re-acquisition by the releaser, two hand-offs
	// to another goroutine.
	cs := []*contender{
		{acqs: []acquisition{
			{seq: 0, holder: 0, acqStart: 0, acqEnd: 1 * ms, relEnd: 2 * ms},
			{seq: 1, holder: 0, acqStart: 2 * ms, acqEnd: 3 * ms, relEnd: 4 * ms},
			{seq: 3, holder: 0, acqStart: 4 * ms, acqEnd: 9 * ms, relEnd: 10 * ms},
		}, failures: 1},
		{acqs: []acquisition{
			{seq: 2, holder: 1, acqStart: 0, acqEnd: 5 * ms, relEnd: 6 * ms},
		}},
	}
	res := summarise(cs, 8*ms, 0)
	if res.Acquisitions != 3 || res.Late != 1 || res.Failures != 1 {
		t.Errorf("acquisitions %d, late %d, failures %d; want 3, 1, 1", res.Acquisitions, res.Late, res.Failures)
	}
	if res.ReleaserShare != 1.0/3 {
		t.Errorf("releaser share %v, want 1/3", res.ReleaserShare)
	}
	// Hand-offs: 3-2, 5-4, 9-6 ms. Waits: 5 ms (seq 2), 5 ms (seq 3).
	if res.HandoffP50 != 1*ms || res.HandoffP99 != 3*ms {
		t.Errorf("hand-off p50 %v p99 %v, want 1ms 3ms", res.HandoffP50, res.HandoffP99)
	}
	if res.Waits != 2 || res.WaitP50 != 5*ms || res.WaitMax != 5*ms {
		t.Errorf("waits %d p50 %v max %v, want 2 5ms 5ms", res.Waits, res.WaitP50, res.WaitMax)
	}
}
