package httplock_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/backends/memory"
	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/internal/optiontest"
	"github.com/quorumlock/quorumlock/middleware/httplock"
)

// Every With function returns an Option that shows itself as written, and
// New skips a nil Option.
func TestOptionsShowAsWritten(t *testing.T) {
	optiontest.Check(t, ".", map[string]fmt.Stringer{
		"WithWait":           httplock.WithWait(time.Second),
		"WithBusyStatus":     httplock.WithBusyStatus(http.StatusConflict),
		"WithRetryAfter":     httplock.WithRetryAfter(time.Second),
		"WithReleaseTimeout": httplock.WithReleaseTimeout(time.Second),
		"WithPassUnkeyed":    httplock.WithPassUnkeyed(true),
		"WithSharedReads":    httplock.WithSharedReads(true),
		"WithKeyPrefix":      httplock.WithKeyPrefix("http:"),
		"WithErrorHandler":   httplock.WithErrorHandler(func(http.ResponseWriter, *http.Request, error) {}),
	})
	locker, err := core.New(memory.AsNodes(memory.NewNodes(3)))
	require.NoError(t, err)
	defer locker.Close()
	mw, err := httplock.New(locker, httplock.PathValue("id"), nil, httplock.WithWait(time.Second), nil)
	require.NoError(t, err)
	assert.NotNil(t, mw)
}
