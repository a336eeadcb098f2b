// Package optiontest checks that a package's options have one shape: each
// exported With function of the package returns an option whose String
// shows the call as written, starting with the function's name.
package optiontest

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Check fails t unless opts, keyed by function name, holds an option made
// by each exported function whose name starts with "With" in the non-test
// Go files of dir (a package's directory, "." for the test's own), and
// nothing else; that each of those functions returns the package's Option
// (or DialOption); and that each option's String starts with its key and
// "(".
func Check(t testing.TB, dir string, opts map[string]fmt.Stringer) {
	t.Helper()
	want, err := withFuncs(dir)
	if err != nil {
		t.Fatalf("optiontest: %v", err)
	}
	if len(want) == 0 {
		t.Fatalf("optiontest: no With function in %s", dir)
	}
	for _, name := range want {
		o, ok := opts[name]
		if !ok {
			t.Errorf("%s is not in the table", name)
			continue
		}
		if s := o.String(); !strings.HasPrefix(s, name+"(") {
			t.Errorf("%s's option shows as %q, not as the call %s(...)", name, s, name)
		}
	}
	for name := range opts {
		if !slices.Contains(want, name) {
			t.Errorf("%s is in the table but is no exported With function of %s", name, dir)
		}
	}
}

// returnsOption reports whether fd's one result is a type of the package
// named Option or ending in Option (a Redis backend's DialOption).
func returnsOption(fd *ast.FuncDecl) bool {
	res := fd.Type.Results
	if res == nil || len(res.List) != 1 || len(res.List[0].Names) > 1 {
		return false
	}
	id, ok := res.List[0].Type.(*ast.Ident)
	return ok && strings.HasSuffix(id.Name, "Option")
}

// withFuncs returns the names of the exported functions (not methods) of
// dir's non-test Go files that start with "With", sorted; an error when
// one of them returns something else than an Option.
func withFuncs(dir string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	var names []string
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv != nil || !fd.Name.IsExported() || !strings.HasPrefix(fd.Name.Name, "With") {
				continue
			}
			if !returnsOption(fd) {
				return nil, fmt.Errorf("%s does not return the package's Option", fd.Name.Name)
			}
			names = append(names, fd.Name.Name)
		}
	}
	slices.Sort(names)
	return names, nil
}
