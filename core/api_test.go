package core_test

import (
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// core's API fits on one screen: `go doc -short` lists at most 36 lines
// (a line per top-level declaration group and per type, and one per
// constant group, variable group and constructor of each type).
func TestAPIFitsOneScreen(t *testing.T) {
	names, err := filepath.Glob("*.go")
	require.NoError(t, err)
	fset := token.NewFileSet()
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments|parser.SkipObjectResolution)
		require.NoError(t, err)
		files = append(files, f)
	}
	p, err := doc.NewFromFiles(fset, files, "github.com/quorumlock/quorumlock/core")
	require.NoError(t, err)
	var lines []string
	for _, v := range append(p.Consts, p.Vars...) {
		lines = append(lines, strings.Join(v.Names, ","))
	}
	for _, f := range p.Funcs {
		lines = append(lines, f.Name)
	}
	for _, ty := range p.Types {
		lines = append(lines, ty.Name)
		for _, v := range append(ty.Consts, ty.Vars...) {
			lines = append(lines, "  "+strings.Join(v.Names, ","))
		}
		for _, f := range ty.Funcs {
			lines = append(lines, "  "+f.Name)
		}
	}
	require.LessOrEqual(t, len(lines), 36, "go doc -short ./core (35, and 1 for type Leader, leader election's one addition):\n%s", strings.Join(lines, "\n"))
}
