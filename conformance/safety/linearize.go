package safety

import (
	"cmp"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/anishathalye/porcupine"
)

// checkTimeout bounds porcupine's search on one key's history: a history
// it cannot decide in that time is an error, not a pass.
const checkTimeout = time.Minute

// CheckHistories checks with porcupine, key by key, that the lock
// operations of h are a linearizable history of LockModel (an operation on
// a multi-key lock counts in each of its keys' histories), and its
// register operations one of RegisterModel. It returns a violation for each
// history that is not, and writes porcupine's visualisation of it into
// dir, in a file whose name starts with name (the violation names the
// file). It fails if porcupine cannot decide within its time bound, or if
// a visualisation cannot be written.
func CheckHistories(h *History, dir, name string) ([]Violation, error) {
	end := h.Now() // after every operation recorded so far
	lockOps, regOps := map[string][]LockOp{}, map[string][]RegisterOp{}
	for _, o := range h.LockOps() {
		for _, k := range keysOf(o.Key, o.Keys) {
			lockOps[k] = append(lockOps[k], o)
		}
	}
	for _, o := range h.RegisterOps() {
		regOps[o.Key] = append(regOps[o.Key], o)
		end = max(end, o.Return)
	}
	var out []Violation
	for i, k := range slices.Sorted(maps.Keys(lockOps)) {
		v, err := linearizable(LockHistory, k, LockModel, holds(lockOps[k]), filepath.Join(dir, fmt.Sprintf("%s-lock-k%d.html", name, i)))
		out = append(out, v...)
		if err != nil {
			return out, err
		}
	}
	for i, k := range slices.Sorted(maps.Keys(regOps)) {
		v, err := linearizable(RegisterHistory, k, RegisterModel, rmws(regOps[k], end), filepath.Join(dir, fmt.Sprintf("%s-register-k%d.html", name, i)))
		out = append(out, v...)
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

// linearizable checks one key's history against model; when it is not
// linearizable, it writes the visualisation to path and returns the
// violation.
func linearizable(kind ViolationKind, key string, model porcupine.Model, ops []porcupine.Operation, path string) ([]Violation, error) {
	res, info := porcupine.CheckOperationsVerbose(model, ops, checkTimeout)
	switch res {
	case porcupine.Ok:
		return nil, nil
	case porcupine.Unknown:
		return nil, fmt.Errorf("safety: porcupine could not decide within %v whether the %s of %q (%d operations) is linearizable", checkTimeout, kind, key, len(ops))
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("safety: visualisation of the %s of %q: %w", kind, key, err)
	}
	if err := porcupine.VisualizePath(model, info, path); err != nil {
		return nil, fmt.Errorf("safety: visualisation of the %s of %q: %w", kind, key, err)
	}
	return []Violation{{Kind: kind, Key: key, File: path}}, nil
}

// checkRun checks a run's history into rep: its sections with Check, its
// operations with CheckHistories, whose visualisations are named after the
// seed and the run's start.
func checkRun(hist *History, cfg Config, rep *Report, start time.Time) error {
	sections := hist.Sections()
	rep.Sections, rep.LockOps, rep.RegisterOps = len(sections), len(hist.LockOps()), len(hist.RegisterOps())
	rep.Readers, rep.MostReaders, rep.Sets = sharing(sections)
	name := fmt.Sprintf("safety-seed%d-%s", cfg.Seed, start.Format("20060102T150405.000"))
	violations, err := CheckHistories(hist, cfg.HistoryDir, name)
	if err != nil {
		return fmt.Errorf("safety: seed %d: %w", cfg.Seed, err)
	}
	for _, s := range sections {
		if s.Refused {
			rep.Refused++
		}
	}
	// A leader's token is its term, fenced or not.
	rep.Violations = append(violations, Check(sections, cfg.Fencing || cfg.Workload == ElectionWorkload)...)
	return nil
}

// sharing counts the shared sections, the most of them on one key at
// once, and the sections of multi-key locks of two keys or more.
func sharing(sections []Section) (readers, most, sets int) {
	type event struct {
		at    time.Duration
		delta int
	}
	byKey := map[string][]event{}
	for _, s := range sections {
		switch {
		case s.Shared:
			readers++
			byKey[s.Key] = append(byKey[s.Key], event{s.Start, 1}, event{s.End, -1})
		case len(s.Keys) > 1:
			sets++
		}
	}
	for _, events := range byKey {
		slices.SortFunc(events, func(a, b event) int { // at one instant, ends first
			return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.delta, b.delta))
		})
		n := 0
		for _, e := range events {
			n += e.delta
			most = max(most, n)
		}
	}
	return readers, most, sets
}
