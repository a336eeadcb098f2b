package core_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// readmeTable is a table of the README whose last column names the tests
// behind each row (TestX, or TestX/sub for the subtest t.Run("sub", ...)
// of TestX).
type readmeTable struct {
	section string // the heading of its section
	header  string // the start of its header row, such as "| misuse |"
	cells   int    // cells in a row
	prefix  string // every subtest of a test function so named must be named by a row
}

// check reads the table from the README and checks that every row names
// a test, that every test named exists in a _test.go file of the
// repository, and that every subtest of a prefix... function is named; it
// returns the rows' cells.
func (rt readmeTable) check(t *testing.T) [][]string {
	t.Helper()
	readme, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	rows := rt.rows(t, string(readme))
	tests := repositoryTests(t, "..")
	listed := make(map[string]bool)
	for _, row := range rows {
		for _, name := range testNames(row[len(row)-1]) {
			listed[name] = true
			parent, sub, _ := strings.Cut(name, "/")
			subs, ok := tests[parent]
			if !assert.True(t, ok, "the README names %s, but no _test.go file has func %s", name, parent) {
				continue
			}
			if sub != "" {
				assert.True(t, subs[sub], "the README names %s, but %s has no subtest %q", name, parent, sub)
			}
		}
	}
	for parent, subs := range tests {
		if !strings.HasPrefix(parent, rt.prefix) {
			continue
		}
		assert.True(t, slices.ContainsFunc(slices.Collect(maps.Keys(listed)), func(n string) bool { return strings.HasPrefix(n, parent+"/") }),
			"%s is not named in the README's table %q", parent, rt.section)
		for sub, direct := range subs {
			if direct {
				assert.True(t, listed[parent+"/"+sub], "%s/%s is not named in the README's table %q", parent, sub, rt.section)
			}
		}
	}
	return rows
}

// rows returns the cells of the table's rows, each naming a test.
func (rt readmeTable) rows(t *testing.T, readme string) [][]string {
	t.Helper()
	start := strings.Index(readme, "\n"+rt.section+"\n")
	require.GreaterOrEqual(t, start, 0, "the README has no section %q", rt.section)
	section := readme[start+len(rt.section)+2:]
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	var rows [][]string
	for line := range strings.SplitSeq(section, "\n") {
		if !strings.HasPrefix(line, "| ") || strings.HasPrefix(line, rt.header) {
			continue
		}
		cells := strings.Split(strings.Trim(line, "| "), " | ")
		require.Len(t, cells, rt.cells, "a row of %d cells: %s", rt.cells, line)
		require.NotEmpty(t, testNames(cells[len(cells)-1]), "a row without a test: %s", line)
		rows = append(rows, cells)
	}
	return rows
}

var testName = regexp.MustCompile("`(Test[A-Za-z0-9_]+(?:/[^`]+)?)`")

// testNames returns the test names in a cell.
func testNames(cell string) []string {
	var names []string
	for _, m := range testName.FindAllStringSubmatch(cell, -1) {
		names = append(names, m[1])
	}
	return names
}

// repositoryTests returns the test functions of the _test.go files under
// root, each with the string literals of its body: true for the names of
// its direct subtests (t.Run("name", ...) on its own *testing.T), false
// for any other literal (a subtest named in a table of cases).
func repositoryTests(t *testing.T, root string) map[string]map[string]bool {
	t.Helper()
	tests := make(map[string]map[string]bool)
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
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || fn.Body == nil || !strings.HasPrefix(fn.Name.Name, "Test") {
				continue
			}
			subs := tests[fn.Name.Name]
			if subs == nil {
				subs = make(map[string]bool)
				tests[fn.Name.Name] = subs
			}
			collectSubtests(fn, subs)
		}
		return nil
	})
	require.NoError(t, err)
	return tests
}

// collectSubtests adds to subs the string literals of fn's body, marking
// those that name its direct subtests.
func collectSubtests(fn *ast.FuncDecl, subs map[string]bool) {
	var tname string // fn's *testing.T parameter
	if params := fn.Type.Params.List; len(params) == 1 && len(params[0].Names) == 1 {
		tname = params[0].Names[0].Name
	}
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.CallExpr:
			sel, ok := n.Fun.(*ast.SelectorExpr)
			if !ok || sel.Sel.Name != "Run" || len(n.Args) != 2 {
				return true
			}
			recv, ok := sel.X.(*ast.Ident)
			lit, isLit := n.Args[0].(*ast.BasicLit)
			if ok && recv.Name == tname && isLit && lit.Kind == token.STRING {
				if s, err := strconv.Unquote(lit.Value); err == nil {
					subs[s] = true
				}
			}
		case *ast.BasicLit:
			if n.Kind == token.STRING {
				if s, err := strconv.Unquote(n.Value); err == nil && !subs[s] {
					subs[s] = false
				}
			}
		}
		return true
	})
}
