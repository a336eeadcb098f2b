package tracing_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/quorumlock/quorumlock/internal/optiontest"
	"github.com/quorumlock/quorumlock/middleware/tracing"
)

// Every With function returns an Option that shows itself as written, and
// New skips a nil Option.
func TestOptionsShowAsWritten(t *testing.T) {
	optiontest.Check(t, ".", map[string]fmt.Stringer{
		"WithTracerProvider": tracing.WithTracerProvider(noop.NewTracerProvider()),
		"WithKeys":           tracing.WithKeys(tracing.KeysHashed),
	})
	assert.NotNil(t, tracing.New(nil, tracing.WithKeys(tracing.KeysOmitted), nil))
}
