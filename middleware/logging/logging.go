package logging

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"

	"github.com/quorumlock/quorumlock/core"
)

// Observer logs Locker events with a *slog.Logger. Create it with New.
type Observer struct {
	logger *slog.Logger
	o      options
}

type options struct {
	ok, contended, failed, lost slog.Level
	omitKey                     bool
	allNodes                    bool
}

// Option configures an Observer. Options apply in order, a later one
// overriding an earlier one of the same kind; a nil Option is skipped.
type Option interface {
	apply(*options)
	// String shows the option as written, for logs and comparison.
	String() string
}

type optionFunc struct {
	fn   func(*options)
	name string
}

func (o optionFunc) apply(opts *options) { o.fn(opts) }
func (o optionFunc) String() string      { return o.name }

// WithLevels sets the level of successful operations (ok), of
// acquisitions lost to another holder (contended: that is how a lock
// works, not a fault), of every other failure (failed), and of locks lost
// while held (lost). Every level is valid; records below the handler's
// level are dropped.
// Default: Debug, Debug, Warn, Error.
func WithLevels(ok, contended, failed, lost slog.Level) Option {
	return optionFunc{func(o *options) { o.ok, o.contended, o.failed, o.lost = ok, contended, failed, lost },
		fmt.Sprintf("WithLevels(%v, %v, %v, %v)", ok, contended, failed, lost)}
}

// WithKeys, on, puts each lock's key in its records (the attribute key);
// off, keys are left out, for keys that carry data the logs must not.
// Default: on.
func WithKeys(on bool) Option {
	return optionFunc{func(o *options) { o.omitKey = !on }, "WithKeys(" + strconv.FormatBool(on) + ")"}
}

// WithNodes, on, logs each node's result for successful operations too;
// off, only failed operations carry their nodes' results.
// Default: off.
func WithNodes(on bool) Option {
	return optionFunc{func(o *options) { o.allNodes = on }, "WithNodes(" + strconv.FormatBool(on) + ")"}
}

// New returns an Observer that logs to logger (slog.Default() when nil),
// configured by opts.
func New(logger *slog.Logger, opts ...Option) *Observer {
	if logger == nil {
		logger = slog.Default()
	}
	o := options{ok: slog.LevelDebug, contended: slog.LevelDebug, failed: slog.LevelWarn, lost: slog.LevelError}
	for _, opt := range opts {
		if opt != nil {
			opt.apply(&o)
		}
	}
	return &Observer{logger: logger, o: o}
}

// Observe implements core.Observer.
func (l *Observer) Observe(ctx context.Context, e core.Event) {
	reason := core.Reason(e.Err)
	level := l.o.failed
	switch {
	case e.Kind == core.OpLost:
		level = l.o.lost
	case e.Err == nil:
		level = l.o.ok
	case reason == core.ReasonContended:
		level = l.o.contended
	}
	if !l.logger.Enabled(ctx, level) {
		return
	}
	attrs := make([]slog.Attr, 0, 9)
	if !l.o.omitKey {
		attrs = append(attrs, slog.String("key", e.Key))
	}
	if e.Lock != "" {
		attrs = append(attrs, slog.String("lock", e.Lock))
	}
	attrs = append(attrs, slog.String("outcome", reason))
	if e.Kind != core.OpLost {
		attrs = append(attrs, slog.Duration("duration", e.Duration))
	}
	if e.Kind == core.OpAcquire {
		attrs = append(attrs, slog.Int("tries", e.Tries))
	}
	if e.Token != 0 {
		attrs = append(attrs, slog.Int64("token", e.Token))
	}
	if e.Err == nil && (e.Kind == core.OpAcquire || e.Kind == core.OpExtend) {
		attrs = append(attrs, slog.Duration("validity", e.Validity))
	}
	if e.Err != nil {
		attrs = append(attrs, slog.String("error", e.Err.Error()))
	}
	if len(e.Nodes) > 0 && (e.Err != nil && e.Kind != core.OpWait || l.o.allNodes) {
		nodes := make([]slog.Attr, 0, len(e.Nodes))
		for _, n := range e.Nodes {
			node := []any{slog.String("outcome", n.Outcome.String()), slog.Duration("latency", n.Latency)}
			if n.Err != nil {
				node = append(node, slog.String("error", n.Err.Error()))
			}
			nodes = append(nodes, slog.Group(n.Node, node...))
		}
		attrs = append(attrs, slog.Attr{Key: "nodes", Value: slog.GroupValue(nodes...)})
	}
	l.logger.LogAttrs(ctx, level, message(e.Kind), attrs...)
}

// message is the record's message for op: a constant for each op core
// reports, so that logging an event does not build one.
func message(op core.Op) string {
	switch op {
	case core.OpAcquire:
		return "quorumlock acquire"
	case core.OpExtend:
		return "quorumlock extend"
	case core.OpRelease:
		return "quorumlock release"
	case core.OpLost:
		return "quorumlock lost"
	case core.OpWait:
		return "quorumlock acquire waits for servers too young to vote (restart guard)"
	}
	return "quorumlock " + op.String()
}
