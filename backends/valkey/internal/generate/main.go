// Command generate writes backends/valkey's Go files from backends/rueidis's:
// valkey-go is rueidis's fork, so the node over it is rueidis's node,
// renamed (see rename). Every Go file of backends/rueidis but doc.go and
// the tests becomes the file of the same name in the output directory.
//
// Run it from backends/valkey with go generate; TestGeneratedFromRueidis
// fails, with the diff, when the files there are out of step.
//
//	go run ./internal/generate [-from ../rueidis] [-out .]
package main

import (
	"flag"
	"fmt"
	"go/format"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// Header starts every generated file.
const header = "// Code generated from backends/rueidis by internal/generate (go generate); DO NOT EDIT.\n\n"

func main() {
	from := flag.String("from", "../rueidis", "the directory of backends/rueidis")
	out := flag.String("out", ".", "the directory to write the files to")
	flag.Parse()
	if err := generate(*from, *out); err != nil {
		fmt.Fprintln(os.Stderr, "generate:", err)
		os.Exit(1)
	}
}

// generate writes the renamed Go files of from to out.
func generate(from, out string) error {
	names, err := filepath.Glob(filepath.Join(from, "*.go"))
	if err != nil {
		return err
	}
	for _, path := range names {
		base := filepath.Base(path)
		if base == "doc.go" || strings.HasSuffix(base, "_test.go") {
			continue
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		code, err := format.Source([]byte(header + rename(string(src))))
		if err != nil {
			return fmt.Errorf("%s: %w", base, err)
		}
		if err := os.WriteFile(filepath.Join(out, base), code, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// identifiers matches the identifiers where valkey-go says "Valkey" and
// rueidis "Redis": RedisResult, IsRedisErr, IsRedisNil and the like.
var identifiers = regexp.MustCompile(`\b(Is)?Redis(Result|Err|Error|Nil|Message)\b`)

// rename turns rueidis's source into valkey-go's: its import path, its
// package name (and every other "rueidis", in errors and comments), and
// the identifiers.
func rename(src string) string {
	const path = "\x00path\x00"
	src = strings.ReplaceAll(src, `"github.com/redis/rueidis"`, path)
	src = identifiers.ReplaceAllString(src, "${1}Valkey${2}")
	src = strings.ReplaceAll(src, "rueidis", "valkey")
	return strings.ReplaceAll(src, path, `"github.com/valkey-io/valkey-go"`)
}
