// Command slowest prints where a test run's time went, from the
// `go test -json` records in a directory (make unit writes one file per
// module in .testjson/): the costliest top-level tests, and the costliest
// leaf tests (those without subtests of their own), each with its time
// and package. A parallel subtest's time excludes its wait for the other
// tests, so leaves say which checks to make cheaper.
//
// Usage: slowest [-n 10] [-trim prefix] DIR
//
// A directory with no records prints a line saying so and is no error:
// make test prints this after every run, also one that failed before its
// tests ran.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// result is one test's outcome.
type result struct {
	pkg, test string
	seconds   float64
	action    string // pass, fail or skip
}

func main() {
	n := flag.Int("n", 10, "how many tests of each kind to print")
	trim := flag.String("trim", "github.com/quorumlock/quorumlock/", "prefix to cut from package paths")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: slowest [-n 10] [-trim prefix] DIR")
		os.Exit(2)
	}
	results, err := readDir(flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, "slowest:", err)
		os.Exit(1)
	}
	if len(results) == 0 {
		fmt.Printf("== no test records in %s\n", flag.Arg(0))
		return
	}
	top, leaves := split(results)
	report("the costliest top-level tests", top, *n, *trim)
	report("the costliest leaf tests", leaves, *n, *trim)
}

// readDir reads every *.json file of dir.
func readDir(dir string) ([]result, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	var all []result
	for _, f := range files {
		rs, err := readFile(f)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		all = append(all, rs...)
	}
	return all, nil
}

// readFile reads the ends of the tests recorded in one `go test -json`
// file; lines that are not test events (a build failure's text) are
// skipped.
func readFile(path string) ([]result, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []result
	r := bufio.NewReader(f)
	for {
		line, err := r.ReadBytes('\n')
		var ev struct {
			Action, Package, Test string
			Elapsed               float64
		}
		if json.Unmarshal(line, &ev) == nil && ev.Test != "" {
			switch ev.Action {
			case "pass", "fail", "skip":
				out = append(out, result{pkg: ev.Package, test: ev.Test, seconds: ev.Elapsed, action: ev.Action})
			}
		}
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// split sorts the results, costliest first, into top-level tests and
// leaves; a top-level test without subtests is both.
func split(results []result) (top, leaves []result) {
	parents := map[string]bool{}
	for _, r := range results {
		for i, c := range r.test {
			if c == '/' {
				parents[r.pkg+" "+r.test[:i]] = true
			}
		}
	}
	for _, r := range results {
		if !strings.Contains(r.test, "/") {
			top = append(top, r)
		}
		if !parents[r.pkg+" "+r.test] {
			leaves = append(leaves, r)
		}
	}
	for _, s := range [][]result{top, leaves} {
		sort.SliceStable(s, func(i, j int) bool { return s[i].seconds > s[j].seconds })
	}
	return top, leaves
}

// report prints the first n of rs under title.
func report(title string, rs []result, n int, trim string) {
	fmt.Printf("== %s\n", title)
	for _, r := range rs[:min(n, len(rs))] {
		mark := ""
		if r.action != "pass" {
			mark = " (" + r.action + ")"
		}
		fmt.Printf("%8.1fs  %s  %s%s\n", r.seconds, strings.TrimPrefix(r.pkg, trim), r.test, mark)
	}
}
