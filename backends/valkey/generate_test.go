package valkey_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every Go file of this package but doc.go and the tests is
// backends/rueidis's file of the same name, renamed for valkey-go by
// internal/generate, so that a fix lands once: in backends/rueidis, then
// `go generate` here. The test fails with the diff when a file is out of
// step, missing, or left over.
func TestGeneratedFromRueidis(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	run := exec.Command("go", "run", "./internal/generate", "-out", out)
	msg, err := run.CombinedOutput()
	require.NoError(t, err, "%s", msg)
	want, got := goFiles(t, out), goFiles(t, ".")
	require.Equal(t, want, got, "the generated files: run go generate in backends/valkey")
	for _, name := range want {
		w, err := os.ReadFile(filepath.Join(out, name))
		require.NoError(t, err)
		g, err := os.ReadFile(name)
		require.NoError(t, err)
		assert.Equal(t, string(w), string(g), "%s is out of step with backends/rueidis: fix rueidis, then run go generate in backends/valkey", name)
	}
}

// goFiles lists dir's Go files, without doc.go and tests.
func goFiles(t *testing.T, dir string) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	require.NoError(t, err)
	var out []string
	for _, n := range names {
		if base := filepath.Base(n); base != "doc.go" && !strings.HasSuffix(base, "_test.go") {
			out = append(out, base)
		}
	}
	return out
}
