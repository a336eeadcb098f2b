package redistest

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/quorumlock/quorumlock/internal/optiontest"
)

// Every With function returns an Option that shows itself as written, and
// StartServer skips a nil Option.
func TestOptionsShowAsWritten(t *testing.T) {
	optiontest.Check(t, ".", map[string]fmt.Stringer{
		"WithFresh": WithFresh(true),
		"WithArgs":  WithArgs("--maxmemory", "1mb"),
		"WithEnv":   WithEnv("TZ=UTC"),
		"WithPort":  WithPort(7000),
	})
	assert.Equal(t, `WithArgs("--maxmemory", "1mb")`, WithArgs("--maxmemory", "1mb").String())
	s := StartTestServer(t, nil, WithArgs("--maxmemory", "1mb"), nil)
	assert.NotEmpty(t, s.Addr())
}
