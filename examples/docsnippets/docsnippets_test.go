// Package docsnippets holds the test that compiles every Go block of the
// README and of docs/*.md, so that what a newcomer copies compiles.
//
// How a ```go block is checked:
//
//   - A whole program (it starts with a package clause) compiles as it is.
//   - A fragment of declarations (it parses as a file's body) compiles at a
//     package's top level; a fragment of statements compiles as the body of
//     a func returning error (so `return err` is fine). A leading import
//     declaration stays at the top of the file.
//   - A fragment's imports come from the packages it names (`core.New`
//     imports core): see packages. The variables the prose assumes (ctx,
//     locker, nodes, ...) are declared at package level with their types:
//     see placeholders. A statement fragment's own variables are used once
//     after it, so that one showing `node, err := goredis.New(rdb)` and no
//     more compiles.
//   - A block that is not meant to compile (a template naming packages of
//     your own) is marked by the line just before its fence:
//     <!-- snippet: skip REASON -->. Pseudo-code is fenced ```text.
//
// The blocks compile in one `go build` of a scratch module in a scratch
// workspace that uses the checkout's modules (the top go.work's), so that
// every module of the library and its requirements resolve (middleware/metrics
// brings Prometheus, fxmodule brings fx), as they do for `go run` from the
// top. A few seconds with a warm build cache. Each
// generated file carries //line directives: the compiler's messages name the
// Markdown file and line.
package docsnippets

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// top is the checkout's top directory, relative to this package.
const top = "../.."

// packages maps the package names that fragments use to their import paths.
var packages = map[string]string{
	"context":    "context",
	"errors":     "errors",
	"fmt":        "fmt",
	"http":       "net/http",
	"log":        "log",
	"os":         "os",
	"slog":       "log/slog",
	"time":       "time",
	"core":       "github.com/quorumlock/quorumlock/core",
	"strategies": "github.com/quorumlock/quorumlock/strategies",
	"memory":     "github.com/quorumlock/quorumlock/backends/memory",
	"goredis":    "github.com/quorumlock/quorumlock/backends/goredis",
	"redigo":     "github.com/quorumlock/quorumlock/backends/redigo",
	"qlrueidis":  "github.com/quorumlock/quorumlock/backends/rueidis",
	"qlvalkey":   "github.com/quorumlock/quorumlock/backends/valkey",
	"httplock":   "github.com/quorumlock/quorumlock/middleware/httplock",
	"logging":    "github.com/quorumlock/quorumlock/middleware/logging",
	"metrics":    "github.com/quorumlock/quorumlock/middleware/metrics",
	"tracing":    "github.com/quorumlock/quorumlock/middleware/tracing",
	"fxmodule":   "github.com/quorumlock/quorumlock/fxmodule",
	"fx":         "go.uber.org/fx",
	"redis":      "github.com/redis/go-redis/v9",
	"rueidis":    "github.com/redis/rueidis",
	"valkey":     "github.com/valkey-io/valkey-go",
	"prometheus": "github.com/prometheus/client_golang/prometheus",
}

// placeholders are the variables the prose assumes, with their types.
var placeholders = map[string]string{
	"ctx":      "context.Context",
	"locker":   "*core.Locker",
	"lock":     "*core.Lock",
	"nodes":    "[]core.Node",
	"addrs":    "[]string",
	"process":  "func(context.Context) error",
	"mux":      "*http.ServeMux",
	"withdraw": "http.Handler",
}

// snippet is one ```go block: the Markdown file (relative to the top), the
// line of its opening fence, its text, and why it is skipped, if it is.
type snippet struct {
	file string
	line int
	text string
	skip string
}

func (s snippet) String() string { return fmt.Sprintf("%s:%d", s.file, s.line) }

// closing is the line of the block's closing fence.
func (s snippet) closing() int { return s.line + strings.Count(s.text, "\n") + 1 }

var skipMarker = regexp.MustCompile(`^<!-- snippet: skip (.+) -->$`)

