package safety_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/conformance/safety"
)

func sec(client int, key string, token int64, start, end, valid int) safety.Section {
	ms := time.Millisecond
	return safety.Section{Client: client, Key: key, Token: token,
		Start: time.Duration(start) * ms, End: time.Duration(end) * ms, ValidUntil: time.Duration(valid) * ms}
}

// rsec is a reader's section.
func rsec(client int, key string, token int64, start, end, valid int) safety.Section {
	s := sec(client, key, token, start, end, valid)
	s.Shared = true
	return s
}

// setSec is a section under a multi-key lock.
func setSec(client int, keys []string, token int64, start, end, valid int) safety.Section {
	s := sec(client, strings.Join(keys, ","), token, start, end, valid)
	s.Keys = keys
	return s
}

func kinds(vs []safety.Violation) []safety.ViolationKind {
	var out []safety.ViolationKind
	for _, v := range vs {
		out = append(out, v.Kind)
	}
	return out
}

func TestCheck(t *testing.T) {
	for _, c := range []struct {
		name     string
		sections []safety.Section
		fenced   bool
		want     []safety.ViolationKind
	}{
		{"empty", nil, true, nil},
		{"back to back", []safety.Section{sec(1, "k", 1, 0, 10, 100), sec(2, "k", 2, 10, 20, 100), sec(1, "k", 3, 20, 30, 100)}, true, nil},
		{"other keys do not conflict", []safety.Section{sec(1, "a", 1, 0, 10, 100), sec(2, "b", 1, 5, 15, 100)}, true, nil},
		{"overlaps are left to porcupine", []safety.Section{sec(1, "k", 1, 0, 10, 100), sec(2, "k", 2, 9, 20, 100)}, true, nil},
		{"late entry", []safety.Section{sec(1, "k", 1, 100, 110, 100)}, false, []safety.ViolationKind{safety.LateEntry}},
		{"overrun", []safety.Section{sec(1, "k", 1, 90, 110, 100)}, false, []safety.ViolationKind{safety.Overrun}},
		{"stale token", []safety.Section{sec(1, "k", 5, 0, 10, 100), sec(2, "k", 4, 20, 30, 100)}, true, []safety.ViolationKind{safety.StaleToken}},
		{"equal token", []safety.Section{sec(1, "k", 5, 0, 10, 100), sec(2, "k", 5, 20, 30, 100)}, true, []safety.ViolationKind{safety.StaleToken}},
		{"stale against an older, higher one", []safety.Section{sec(1, "k", 9, 0, 10, 100), sec(2, "k", 10, 20, 30, 100), sec(3, "k", 8, 40, 50, 100)}, true,
			[]safety.ViolationKind{safety.StaleToken}},
		{"the same lock after an extension", []safety.Section{sec(1, "k", 5, 0, 10, 100), sec(1, "k", 5, 20, 30, 200)}, true, nil},
		{"readers' tokens need not grow among readers", []safety.Section{rsec(1, "k", 6, 0, 10, 100), rsec(2, "k", 5, 20, 30, 100)}, true, nil},
		{"a reader's token below an earlier writer's", []safety.Section{sec(1, "k", 6, 0, 10, 100), rsec(2, "k", 5, 20, 30, 100)}, true,
			[]safety.ViolationKind{safety.StaleToken}},
		{"a writer's token below an earlier reader's", []safety.Section{rsec(1, "k", 6, 0, 10, 100), sec(2, "k", 5, 20, 30, 100)}, true,
			[]safety.ViolationKind{safety.StaleToken}},
		{"a set's section counts for each key", []safety.Section{sec(1, "b", 6, 0, 10, 100), setSec(2, []string{"a", "b"}, 5, 20, 30, 100)}, true,
			[]safety.ViolationKind{safety.StaleToken}},
		{"a leader refused by the term register in its validity", []safety.Section{refused(sec(1, "k", 5, 0, 10, 100))}, false,
			[]safety.ViolationKind{safety.RefusedTerm}},
		{"a late leader is late, refused or not", []safety.Section{refused(sec(1, "k", 5, 100, 110, 100))}, false,
			[]safety.ViolationKind{safety.LateEntry}},
		{"tokens ignored unless fenced", []safety.Section{sec(1, "k", 5, 0, 10, 100), sec(2, "k", 4, 20, 30, 100)}, false, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := safety.Check(c.sections, c.fenced)
			assert.Equal(t, c.want, kinds(got), "%v", got)
			for _, v := range got {
				assert.NotEmpty(t, v.String())
				if v.Kind == safety.StaleToken {
					require.NotNil(t, v.Other)
				}
			}
		})
	}
}

func TestHistory(t *testing.T) {
	h := safety.NewHistory()
	a := h.Now()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			h.Add(safety.Section{Client: i, Key: "k", Start: h.Now(), End: h.Now(), ValidUntil: time.Hour})
		})
	}
	wg.Wait()
	b := h.Now()
	assert.Positive(t, b, "the clock runs from NewHistory")
	got := h.Sections()
	require.Len(t, got, 8)
	clients := map[int]bool{}
	for _, s := range got {
		clients[s.Client] = true
		assert.GreaterOrEqual(t, s.Start, a, "one monotonic clock")
		assert.GreaterOrEqual(t, s.End, s.Start)
		assert.LessOrEqual(t, s.End, b)
	}
	assert.Len(t, clients, 8, "every client's section is kept")
	got[0].Key = "changed"
	assert.Equal(t, "k", h.Sections()[0].Key, "Sections returns a copy")
}

// refused is s with its term refused by the term register.
func refused(s safety.Section) safety.Section {
	s.Refused = true
	return s
}
