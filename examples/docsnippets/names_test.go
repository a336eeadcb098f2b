package docsnippets

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// libraryDirs maps the names under which the prose cites the library's
// packages to their directories in the checkout. The backends for rueidis
// and valkey are cited as qlrueidis and qlvalkey: plain rueidis.X and
// valkey.X name the drivers' own packages.
var libraryDirs = map[string]string{
	"core":        "core",
	"driver":      "core/driver",
	"strategies":  "strategies",
	"memory":      "backends/memory",
	"goredis":     "backends/goredis",
	"redigo":      "backends/redigo",
	"qlrueidis":   "backends/rueidis",
	"qlvalkey":    "backends/valkey",
	"httplock":    "middleware/httplock",
	"logging":     "middleware/logging",
	"metrics":     "middleware/metrics",
	"tracing":     "middleware/tracing",
	"fxmodule":    "fxmodule",
	"conformance": "conformance",
	"redistest":   "conformance/redistest",
}

// exported returns the exported top-level names of the package in dir (its
// files other than tests).
func exported(t *testing.T, dir string) map[string]bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(top, dir, "*.go"))
	require.NoError(t, err)
	names := map[string]bool{}
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.SkipObjectResolution)
		require.NoError(t, err)
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil {
					names[d.Name.Name] = true
				}
			case *ast.GenDecl:
				genNames(d, func(id *ast.Ident) { names[id.Name] = true })
			}
		}
	}
	require.NotEmpty(t, names, "%s has no exported names: does libraryDirs still match the checkout?", dir)
	return names
}

// inlineName matches a package-qualified exported name, as in `core.New(nodes)`.
var inlineName = regexp.MustCompile(`\b([a-z]\w*)\.([A-Z]\w*)`)

// TestDocNamesExist checks that every name of the library that the prose of
// README.md and docs/*.md cites in code spans (`core.WithTTL`, outside the
// ```go blocks, which TestDocSnippetsCompile compiles) exists: a newcomer
// who types what a page names must not meet "undefined: core.Strategy".
func TestDocNamesExist(t *testing.T) {
	names := map[string]map[string]bool{}
	for pkg, dir := range libraryDirs {
		names[pkg] = exported(t, dir)
	}
	docs, err := filepath.Glob(filepath.Join(top, "docs", "*.md"))
	require.NoError(t, err)
	cited := 0
	for _, file := range append([]string{filepath.Join(top, "README.md")}, docs...) {
		data, err := os.ReadFile(file)
		require.NoError(t, err)
		rel, err := filepath.Rel(top, file)
		require.NoError(t, err)
		fenced := false
		for i, line := range strings.Split(string(data), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "```") {
				fenced = !fenced
				continue
			}
			if fenced {
				continue
			}
			for _, span := range codeSpan.FindAllString(line, -1) {
				for _, m := range inlineName.FindAllStringSubmatch(span, -1) {
					if pkg, ok := names[m[1]]; ok {
						cited++
						assert.True(t, pkg[m[2]], "%s:%d: %s.%s does not exist (package %s)", filepath.ToSlash(rel), i+1, m[1], m[2], libraryDirs[m[1]])
					}
				}
			}
		}
	}
	t.Logf("%d names cited in code spans checked", cited)
}

// codeSpan matches a Markdown code span on one line.
var codeSpan = regexp.MustCompile("`[^`]+`")
