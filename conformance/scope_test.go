package conformance

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// strategyNames lists the strategies' names, for comparing configurations.
func strategyNames(s []Strategy) []string {
	out := make([]string, len(s))
	for i, x := range s {
		out[i] = x.Name
	}
	return out
}

// TestScope pins down the documented scopes: one point of the matrix and
// the short forms by default, the whole matrix with WithFullMatrix, and
// both the whole matrix and the long forms under QUORUMLOCK_LONG=1, with
// Run's options applied over it.
func TestScope(t *testing.T) {
	all := strategyNames(Strategies())
	cases := []struct {
		name       string
		env        string
		opts       []RunOption
		strategies []string
		sizes      []int
		increments int
		fencing    int
	}{
		{"driver", "", nil, []string{"parallel"}, []int{3}, 50, 500},
		{"driver ignores the matrix's shape", "", []RunOption{WithSizes(1, 3)}, []string{"parallel"}, []int{3}, 50, 500},
		{"full", "", []RunOption{WithFullMatrix()}, all, []int{1, 3, 5}, 50, 500},
		{"full, shaped", "", []RunOption{WithFullMatrix(), WithSizes(1, 3), WithStrategies(Strategies()[0])}, all[:1], []int{1, 3}, 50, 500},
		{"long", "1", nil, all, []int{1, 3, 5}, 200, 2000},
		{"long, options over it", "true", []RunOption{WithSizes(1, 3), WithIncrements(7)}, all, []int{1, 3}, 7, 2000},
		{"long off", "0", nil, []string{"parallel"}, []int{3}, 50, 500},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv(LongEnv, c.env)
			cfg := newConfig(t, c.opts)
			assert.Equal(t, c.strategies, strategyNames(cfg.strategies))
			assert.Equal(t, c.sizes, cfg.sizes)
			assert.Equal(t, []int{c.increments, c.fencing}, []int{cfg.increments, cfg.fencing})
		})
	}
}