// readSnippets returns the ```go blocks of the Markdown file at rel.
func readSnippets(t *testing.T, rel string) []snippet {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(top, rel))
	require.NoError(t, err)
	var out []snippet
	var cur *snippet
	prev := ""
	for i, line := range strings.Split(string(data), "\n") {
		switch {
		case cur == nil && strings.TrimSpace(line) == "```go":
			cur = &snippet{file: rel, line: i + 1}
			if m := skipMarker.FindStringSubmatch(strings.TrimSpace(prev)); m != nil {
				cur.skip = m[1]
			}
		case cur != nil && strings.TrimSpace(line) == "```":
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.text += line + "\n"
		}
		if strings.TrimSpace(line) != "" {
			prev = line
		}
	}
	if cur != nil {
		require.Failf(t, "a block is not closed", "%s: the ```go block at line %d is not closed", rel, cur.line)
	}
	return out
}

func allSnippets(t *testing.T) []snippet {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(top, "docs", "*.md"))
	require.NoError(t, err)
	files := []string{"README.md"}
	for _, d := range docs {
		files = append(files, filepath.ToSlash(strings.TrimPrefix(d, top+string(filepath.Separator))))
	}
	var all []snippet
	for _, f := range files {
		all = append(all, readSnippets(t, f)...)
	}
	return all
}

// splitImports splits a fragment into its leading import declaration, if
// any, and the rest.
func splitImports(text string) (imports, rest string) {
	lines := strings.SplitAfter(text, "\n")
	i := 0
	for i < len(lines) && strings.TrimSpace(lines[i]) == "" {
		i++
	}
	if i == len(lines) || !strings.HasPrefix(lines[i], "import") {
		return "", text
	}
	end := i
	if strings.Contains(lines[i], "(") {
		for end < len(lines) && strings.TrimSpace(lines[end]) != ")" {
			end++
		}
	}
	end++
	return strings.Join(lines[:end], ""), strings.Join(lines[end:], "")
}

var packageClause = regexp.MustCompile(`(?m)^package \w+`)

// generate returns the Go file that checks s as package name, or an error
// naming the Markdown line when the block does not parse.
func generate(s snippet, name string) (string, error) {
	if packageClause.MatchString(s.text) {
		return s.directive(s.line+1) + s.text, nil
	}
	fr := fragment{snippet: s, pkg: name}
	fr.imports, fr.body = splitImports(s.text)
	_, err := parser.ParseFile(token.NewFileSet(), "", "package p\n"+s.text, parser.SkipObjectResolution)
	fr.decls = err == nil
	// Parse the bare fragment to see what it names and defines.
	f, err := parser.ParseFile(token.NewFileSet(), "snippet.go", fr.file(), parser.SkipObjectResolution)
	if err != nil {
		return "", err
	}
	named, defined, uses := analyse(f)
	for _, v := range slices.Sorted(maps.Keys(placeholders)) {
		if named[v] && !defined[v] {
			fr.vars = append(fr.vars, fmt.Sprintf("var %s %s\n", v, placeholders[v]))
			for _, p := range qualifier.FindAllStringSubmatch(placeholders[v], -1) {
				named[p[1]] = true
			}
		}
	}
	imported := importedNames(f)
	for _, n := range slices.Sorted(maps.Keys(named)) {
		if p, ok := packages[n]; ok && !imported[n] && !defined[n] {
			fr.extra = append(fr.extra, fmt.Sprintf("\t%s %q\n", n, p))
		}
	}
	if !fr.decls {
		fr.uses = uses
	}
	return fr.file(), nil
}

var qualifier = regexp.MustCompile(`(\w+)\.`)

func (s snippet) directive(line int) string { return fmt.Sprintf("//line %s:%d\n", s.file, line) }

// fragment is a block without a package clause, and what its file adds to
// it: imports, the variables it uses once, and placeholder declarations.
type fragment struct {
	snippet
	pkg           string
	imports, body string // the block's leading import declaration, and the rest
	decls         bool   // the block is declarations, not statements
	extra         []string
	uses          []string
	vars          []string
}

