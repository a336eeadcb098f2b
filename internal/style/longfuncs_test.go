package style

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// maxFuncLines is the longest a function may be, counted from its func
// line to its closing brace, both included.
const maxFuncLines = 60

// top is the checkout's top directory (the root module's), relative to
// this package.
const top = "../.."

// TestNoLongFunctions fails, naming each, on every function or method of
// the checkout longer than maxFuncLines: every module (the nested ones
// too: backends, cmd, examples, benchmarks, ...), outside _test.go files,
// testdata and dot-directories. A long function wants splitting into
// functions that each do one thing.
func TestNoLongFunctions(t *testing.T) {
	mod, err := os.ReadFile(filepath.Join(top, "go.mod"))
	require.NoError(t, err)
	require.Contains(t, string(mod), "module github.com/quorumlock/quorumlock\n", "top is not the checkout's top")

	long, files := longFunctions(t, top)
	require.NotZero(t, files, "no Go file found under %s", top)
	for _, f := range long {
		t.Errorf("%s: %s is %d lines, more than %d: split it", f.pos, f.name, f.lines, maxFuncLines)
	}
}

// longFunc is a function over maxFuncLines.
type longFunc struct {
	pos   string // path:line of its func keyword, from the top
	name  string // Name, or (Recv).Name for a method
	lines int
}

// longFunctions parses every non-test Go file under root and returns its
// functions over maxFuncLines, and how many files it parsed.
func longFunctions(t *testing.T, root string) (long []longFunc, files int) {
	t.Helper()
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files++
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			// Pos is the func keyword (a doc comment is not part of the
			// function), End just after the closing brace.
			from, to := fset.Position(fd.Pos()), fset.Position(fd.End())
			if n := to.Line - from.Line + 1; n > maxFuncLines {
				long = append(long, longFunc{pos: fmt.Sprintf("%s:%d", rel, from.Line), name: funcName(fd), lines: n})
			}
		}
		return nil
	})
	require.NoError(t, err)
	return long, files
}

// funcName is fd's name, with its receiver's type for a method.
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	recv := fd.Recv.List[0].Type
	if star, ok := recv.(*ast.StarExpr); ok {
		recv = star.X
	}
	switch r := recv.(type) {
	case *ast.IndexExpr: // a generic type's method: T[K]
		recv = r.X
	case *ast.IndexListExpr: // T[K, V]
		recv = r.X
	}
	if id, ok := recv.(*ast.Ident); ok {
		return "(" + id.Name + ")." + fd.Name.Name
	}
	return fd.Name.Name
}
