package core_test

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// topologySection is the heading of the README's table of topologies and
// client types.
const topologySection = "## Topologies and client types"

// TestReadmeTopologyTable keeps the README's table of topologies and
// client types and its tests together, as TestReadmeBadInputTable keeps
// the table of bad input: every test a row names (TestX, or TestX/sub for
// the subtest t.Run("sub", ...) of TestX) must exist in a _test.go file of
// the repository, every subtest of a TestTopology... function must be
// named by a row, and every row of a refused client type must name one.
func TestReadmeTopologyTable(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	rows := topologyRows(t, string(readme))
	require.GreaterOrEqual(t, len(rows), 12, "the table's rows were not all found")

	tests := repositoryTests(t, "..")
	var named []string
	for _, r := range rows {
		for _, name := range r.tests {
			named = append(named, name)
			parent, sub, _ := strings.Cut(name, "/")
			subs, ok := tests[parent]
			if !assert.True(t, ok, "the README names %s, but no _test.go file has func %s", name, parent) {
				continue
			}
			if sub != "" {
				assert.True(t, subs[sub], "the README names %s, but %s has no subtest %q", name, parent, sub)
			}
		}
		if strings.HasPrefix(r.verdict, "refused") {
			assert.True(t, slices.ContainsFunc(r.tests, func(n string) bool { return strings.HasPrefix(n, "TestTopology") }),
				"the row of a refused client names no TestTopology... test: %s", r.client)
		}
	}

	listed := make(map[string]bool, len(named))
	for _, name := range named {
		listed[name] = true
	}
	for parent, subs := range tests {
		if !strings.HasPrefix(parent, "TestTopology") {
			continue
		}
		assert.True(t, slices.ContainsFunc(named, func(n string) bool { return strings.HasPrefix(n, parent+"/") }),
			"%s is not named in the README's table of topologies", parent)
		for sub, direct := range subs {
			if direct {
				assert.True(t, listed[parent+"/"+sub], "%s/%s is not named in the README's table of topologies", parent, sub)
			}
		}
	}
}

// topologyRow is a row of the README's table of topologies and client
// types.
type topologyRow struct {
	client, verdict string
	tests           []string // the test names of its last column
}

// topologyRows returns the rows of the README section topologySection,
// each with one test name at least.
func topologyRows(t *testing.T, readme string) []topologyRow {
	t.Helper()
	start := strings.Index(readme, "\n"+topologySection+"\n")
	require.GreaterOrEqual(t, start, 0, "the README has no section %q", topologySection)
	section := readme[start+len(topologySection)+2:]
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	name := regexp.MustCompile("`(Test[A-Za-z0-9_]+(?:/[^`]+)?)`")
	var rows []topologyRow
	for line := range strings.SplitSeq(section, "\n") {
		if !strings.HasPrefix(line, "| ") || strings.HasPrefix(line, "| client |") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "| "), " | ")
		require.Len(t, cells, 4, "a row of four cells: %s", line)
		r := topologyRow{client: cells[0], verdict: strings.TrimPrefix(cells[1], "**not detected**: ")}
		for _, m := range name.FindAllStringSubmatch(cells[3], -1) {
			r.tests = append(r.tests, m[1])
		}
		require.NotEmpty(t, r.tests, "a row without a test: %s", line)
		rows = append(rows, r)
	}
	return rows
}
