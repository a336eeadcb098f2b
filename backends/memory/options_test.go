package memory_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/quorumlock/quorumlock/backends/memory"
	"github.com/quorumlock/quorumlock/internal/optiontest"
)

// Every With function returns an Option that shows itself as written, and
// New skips a nil Option (TestNilOptions has the rest).
func TestOptionsShowAsWritten(t *testing.T) {
	optiontest.Check(t, ".", map[string]fmt.Stringer{
		"WithName":  memory.WithName("a"),
		"WithClock": memory.WithClock(memory.NewManualClock(time.Now())),
	})
	n := memory.New(nil, memory.WithName("a"), nil)
	defer n.Close()
	assert.Equal(t, "a", n.String())
}
