package core_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHelpersHoldNoLocker keeps the keeper, the hub and node health on
// what New gives them: none of them, nor a struct it embeds, has a field
// of type *Locker to reach into its options, nodes and other helpers.
func TestHelpersHoldNoLocker(t *testing.T) {
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	types := make(map[string]*ast.StructType)
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		require.NoError(t, err)
		ast.Inspect(file, func(n ast.Node) bool {
			if ts, ok := n.(*ast.TypeSpec); ok {
				if st, ok := ts.Type.(*ast.StructType); ok {
					types[ts.Name.Name] = st
				}
			}
			return true
		})
	}
	for _, name := range []string{"keeper", "hub", "health"} {
		require.Contains(t, types, name, "no struct type %s in core", name)
		assert.Empty(t, lockerFields(types, name), "%s holds the Locker", name)
	}
}

// lockerFields returns the fields of type *Locker of struct name and the
// structs it embeds.
func lockerFields(types map[string]*ast.StructType, name string) []string {
	var out []string
	for _, f := range types[name].Fields.List {
		if star, ok := f.Type.(*ast.StarExpr); ok {
			if id, ok := star.X.(*ast.Ident); ok && id.Name == "Locker" {
				out = append(out, name+"."+fieldName(f))
			}
		}
		if id, ok := f.Type.(*ast.Ident); ok && len(f.Names) == 0 && types[id.Name] != nil {
			out = append(out, lockerFields(types, id.Name)...)
		}
	}
	return out
}

func fieldName(f *ast.Field) string {
	if len(f.Names) == 0 {
		return "(embedded)"
	}
	return f.Names[0].Name
}
