package logging_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/internal/optiontest"
	"github.com/quorumlock/quorumlock/middleware/logging"
)

// Every With function returns an Option that shows itself as written, and
// New skips a nil Option.
func TestOptionsShowAsWritten(t *testing.T) {
	optiontest.Check(t, ".", map[string]fmt.Stringer{
		"WithLevels": logging.WithLevels(slog.LevelInfo, slog.LevelDebug, slog.LevelWarn, slog.LevelError),
		"WithKeys":   logging.WithKeys(false),
		"WithNodes":  logging.WithNodes(true),
	})
	assert.Equal(t, "WithLevels(INFO, DEBUG, WARN, ERROR)", logging.WithLevels(slog.LevelInfo, slog.LevelDebug, slog.LevelWarn, slog.LevelError).String())

	var buf bytes.Buffer
	obs := logging.New(slog.New(slog.NewTextHandler(&buf, nil)), nil, logging.WithKeys(false), nil)
	obs.Observe(t.Context(), core.Event{Kind: core.OpLost, Key: "secret"})
	assert.Contains(t, buf.String(), "quorumlock lost")
	assert.NotContains(t, buf.String(), "secret")
}
