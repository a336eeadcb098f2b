// Package nodeutil holds the pieces the driver backends share when they
// implement core's optional node capabilities.
package nodeutil

import (
	"context"
	"time"

	"github.com/quorumlock/quorumlock/core"
)

// Resubscription pacing of a Watch whose connection was lost: the first
// pause before subscribing again, doubled after each failure up to the
// longest.
const (
	MinBackoff = 50 * time.Millisecond
	MaxBackoff = 2 * time.Second
)

// FailAll gives every call err as its error and no reply.
func FailAll(calls []core.Call, err error) {
	for i := range calls {
		calls[i].Reply, calls[i].Err = nil, err
	}
}

// EvalEach runs calls one by one through n's Eval (a call with Source) or
// EvalSHA, in order: the batch of a node whose client cannot pipeline.
// Once ctx has ended, the calls left fail with its error unsent.
func EvalEach(ctx context.Context, n core.Node, calls []core.Call) {
	for i := range calls {
		if err := ctx.Err(); err != nil {
			FailAll(calls[i:], err)
			return
		}
		c := &calls[i]
		if c.Source != "" {
			c.Reply, c.Err = n.Eval(ctx, c.Source, c.Keys, c.Args)
		} else {
			c.Reply, c.Err = n.EvalSHA(ctx, c.SHA, c.Keys, c.Args)
		}
	}
}
