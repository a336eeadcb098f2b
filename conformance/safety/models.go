package safety

import (
	"cmp"
	"fmt"
	"maps"
	"math/bits"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// The porcupine models of a key's histories. Each is checked per key (a
// key's lock and its register are independent of every other key's; a
// multi-key lock's operations count in each of its keys' histories), on
// the History's clock in nanoseconds.

// noHolder is the lock model's writer when no exclusive lock holds it.
const noHolder = -1

// MaxReaders is the most clients a run may have when they take shared
// locks: LockModel keeps its readers as bits of a uint64.
const MaxReaders = 64

// lockState is the lock model's state: the client that holds the lock
// exclusively, or noHolder, and the clients that hold it shared, as bits.
type lockState struct {
	writer  int
	readers uint64
}

// lockInput is what a client asked of a key's lock, exclusive or shared.
// Release stands for the end of a hold: the operation's invocation is the
// earlier of the release's invocation and the end of the lock's validity
// (see holds).
type lockInput struct {
	Client  int
	Kind    LockOpKind
	Shared  bool
	Permits int // a permit of a semaphore of Permits: held as a reader is, Permits at most
}

// LockModel is a readers-writer lock: its state is the client that holds
// it exclusively (a plain lock, or a multi-key lock on one of its keys),
// or the clients that hold it shared, or neither. An OK exclusive acquire
// needs it free of both and takes it; an OK shared acquire needs no
// exclusive holder and joins the readers. An OK extend needs the client
// to hold it so; the end of a hold needs the client to hold it so, and
// lets go. A failed or unknown acquire or extend changes nothing: a
// refusal is always allowed, and an acquire that may have taken the lock
// on some nodes was never used by its caller, and ended (released, or
// expired) without a holder, which no other operation can tell from no
// acquire at all. A history of exclusive operations only is a mutex's.
// A permit of a semaphore of K (lockInput.Permits) is held as a reader
// is, but an OK acquire needs fewer than K holders.
var LockModel = porcupine.Model{
	Init: func() any { return lockState{writer: noHolder} },
	Step: func(state, input, output any) (bool, any) {
		st, in, out := state.(lockState), input.(lockInput), output.(Outcome)
		bit := uint64(1) << uint(in.Client%MaxReaders)
		holds := st.writer == in.Client
		if in.Shared || in.Permits > 0 {
			holds = st.readers&bit != 0
		}
		switch {
		case in.Kind == Release && (in.Shared || in.Permits > 0):
			return holds, lockState{writer: st.writer, readers: st.readers &^ bit}
		case in.Kind == Release:
			return holds, lockState{writer: noHolder, readers: st.readers}
		case out != OK:
			return true, st
		case in.Kind == Acquire && in.Permits > 0:
			return st.writer == noHolder && bits.OnesCount64(st.readers) < in.Permits, lockState{writer: st.writer, readers: st.readers | bit}
		case in.Kind == Acquire && in.Shared:
			return st.writer == noHolder, lockState{writer: st.writer, readers: st.readers | bit}
		case in.Kind == Acquire:
			return st.writer == noHolder && st.readers == 0, lockState{writer: in.Client, readers: st.readers}
		case in.Kind == Extend:
			return holds, st
		}
		return false, st
	},
	DescribeOperation: func(input, output any) string {
		in := input.(lockInput)
		shared := ""
		if in.Shared {
			shared = " shared"
		}
		if in.Kind == Release {
			return fmt.Sprintf("client %d's%s hold ends (release %s)", in.Client, shared, output)
		}
		return fmt.Sprintf("client %d %s%s: %s", in.Client, in.Kind, shared, output)
	},
	DescribeState: func(state any) string {
		st := state.(lockState)
		switch {
		case st.writer != noHolder:
			return fmt.Sprintf("held by client %d", st.writer)
		case st.readers != 0:
			var rs []string
			for c := range MaxReaders {
				if st.readers&(1<<uint(c)) != 0 {
					rs = append(rs, fmt.Sprint(c))
				}
			}
			return "shared by clients " + strings.Join(rs, ", ")
		}
		return "free"
	},
}

// registerInput is a read-modify-write: the value written, and whether the
// write may not have been applied (its outcome unknown). Its output is the
// value read.
type registerInput struct {
	Wrote int64
	Maybe bool
}

// readInput is a reader's section: it writes nothing, and its output is
// the two values it read, at the section's start and at its end.
type readInput struct{}

// RegisterModel is a register (starting at 0) that holders change by
// read-modify-write, one atomic operation under the lock: the value read
// must be the register's value, which becomes the value written (or,
// when the write's outcome is unknown, stays or becomes it). A reader's
// section is one atomic operation too: both its reads must be the
// register's value, so a write between them (a writer inside the
// section) fails.
var RegisterModel = (&porcupine.NondeterministicModel{
	Init: func() []any { return []any{int64(0)} },
	Step: func(state, input, output any) []any {
		v := state.(int64)
		if _, ok := input.(readInput); ok {
			if out := output.([2]int64); out[0] != v || out[1] != v {
				return nil
			}
			return []any{v}
		}
		in := input.(registerInput)
		switch {
		case output.(int64) != v:
			return nil
		case in.Maybe:
			return []any{v, in.Wrote}
		}
		return []any{in.Wrote}
	},
	DescribeOperation: func(input, output any) string {
		in, ok := input.(registerInput)
		if !ok {
			out := output.([2]int64)
			return fmt.Sprintf("read %d, then %d", out[0], out[1])
		}
		maybe := ""
		if in.Maybe {
			maybe = " (unknown)"
		}
		return fmt.Sprintf("read %d, write %d%s", output, in.Wrote, maybe)
	},
	DescribeState: func(state any) string { return fmt.Sprint(state) },
}).ToModel()

// holds turns the lock operations of one key into the lock model's
// operations. Each client's operations are taken in order: an OK acquire
// opens a hold, an OK extend moves its validity's end, and the release
// ends it. The end's invocation is the earlier of the release's
// invocation and the end of the validity: a hold ends then at the latest,
// by release or by expiry (the nodes keep the lock until then, so no one
// else can take it earlier). Its response is the release's (or, for a hold
// never released, the validity's end): ending a hold earlier than it truly
// did only lets more histories pass, so whatever the release's outcome,
// the check is sound. A release with no hold is left out.
func holds(ops []LockOp) []porcupine.Operation {
	byClient := map[int][]LockOp{}
	for _, o := range ops {
		byClient[o.Client] = append(byClient[o.Client], o)
	}
	var out []porcupine.Operation
	for _, c := range slices.Sorted(maps.Keys(byClient)) {
		list := byClient[c]
		slices.SortStableFunc(list, func(a, b LockOp) int { return cmp.Compare(a.Call, b.Call) })
		held, shared, permits, validUntil := false, false, 0, time.Duration(0)
		end := func(call, ret time.Duration, o Outcome, meta string) {
			out = append(out, operation(c, lockInput{Client: c, Kind: Release, Shared: shared, Permits: permits}, o, min(call, validUntil), ret, meta))
			held = false
		}
		for _, o := range list {
			switch {
			case o.Kind == Release && held:
				end(o.Call, o.Return, o.Outcome, fmt.Sprintf("%v; the hold was valid until %v", o, validUntil))
			case o.Kind == Release: // not a hold's end
			default:
				out = append(out, operation(c, lockInput{Client: c, Kind: o.Kind, Shared: o.Shared, Permits: o.Permits}, o.Outcome, o.Call, o.Return, o.String()))
				if o.Outcome == OK {
					held, shared, permits, validUntil = true, o.Shared, o.Permits, o.ValidUntil
				}
			}
		}
		if held {
			end(validUntil, validUntil, Unknown, fmt.Sprintf("client %d never released; valid until %v", c, validUntil))
		}
	}
	return out
}

// rmws turns the register operations of one key into the register model's
// operations. A write whose outcome is unknown may land at any time after
// it was sent: its response is end, the end of the history. (Its read, which
// did return, is then allowed as late too: a weaker check, never a false
// alarm.)
func rmws(ops []RegisterOp, end time.Duration) []porcupine.Operation {
	out := make([]porcupine.Operation, 0, len(ops))
	for _, o := range ops {
		if o.Reader {
			out = append(out, operation(o.Client, readInput{}, [2]int64{o.Read, o.Again}, o.Call, o.Return, o.String()))
			continue
		}
		ret := o.Return
		if o.Outcome != OK {
			ret = max(ret, end)
		}
		out = append(out, operation(o.Client, registerInput{Wrote: o.Wrote, Maybe: o.Outcome != OK}, o.Read, o.Call, ret, o.String()))
	}
	return out
}

func operation(client int, input, output any, call, ret time.Duration, meta string) porcupine.Operation {
	return porcupine.Operation{ClientId: client, Input: input, Output: output, Call: int64(call), Return: int64(ret), Metadata: meta}
}
