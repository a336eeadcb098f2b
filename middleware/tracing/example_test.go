package tracing_test

import (
	"context"
	"fmt"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/quorumlock/quorumlock/backends/memory"
	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/middleware/tracing"
)

// A Locker whose operations become spans under the caller's span, each
// with an event per node (one here) and, when it failed, one for the
// error. Here the spans go to an in-memory recorder; a service would give
// a provider with an exporter.
func Example() {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())

	locker, err := core.New(memory.AsNodes(memory.NewNodes(1)),
		core.WithObserver(tracing.New(tracing.WithTracerProvider(tp))))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer locker.Close()

	ctx, request := tp.Tracer("example").Start(context.Background(), "handle request")
	lock, err := locker.Acquire(ctx, "invoice:7")
	if err != nil {
		fmt.Println(err)
		return
	}
	_, _ = locker.TryAcquire(ctx, "invoice:7") // held: contended
	_ = lock.Release(ctx)
	request.End()

	for _, s := range rec.Ended() {
		var outcome string
		for _, a := range s.Attributes() {
			if a.Key == tracing.KeyOutcome {
				outcome = a.Value.AsString()
			}
		}
		fmt.Printf("%s outcome=%s status=%s child=%t events=%d\n", s.Name(), outcome, s.Status().Code,
			s.Parent().SpanID() == request.SpanContext().SpanID(), len(s.Events()))
	}
	// Output:
	// quorumlock.acquire outcome=ok status=Unset child=true events=1
	// quorumlock.acquire outcome=contended status=Error child=true events=2
	// quorumlock.release outcome=ok status=Unset child=true events=1
	// handle request outcome= status=Unset child=false events=0
}
