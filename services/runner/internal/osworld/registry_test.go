package osworld

import (
	"testing"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric"
)

// TestRegistriesDisjoint: no step, getter or metric name is in two family
// tables, where the later table would silently win.
func TestRegistriesDisjoint(t *testing.T) {
	check := func(kind string, tables []map[string]bool) {
		seen := map[string]int{}
		for i, tbl := range tables {
			for name := range tbl {
				if j, dup := seen[name]; dup {
					t.Errorf("%s %q is in tables %d and %d", kind, name, j, i)
				}
				seen[name] = i
			}
		}
	}
	check("step", names(stepTables))
	check("getter", names(getterTables))
	check("metric", names(metricTables))
}

func names[M ~map[string]V, V any](tables []M) []map[string]bool {
	var out []map[string]bool
	for _, t := range tables {
		m := map[string]bool{}
		for k := range t {
			m[k] = true
		}
		out = append(out, m)
	}
	return out
}

// TestMetricsHaveFunctions: every registered metric has a function.
func TestMetricsHaveFunctions(t *testing.T) {
	for _, tbl := range metricTables {
		for name, s := range tbl {
			if s.Fn == nil {
				t.Errorf("metric %q has no function", name)
			}
		}
	}
	var _ metric.Func = metrics["exact_match"].Fn
}
