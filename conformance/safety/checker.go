package safety

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"
)

// Section is one use of a lock: a client held key and used the resource it
// protects from Start to End. Times are on one monotonic clock, the
// History's, shared by every client.
type Section struct {
	Client int
	Key    string   // the lock's name: its keys joined by commas
	Keys   []string // a multi-key lock's keys (Key alone when empty)
	Shared bool     // under a shared (read) lock
	// Permits is K for a section under a permit of a semaphore of K, and
	// Count the count of the key's holders its entry read (itself
	// included): more than Permits is a violation.
	Permits int
	Count   int64
	Token   int64 // the fencing token, when the Locker has fencing on
	Start   time.Duration
	End     time.Duration
	// ValidUntil is when the lock stops being safe to use, as the client
	// learnt it when the lock was granted (the lock's remaining validity
	// added to a reading of the clock taken just before, so never later
	// than the truth).
	ValidUntil time.Duration
}

func (s Section) String() string {
	shared := ""
	switch {
	case s.Shared:
		shared = " (shared)"
	case s.Permits > 0:
		shared = fmt.Sprintf(" (permit of %d, holder %d)", s.Permits, s.Count)
	}
	return fmt.Sprintf("client %d on %q%s [%v, %v] valid until %v token %d", s.Client, s.Key, shared, s.Start, s.End, s.ValidUntil, s.Token)
}

// History collects the sections and the operations (on locks and on the
// registers they protect) of a run from many goroutines, on one monotonic
// clock.
type History struct {
	base        time.Time
	mu          sync.Mutex
	list        []Section
	lockOps     []LockOp
	registerOps []RegisterOp
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

// The kinds of violation Check and CheckHistories find.
const (
	// LockHistory: a key's lock operations are not a linearizable history
	// of a readers-writer lock (LockModel): a lock was granted while
	// another client held it, exclusion broken (two exclusive holders, or
	// a shared and an exclusive one). Found by CheckHistories.
	LockHistory ViolationKind = "lock history"
	// RegisterHistory: the read-modify-writes and reads of the register a
	// key's lock protects are not a linearizable history of a register
	// (RegisterModel): two holders' updates interleaved, or a write fell
	// inside a reader's section. Found by CheckHistories.
	RegisterHistory ViolationKind = "register history"
	// LateEntry: a holder began using the resource after its lock's
	// validity had ended, when another may already hold it.
	LateEntry ViolationKind = "late-entry"
	// Overrun: a holder was still using the resource when its lock's
	// validity ended.
	Overrun ViolationKind = "overrun"
	// StaleToken: a holder's fencing token was not larger than the token
	// of another lock's section that had ended before it began (only
	// checked when tokens are recorded; a reader's only against writers').
	StaleToken ViolationKind = "stale-token"
	// TooMany: a permit holder's entry counted more holders of its key
	// than the semaphore's permits (Section.Count above Section.Permits).
	TooMany ViolationKind = "too-many-holders"
)

// Violation is one breach of safety found in a history. For the section
// kinds, the section at fault, and for StaleToken the earlier section it
// conflicts with; for the history kinds, the key whose history is not
// linearizable and the file of porcupine's visualisation of it.
type Violation struct {
	Kind    ViolationKind
	Section Section
	Other   *Section
	Key     string
	File    string
}

func (v Violation) String() string {
	switch {
	case v.Kind == LockHistory || v.Kind == RegisterHistory:
		return fmt.Sprintf("%s of %q is not linearizable (porcupine's visualisation: %s)", v.Kind, v.Key, v.File)
	case v.Other != nil:
		return fmt.Sprintf("%s: %v and %v", v.Kind, v.Section, *v.Other)
	}
	return fmt.Sprintf("%s: %v", v.Kind, v.Section)
}

// Check returns the violations in sections that the histories' models
// cannot see, having no clock and no tokens: sections that began after
// their validity ended or ran past it, permit holders that counted more
// holders than permits, and, when fenced is true, tokens
// that did not grow, key by key (a multi-key lock's section counts for
// each of its keys). Overlapping sections are CheckHistories' to find.
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
		if s.Permits > 0 && s.Count > int64(s.Permits) {
			out = append(out, Violation{Kind: TooMany, Section: s})
		}
		for _, k := range keysOf(s.Key, s.Keys) {
			byKey[k] = append(byKey[k], s)
		}
	}
	if !fenced {
		return out
	}
	for _, k := range slices.Sorted(maps.Keys(byKey)) {
		list := byKey[k]
		slices.SortFunc(list, func(a, b Section) int {
			return cmp.Or(cmp.Compare(a.Start, b.Start), cmp.Compare(a.End, b.End))
		})
		out = append(out, staleTokens(list)...)
	}
	return out
}

// staleTokens finds the sections of one key, sorted by start, whose token
// is not above that of every section that ended before they began; a
// reader's is checked against the writers' (exclusive) sections only,
// since readers' tokens are new but need not grow among readers that
// overlap. A later section of the same lock (the same client and token,
// after an extension) is not stale.
func staleTokens(list []Section) []Violation {
	var out []Violation
	byEnd := slices.Clone(list)
	slices.SortFunc(byEnd, func(a, b Section) int { return cmp.Compare(a.End, b.End) })
	// best, bestWriter: indexes in byEnd of the highest token ended so
	// far, of any section and of a writer's.
	j, best, bestWriter := 0, -1, -1
	for _, s := range list {
		for ; j < len(byEnd) && byEnd[j].End <= s.Start; j++ {
			if best < 0 || byEnd[j].Token > byEnd[best].Token {
				best = j
			}
			if !byEnd[j].Shared && (bestWriter < 0 || byEnd[j].Token > byEnd[bestWriter].Token) {
				bestWriter = j
			}
		}
		b := best
		if s.Shared {
			b = bestWriter
		}
		if b < 0 {
			continue
		}
		other := byEnd[b]
		if s.Token < other.Token || s.Token == other.Token && s.Client != other.Client {
			out = append(out, Violation{Kind: StaleToken, Section: s, Other: &other})
		}
	}
	return out
}
