package core_test

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quorumlock/quorumlock/backends/memory"
	"github.com/quorumlock/quorumlock/core"
	"github.com/quorumlock/quorumlock/core/driver"
)

// maxWalkFiles is the most files of core, core/driver and strategies that
// each walked path may touch (docs/design.md, the walk-through).
const maxWalkFiles = 8

// TestWalkThrough keeps docs/design.md's walk-through true. Each path it
// lists (an Acquire without contention, a hand-off to a waiter) names at
// most maxWalkFiles files, and each function it names is declared in the
// file named with it. Then the paths run, on memory nodes: every frame of
// core, core/driver and strategies on the stack at each node call, clock
// reading and timer is in a file its path lists.
func TestWalkThrough(t *testing.T) {
	paths := readWalkThrough(t)
	require.Len(t, paths, 2, "the walk-through lists two paths")
	for name, steps := range paths {
		t.Run("named/"+name, func(t *testing.T) {
			assert.LessOrEqual(t, len(steps), maxWalkFiles, "files on the path")
			for file, funcs := range steps {
				declared := declaredFuncs(t, filepath.Join("..", file))
				for _, f := range funcs {
					assert.Contains(t, declared, f, "%s names %s, which it does not declare", file, f)
				}
			}
		})
	}
	acquire, handoff := walkedFiles(t)
	for name, seen := range map[string][]string{"acquire": acquire, "hand-off": handoff} {
		t.Run("walked/"+name, func(t *testing.T) {
			steps := paths[name]
			require.NotEmpty(t, seen, "no frame recorded")
			for _, file := range seen {
				assert.Contains(t, steps, file, "the %s path runs code in %s, which the walk-through does not list", name, file)
			}
		})
	}
}

// walkStep is a line of the walk-through: "1. `core/acquire.go`:" and
// then the functions it names, each in backquotes.
var walkStep = regexp.MustCompile("^\\d+\\. `([a-z/]+\\.go)`: (.*)$")

// readWalkThrough returns the walk-through's paths, by the first word of
// their headings ("acquire", "hand-off"): for each, its files and the
// functions it names in them (Type.Method or func).
func readWalkThrough(t *testing.T) map[string]map[string][]string {
	b, err := os.ReadFile("../docs/design.md")
	require.NoError(t, err)
	paths := map[string]map[string][]string{}
	var cur map[string][]string
	in := false
	for line := range strings.Lines(string(b)) {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "## "):
			in = line == "## Walk-through: an Acquire and a hand-off"
			cur = nil
		case in && strings.HasPrefix(line, "### "):
			name := strings.ToLower(strings.Fields(line)[1])
			cur = map[string][]string{}
			paths[name] = cur
		case in && cur != nil && walkStep.MatchString(line):
			m := walkStep.FindStringSubmatch(line)
			for _, f := range regexp.MustCompile("`([A-Za-z.]+)`").FindAllStringSubmatch(m[2], -1) {
				cur[m[1]] = append(cur[m[1]], f[1])
			}
		}
	}
	return paths
}

// declaredFuncs returns the functions that file declares: "Type.Method"
// (the receiver's type without its star) or the function's name.
func declaredFuncs(t *testing.T, file string) []string {
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.SkipObjectResolution)
	require.NoError(t, err)
	var out []string
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok {
			continue
		}
		name := fd.Name.Name
		if fd.Recv != nil && len(fd.Recv.List) == 1 {
			typ := fd.Recv.List[0].Type
			if s, ok := typ.(*ast.StarExpr); ok {
				typ = s.X
			}
			if id, ok := typ.(*ast.Ident); ok {
				name = id.Name + "." + name
			}
		}
		out = append(out, name)
	}
	return out
}

