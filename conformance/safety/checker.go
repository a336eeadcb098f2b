package safety

import (
	"cmp"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Section is one use of a lock: a client held key and used the resource it
// protects from Start to End. Times are on one monotonic clock, the
// History's, shared by every client.
type Section struct {
	Client int
	Key    string
	Token  int64 // the fencing token, when the Locker has fencing on
	Start  time.Duration
	End    time.Duration
	// ValidUntil is when the lock stops being safe to use, as the client
	// learnt it when the lock was granted (the lock's remaining validity
	// added to a reading of the clock taken just before, so never later
	// than the truth).
	ValidUntil time.Duration
}

func (s Section) String() string {
	return fmt.Sprintf("client %d on %q [%v, %v] valid until %v token %d", s.Client, s.Key, s.Start, s.End, s.ValidUntil, s.Token)
}

// History collects the sections of a run from many goroutines, on one
// monotonic clock.
type History struct {
	base time.Time
	mu   sync.Mutex
	list []Section
}

// NewHistory returns an empty history whose clock starts now.
func NewHistory() *History { return &History{base: time.Now()} }

// Now reads the history's clock: the monotonic time since NewHistory.
func (h *History) Now() time.Duration { return time.Since(h.base) }

// Add records a section.
func (h *History) Add(s Section) {
	h.mu.Lock()
	h.list = append(h.list, s)
	h.mu.Unlock()
}

// Sections returns a copy of the sections recorded so far.
func (h *History) Sections() []Section {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.list)
}

// ViolationKind names what a violation broke.
type ViolationKind string

// The kinds of violation Check finds.
const (
	// Overlap: two holders used the same key at the same time, mutual
	// exclusion broken.
	Overlap ViolationKind = "overlap"
	// LateEntry: a holder began using the resource after its lock's
	// validity had ended, when another may already hold it.
	LateEntry ViolationKind = "late-entry"
	// Overrun: a holder was still using the resource when its lock's
	// validity ended.
	Overrun ViolationKind = "overrun"
	// StaleToken: a holder's fencing token was not larger than the token
	// of a section that had ended before it began (only checked when
	// tokens are recorded).
	StaleToken ViolationKind = "stale-token"
)

// Violation is one breach of safety found in a history: the section at
// fault, and for Overlap and StaleToken the earlier section it conflicts
// with.
type Violation struct {
	Kind    ViolationKind
	Section Section
	Other   *Section
}

func (v Violation) String() string {
	if v.Other != nil {
		return fmt.Sprintf("%s: %v and %v", v.Kind, v.Section, *v.Other)
	}
	return fmt.Sprintf("%s: %v", v.Kind, v.Section)
}

// Check returns every violation in sections: overlapping sections of one
// key, sections that began after their validity ended or ran past it, and,
// when fenced is true, tokens that did not grow.
func Check(sections []Section, fenced bool) []Violation {
	var out []Violation
	byKey := make(map[string][]Section)
	for _, s := range sections {
		switch {
		case s.Start >= s.ValidUntil:
			out = append(out, Violation{Kind: LateEntry, Section: s})
		case s.End > s.ValidUntil:
			out = append(out, Violation{Kind: Overrun, Section: s})
		}
		byKey[s.Key] = append(byKey[s.Key], s)
	}
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		list := byKey[k]
		slices.SortFunc(list, func(a, b Section) int {
			return cmp.Or(cmp.Compare(a.Start, b.Start), cmp.Compare(a.End, b.End))
		})
		out = append(out, overlaps(list)...)
		if fenced {
			out = append(out, staleTokens(list)...)
		}
	}
	return out
}

// overlaps finds the sections of one key, sorted by start, that begin
// before an earlier one has ended.
func overlaps(list []Section) []Violation {
	var out []Violation
	last := -1 // the section that ends last among those started so far
	for i, s := range list {
		if last >= 0 && s.Start < list[last].End {
			other := list[last]
			out = append(out, Violation{Kind: Overlap, Section: s, Other: &other})
		}
		if last < 0 || s.End > list[last].End {
			last = i
		}
	}
	return out
}

// staleTokens finds the sections of one key, sorted by start, whose token
// is not above that of every section that ended before they began.
func staleTokens(list []Section) []Violation {
	var out []Violation
	byEnd := slices.Clone(list)
	slices.SortFunc(byEnd, func(a, b Section) int { return cmp.Compare(a.End, b.End) })
	j, best := 0, -1 // best: index in byEnd of the highest token ended so far
	for _, s := range list {
		for ; j < len(byEnd) && byEnd[j].End <= s.Start; j++ {
			if best < 0 || byEnd[j].Token > byEnd[best].Token {
				best = j
			}
		}
		if best >= 0 && s.Token <= byEnd[best].Token {
			other := byEnd[best]
			out = append(out, Violation{Kind: StaleToken, Section: s, Other: &other})
		}
	}
	return out
}