// file is the Go file that checks the fragment.
func (fr fragment) file() string {
	var b strings.Builder
	fmt.Fprintf(&b, "package %s\n\n", fr.pkg)
	if len(fr.extra) > 0 {
		fmt.Fprintf(&b, "import (\n%s)\n\n", strings.Join(fr.extra, ""))
	}
	if fr.decls {
		b.WriteString(fr.directive(fr.line+1) + fr.text)
	} else {
		b.WriteString(fr.directive(fr.line+1) + fr.imports)
		bodyLine := fr.line + 1 + strings.Count(fr.imports, "\n")
		b.WriteString("\nfunc _() error {\n" + fr.directive(bodyLine) + fr.body)
		b.WriteString(fr.directive(fr.closing()))
		for _, u := range fr.uses {
			fmt.Fprintf(&b, "\t_ = %s\n", u)
		}
		b.WriteString("\treturn nil\n}\n")
	}
	b.WriteString(strings.Join(fr.vars, ""))
	return b.String()
}

// importedNames returns the names under which f's own imports are known.
func importedNames(f *ast.File) map[string]bool {
	imported := map[string]bool{}
	for _, spec := range f.Imports {
		p, _ := strconv.Unquote(spec.Path.Value)
		n := path.Base(p)
		for k, v := range packages {
			if v == p {
				n = k
			}
		}
		if spec.Name != nil {
			n = spec.Name.Name
		}
		imported[n] = true
	}
	return imported
}

// analyse returns the identifiers f names anywhere, the names it defines
// (top-level declarations, and the variables its func _'s body defines at its
// top level), and those body variables in order.
func analyse(f *ast.File) (named, defined map[string]bool, uses []string) {
	named, defined = map[string]bool{}, map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		if id, ok := n.(*ast.Ident); ok {
			named[id.Name] = true
		}
		return true
	})
	define := func(id *ast.Ident, local bool) {
		if id.Name == "_" || defined[id.Name] {
			return
		}
		defined[id.Name] = true
		if local {
			uses = append(uses, id.Name)
		}
	}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Name.Name != "_" {
				define(d.Name, false)
				continue
			}
			for _, st := range d.Body.List {
				switch st := st.(type) {
				case *ast.AssignStmt:
					if st.Tok == token.DEFINE {
						for _, e := range st.Lhs {
							if id, ok := e.(*ast.Ident); ok {
								define(id, true)
							}
						}
					}
				case *ast.DeclStmt:
					genNames(st.Decl.(*ast.GenDecl), func(id *ast.Ident) { define(id, true) })
				}
			}
		case *ast.GenDecl:
			genNames(d, func(id *ast.Ident) { define(id, false) })
		}
	}
	return named, defined, uses
}

func genNames(d *ast.GenDecl, f func(*ast.Ident)) {
	for _, spec := range d.Specs {
		switch spec := spec.(type) {
		case *ast.ValueSpec:
			for _, id := range spec.Names {
				f(id)
			}
		case *ast.TypeSpec:
			f(spec.Name)
		}
	}
}

// workspace writes, in dir, a go.work that uses the checkout's modules (those
// of its go.work) and the scratch module at dir/snippets.
func workspace(t *testing.T, goTool, dir string) {
	t.Helper()
	abs, err := filepath.Abs(top)
	require.NoError(t, err)
	out, err := exec.Command(goTool, "work", "edit", "-json", filepath.Join(abs, "go.work")).Output()
	require.NoError(t, err, "go work edit -json")
	var work struct {
		Go  string
		Use []struct{ DiskPath string }
	}
	require.NoError(t, json.Unmarshal(out, &work))
	var b strings.Builder
	fmt.Fprintf(&b, "go %s\n\nuse (\n\t./snippets\n", work.Go)
	for _, u := range work.Use {
		fmt.Fprintf(&b, "\t%s\n", filepath.Join(abs, u.DiskPath))
	}
	b.WriteString(")\n")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.work"), []byte(b.String()), 0o600))
	if sum, err := os.ReadFile(filepath.Join(abs, "go.work.sum")); err == nil {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "go.work.sum"), sum, 0o600))
	}
	mod := fmt.Sprintf("module snippets\n\ngo %s\n", work.Go)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "snippets", "go.mod"), []byte(mod), 0o600))
}

