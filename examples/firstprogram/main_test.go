package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/conformance/redistest"
)

// This program is the README's "A first program", and these tests keep the
// two in step: the README's Go block must be main.go, and what main.go
// prints must be the README's sample output.

func TestMain(m *testing.M) { redistest.Main(m) }

// readmeSection is the README's section "A first program".
const readmeSection = "## A first program"

// The addresses main.go dials, which the run replaces with its servers'.
var programAddrs = []string{"localhost:6379", "localhost:6380", "localhost:6381"}

// block is one fenced code block of the README: its language and text.
type block struct{ lang, text string }

// readmeBlocks returns the fenced code blocks of the README's section
// "A first program", in order.
func readmeBlocks(t *testing.T) []block {
	t.Helper()
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(readme), "\n"+readmeSection+"\n")
	require.True(t, ok, "the README has no section %q", readmeSection)
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	var blocks []block
	var cur *block
	for line := range strings.SplitSeq(section, "\n") {
		switch {
		case cur == nil && strings.HasPrefix(line, "```"):
			cur = &block{lang: strings.TrimPrefix(line, "```")}
		case cur != nil && line == "```":
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			cur.text += line + "\n"
		}
	}
	require.Nil(t, cur, "a code block of the README's section %q is not closed", readmeSection)
	return blocks
}

// readmeProgram returns the README's Go block and the sample output that
// follows it: the first text block after it, which shows what the program
// prints on servers up for longer than a TTL.
func readmeProgram(t *testing.T) (program, output string) {
	t.Helper()
	blocks := readmeBlocks(t)
	for i, b := range blocks {
		if b.lang != "go" {
			continue
		}
		for _, after := range blocks[i+1:] {
			if after.lang == "text" {
				return b.text, after.text
			}
		}
		require.Fail(t, "no sample output", "the README's section %q has no text block after its Go block", readmeSection)
	}
	require.Fail(t, "no program", "the README's section %q has no Go block", readmeSection)
	return "", ""
}

func TestReadmeProgramIsMainGo(t *testing.T) {
	program, _ := readmeProgram(t)
	source, err := os.ReadFile("main.go")
	require.NoError(t, err)
	assert.Equal(t, strings.TrimSpace(string(source)), strings.TrimSpace(program),
		"the README's first program and examples/firstprogram/main.go differ: make them the same")
}

// number matches what changes from run to run: durations, and any number.
var number = regexp.MustCompile(`[0-9]+`)

// TestReadmeSampleOutput runs main.go, with its three addresses replaced by
// those of three real servers, and compares what it prints with the
// README's sample output, every number counting as equal.
//
// The sample shows servers that have been up for longer than a TTL, which
// vote at once. Servers that redistest starts are adopted (their birth key
// quorumlock:birth is set to 0, as redis-cli SET quorumlock:birth 0 does),
// which is how such servers look to the restart guard, without waiting
// ten seconds.
func TestReadmeSampleOutput(t *testing.T) {
	redistest.RequireServer(t)
	_, want := readmeProgram(t)
	goTool, err := exec.LookPath("go")
	require.NoError(t, err, "the go command runs the program")

	source, err := os.ReadFile("main.go")
	require.NoError(t, err)
	program := string(source)
	for _, addr := range programAddrs {
		require.Equal(t, 1, strings.Count(program, `"`+addr+`"`), "main.go names %s once", addr)
		s, err := redistest.StartServer(t.Context())
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		program = strings.Replace(program, `"`+addr+`"`, `"`+s.Addr()+`"`, 1)
	}

	// Build this package with main.go replaced by the copy (go build
	// -overlay), so that the program built is main.go with other addresses.
	dir := t.TempDir()
	copyPath := filepath.Join(dir, "main.go")
	require.NoError(t, os.WriteFile(copyPath, []byte(program), 0o600))
	mainPath, err := filepath.Abs("main.go")
	require.NoError(t, err)
	overlay, err := json.Marshal(map[string]map[string]string{"Replace": {mainPath: copyPath}})
	require.NoError(t, err)
	overlayPath := filepath.Join(dir, "overlay.json")
	require.NoError(t, os.WriteFile(overlayPath, overlay, 0o600))
	binary := filepath.Join(dir, "firstprogram")
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, goTool, "build", "-overlay", overlayPath, "-o", binary, ".").CombinedOutput()
	require.NoError(t, err, "go build: %s", out)

	ctx, cancel = context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, binary)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	require.NoError(t, cmd.Run(), "the program failed; its stderr:\n%s", stderr.String())
	assert.Less(t, time.Since(start), 5*time.Second, "on servers that vote, the program takes a moment")
	assert.Equal(t, number.ReplaceAllString(want, "N"), number.ReplaceAllString(stdout.String(), "N"),
		"the README's sample output and what the program printed differ")
	assert.Empty(t, stderr.String(), "on servers that vote, the observer logs nothing at Info or above")
}
