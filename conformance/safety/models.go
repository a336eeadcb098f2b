package safety

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/anishathalye/porcupine"
)

// The porcupine models of a key's histories. Each is checked per key (a
// key's lock and its register are independent of every other key's), on
// the History's clock in nanoseconds.

// noHolder is the mutex model's state when the lock is free.
const noHolder = -1

// mutexInput is what a client asked of a key's lock. Release stands for the
// end of a hold: the operation's invocation is the earlier of the release's
// invocation and the end of the lock's validity (see holds).
type mutexInput struct {
	Client int
	Kind   LockOpKind
}

// MutexModel is a mutex: its state is the client that holds it, or -1. An
// OK acquire needs the mutex free and takes it; an OK extend needs the
// client to hold it; the end of a hold needs the client to hold it and
// frees it. A failed or unknown acquire or extend changes nothing: a
// refusal is always allowed, and an acquire that may have taken the lock
// on some nodes was never used by its caller, and ended (released, or
// expired) without a holder, which no other operation can tell from no
// acquire at all.
var MutexModel = porcupine.Model{
	Init: func() any { return noHolder },
	Step: func(state, input, output any) (bool, any) {
		holder, in, out := state.(int), input.(mutexInput), output.(Outcome)
		switch {
		case in.Kind == Release:
			return holder == in.Client, noHolder
		case out != OK:
			return true, holder
		case in.Kind == Acquire:
			return holder == noHolder, in.Client
		case in.Kind == Extend:
			return holder == in.Client, holder
		}
		return false, holder
	},
	DescribeOperation: func(input, output any) string {
		in := input.(mutexInput)
		if in.Kind == Release {
			return fmt.Sprintf("client %d's hold ends (release %s)", in.Client, output)
		}
		return fmt.Sprintf("client %d %s: %s", in.Client, in.Kind, output)
	},
	DescribeState: func(state any) string {
		if h := state.(int); h != noHolder {
			return fmt.Sprintf("held by client %d", h)
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

// RegisterModel is a register (starting at 0) that holders change by
// read-modify-write, one atomic operation under the lock: the value read
// must be the register's value, which becomes the value written (or,
// when the write's outcome is unknown, stays or becomes it).
var RegisterModel = (&porcupine.NondeterministicModel{
	Init: func() []any { return []any{int64(0)} },
	Step: func(state, input, output any) []any {
		v, in := state.(int64), input.(registerInput)
		switch {
		case output.(int64) != v:
			return nil
		case in.Maybe:
			return []any{v, in.Wrote}
		}
		return []any{in.Wrote}
	},
	DescribeOperation: func(input, output any) string {
		in := input.(registerInput)
		maybe := ""
		if in.Maybe {
			maybe = " (unknown)"
		}
		return fmt.Sprintf("read %d, write %d%s", output, in.Wrote, maybe)
	},
	DescribeState: func(state any) string { return fmt.Sprint(state) },
}).ToModel()

// holds turns the lock operations of one key into the mutex model's
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
		held, validUntil := false, time.Duration(0)
		end := func(call, ret time.Duration, o Outcome, meta string) {
			out = append(out, operation(c, mutexInput{Client: c, Kind: Release}, o, min(call, validUntil), ret, meta))
			held = false
		}
		for _, o := range list {
			switch {
			case o.Kind == Release && held:
				end(o.Call, o.Return, o.Outcome, fmt.Sprintf("%v; the hold was valid until %v", o, validUntil))
			case o.Kind == Release: // not a hold's end
			default:
				out = append(out, operation(c, mutexInput{Client: c, Kind: o.Kind}, o.Outcome, o.Call, o.Return, o.String()))
				if o.Outcome == OK {
					held, validUntil = true, o.ValidUntil
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