// message matches a compiler message that names a Markdown line.
var message = regexp.MustCompile(`^(\S+\.md):(\d+):(?:\d+:)? (.*)$`)

// TestDocSnippetsCompile compiles every ```go block of README.md and
// docs/*.md, and fails with the block's file, the line of its fence and the
// compiler's messages for each block that does not compile.
func TestDocSnippetsCompile(t *testing.T) {
	goTool, err := exec.LookPath("go")
	require.NoError(t, err, "the go command compiles the blocks")
	all := allSnippets(t)
	require.NotEmpty(t, all)

	dir := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(dir, "snippets"), 0o700))
	workspace(t, goTool, dir)
	checked := writeSnippets(t, filepath.Join(dir, "snippets"), all)
	skipped := len(slices.DeleteFunc(slices.Clone(all), func(s snippet) bool { return s.skip == "" }))
	t.Logf("%d ```go blocks compiled, %d skipped by a marker", len(checked), skipped)
	if len(checked) == 0 {
		return
	}

	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goTool, "build", "-gcflags=-e", "./...")
	cmd.Dir = filepath.Join(dir, "snippets")
	cmd.Env = append(os.Environ(), "GOWORK="+filepath.Join(dir, "go.work"), "GOFLAGS=-mod=readonly")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if cmd.Run() == nil {
		return
	}
	messages, other := attribute(out.String(), checked)
	if len(other) > 0 || len(messages) == 0 {
		t.Errorf("go build failed, naming no block's line (a generated import or declaration?):\n%s", out.String())
	}
	for i, s := range checked {
		if len(messages[i]) > 0 {
			t.Errorf("%s: the ```go block does not compile:\n\t%s", s, strings.Join(messages[i], "\n\t"))
		}
	}
}

// writeSnippets writes each block not skipped as a package of the module at
// dir and returns them; a block that does not parse fails the test.
func writeSnippets(t *testing.T, dir string, all []snippet) []snippet {
	t.Helper()
	var checked []snippet
	for _, s := range all {
		if s.skip != "" {
			continue
		}
		name := fmt.Sprintf("s%02d", len(checked))
		src, err := generate(s, name)
		if err != nil {
			t.Errorf("%s: the ```go block does not parse:\n%v", s, err)
			continue
		}
		pkg := filepath.Join(dir, name)
		require.NoError(t, os.Mkdir(pkg, 0o700))
		require.NoError(t, os.WriteFile(filepath.Join(pkg, "snippet.go"), []byte(src), 0o600))
		checked = append(checked, s)
	}
	return checked
}

// attribute gives each compiler message of out to the block whose lines
// hold it (by index in checked), a message's continuation lines (indented by
// a tab) with it, and returns the lines it could give to none.
func attribute(out string, checked []snippet) (messages map[int][]string, other []string) {
	messages = map[int][]string{}
	last := -1
	for _, text := range strings.Split(out, "\n") {
		if last >= 0 && strings.HasPrefix(text, "\t") {
			messages[last] = append(messages[last], text)
			continue
		}
		last = -1
		if m := message.FindStringSubmatch(text); m != nil {
			line, _ := strconv.Atoi(m[2])
			last = slices.IndexFunc(checked, func(s snippet) bool {
				return s.file == m[1] && s.line <= line && line <= s.closing()
			})
			if last >= 0 {
				messages[last] = append(messages[last], fmt.Sprintf("%s:%s: %s", m[1], m[2], m[3]))
				continue
			}
		}
		if text != "" && !strings.HasPrefix(text, "# ") {
			other = append(other, text)
		}
	}
	return messages, other
}