// walkedFiles runs an Acquire without contention, then a hand-off to a
// waiter, and returns the files of core, core/driver and strategies on
// the stack at the nodes' calls and the clock's readings of each.
func walkedFiles(t *testing.T) (acquire, handoff []string) {
	synctest.Test(t, func(t *testing.T) {
		rec := &stacks{}
		nodes := memory.NewNodes(3)
		traced := make([]core.Node, len(nodes))
		for i, n := range nodes {
			traced[i] = tracedNode{n, rec}
		}
		l, err := core.New(traced, core.WithClock(tracedClock{driver.SystemClock(), rec}))
		require.NoError(t, err)
		defer func() { require.NoError(t, l.Close()) }()
		warm, err := l.Acquire(t.Context(), "warm") // identities checked, scripts loaded
		require.NoError(t, err)
		require.NoError(t, warm.Release(t.Context()))

		rec.start()
		held, err := l.Acquire(t.Context(), "k")
		require.NoError(t, err)
		acquire = rec.stop()

		got := make(chan *core.Lock)
		go func() {
			lock, err := l.Acquire(context.Background(), "k")
			assert.NoError(t, err)
			got <- lock
		}()
		synctest.Wait() // the waiter has lost its round, queued and waits
		rec.start()
		require.NoError(t, held.Release(t.Context()))
		lock := <-got
		handoff = rec.stop()
		require.NoError(t, lock.Release(t.Context()))
	})
	return acquire, handoff
}

// stacks records the source files of the frames on the stack where
// here is called, while recording.
type stacks struct {
	mu    sync.Mutex
	on    bool
	files map[string]bool
}

func (s *stacks) start() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.on, s.files = true, map[string]bool{}
}

func (s *stacks) stop() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.on = false
	var out []string
	for f := range s.files {
		out = append(out, f)
	}
	slices.Sort(out)
	return out
}

// moduleRoot is the module's directory, as the frames' files begin.
var moduleRoot = func() string {
	root, _ := filepath.Abs("..")
	return filepath.ToSlash(root)
}()

// walkedDirs are the packages the walk-through counts, as a file's path
// from the module's root begins.
var walkedDirs = regexp.MustCompile(`^(core|core/driver|strategies)/[a-z_]+\.go$`)

func (s *stacks) here() {
	pc := make([]uintptr, 64)
	frames := runtime.CallersFrames(pc[:runtime.Callers(2, pc)])
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.on {
		return
	}
	for {
		f, more := frames.Next()
		if rel, ok := strings.CutPrefix(filepath.ToSlash(f.File), moduleRoot+"/"); ok {
			if walkedDirs.MatchString(rel) && !strings.HasSuffix(rel, "_test.go") {
				s.files[rel] = true
			}
		}
		if !more {
			return
		}
	}
}

// tracedNode is a memory node whose calls record the stack.
type tracedNode struct {
	*memory.Node
	rec *stacks
}

func (n tracedNode) SetNX(ctx context.Context, key, value string, ttl time.Duration) (bool, error) {
	n.rec.here()
	return n.Node.SetNX(ctx, key, value, ttl)
}

func (n tracedNode) Eval(ctx context.Context, script string, keys, args []string) (any, error) {
	n.rec.here()
	return n.Node.Eval(ctx, script, keys, args)
}

func (n tracedNode) EvalSHA(ctx context.Context, sha string, keys, args []string) (any, error) {
	n.rec.here()
	return n.Node.EvalSHA(ctx, sha, keys, args)
}

func (n tracedNode) EvalBatch(ctx context.Context, calls []driver.Call) {
	n.rec.here()
	n.Node.EvalBatch(ctx, calls)
}

// tracedClock is a clock whose readings and timers record the stack.
type tracedClock struct {
	driver.Clock
	rec *stacks
}

func (c tracedClock) Now() time.Time {
	c.rec.here()
	return c.Clock.Now()
}

func (c tracedClock) NewTimer(d time.Duration) driver.Timer {
	c.rec.here()
	return c.Clock.NewTimer(d)
}

func (c tracedClock) AfterFunc(d time.Duration, f func()) driver.Timer {
	c.rec.here()
	return c.Clock.AfterFunc(d, f)
}
