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

// readmeTable is a table of the documentation (a page under docs/, which
// the README links to) whose last column names the tests behind each row
// (TestX, or TestX/sub for the subtest t.Run("sub", ...) of TestX).
type readmeTable struct {
	file    string // the page, from the repository's root, such as "docs/errors.md"
	section string // the heading of its section, such as "## Bad input and the errors it gets"
	header  string // the start of its header row, such as "| misuse |"
	cells   int    // cells in a row
	prefix  string // every subtest of a test function so named must be named by a row
}

// check reads the table from its page and checks that every row names a
// test, that every test named exists in a _test.go file of the
// repository, and that every subtest of a prefix... function is named; it
// returns the rows' cells.
func (rt readmeTable) check(t *testing.T) [][]string {
	t.Helper()
	page, err := os.ReadFile(filepath.Join("..", filepath.FromSlash(rt.file)))
	require.NoError(t, err)
	rows := rt.rows(t, string(page))
	tests := repositoryTests(t, "..")
	listed := make(map[string]bool)
	for _, row := range rows {
		for _, name := range testNames(row[len(row)-1]) {
			listed[name] = true
			parent, sub, _ := strings.Cut(name, "/")
			subs, ok := tests[parent]
			if !assert.True(t, ok, "%s names %s, but no _test.go file has func %s", rt.file, name, parent) {
				continue
			}
			if sub != "" {
				assert.True(t, subs[sub], "%s names %s, but %s has no subtest %q", rt.file, name, parent, sub)
			}
		}
	}
	for parent, subs := range tests {
		if !strings.HasPrefix(parent, rt.prefix) {
			continue
		}
		assert.True(t, slices.ContainsFunc(slices.Collect(maps.Keys(listed)), func(n string) bool { return strings.HasPrefix(n, parent+"/") }),
			"%s is not named in the table %q of %s", parent, rt.section, rt.file)
		for sub, direct := range subs {
			if direct {
				assert.True(t, listed[parent+"/"+sub], "%s/%s is not named in the table %q of %s", parent, sub, rt.section, rt.file)
			}
		}
	}
	return rows
}

// rows returns the cells of the table's rows, each naming a test: the
// rows of the section's tables (its subsections' included) whose header
// starts with rt.header.
func (rt readmeTable) rows(t *testing.T, page string) [][]string {
	t.Helper()
	lines := strings.Split(page, "\n")
	start := slices.Index(lines, rt.section)
	require.GreaterOrEqual(t, start, 0, "%s has no section %q", rt.file, rt.section)
	level := headingLevel(rt.section)
	require.Positive(t, level, "the section %q is not a heading", rt.section)
	var rows [][]string
	var fenced, inTable bool
	for _, line := range lines[start+1:] {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
		}
		if fenced {
			continue
		}
		if l := headingLevel(line); l > 0 && l <= level {
			break // the next section
		}
		switch {
		case !strings.HasPrefix(line, "|"):
			inTable = false
			continue
		case strings.HasPrefix(line, rt.header):
			inTable = true
			continue
		case strings.Trim(line, "|-: ") == "", !inTable:
			continue // the header's underline, or a row of another table
		}
		cells := strings.Split(strings.Trim(line, "| "), " | ")
		require.Len(t, cells, rt.cells, "a row of %d cells: %s", rt.cells, line)
		require.NotEmpty(t, testNames(cells[len(cells)-1]), "a row without a test: %s", line)
		rows = append(rows, cells)
	}
	return rows
}

// headingLevel is the level of a Markdown heading line ("## Errors" is 2),
// or 0 for any other line.
func headingLevel(line string) int {
	level := len(line) - len(strings.TrimLeft(line, "#"))
	if level == 0 || level > 6 || !strings.HasPrefix(line[level:], " ") {
		return 0
	}
	return level
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
