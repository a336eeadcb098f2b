package core_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// topologyTable is the table of client types of docs/topologies.md, which
// the README links to.
var topologyTable = readmeTable{file: "docs/topologies.md", section: "## Client types", header: "| client |", cells: 4, prefix: "TestTopology"}

// TestReadmeTopologyTable keeps the table of topologies and client types
// (docs/topologies.md) and its tests together, as TestReadmeBadInputTable keeps
// the table of bad input; and every row of a refused client type must
// name a TestTopology... test.
func TestReadmeTopologyTable(t *testing.T) {
	rows := topologyTable.check(t)
	require.GreaterOrEqual(t, len(rows), 12, "the table's rows were not all found")
	for _, row := range rows {
		if strings.HasPrefix(row[1], "refused") {
			assert.True(t, slices.ContainsFunc(testNames(row[3]), func(n string) bool { return strings.HasPrefix(n, "TestTopology") }),
				"the row of a refused client names no TestTopology... test: %s", row[0])
		}
	}
}
