package osworld

import (
	"maps"
	"os"
	"path/filepath"
	"strings"
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

// TestPublishedNamesRegistered: every step type, getter type and metric
// that OSWorld's published tasks use (testdata/published_names.txt: 12
// config step types, 8 postconfig step types, 47 getter types, 111
// metrics) is in the registry the evaluator and `rollout tasks check`
// read. The Google account names count: they are registered, and refused
// only without --google-settings.
func TestPublishedNamesRegistered(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "published_names.txt"))
	if err != nil {
		t.Fatal(err)
	}
	registered := map[string]func(string) bool{
		"step":       func(n string) bool { _, ok := stepHandlers[n]; return ok },
		"postconfig": func(n string) bool { _, ok := stepHandlers[n]; return ok },
		"getter":     func(n string) bool { _, ok := getters[n]; return ok },
		"metric":     func(n string) bool { _, ok := MetricOptions(n); return ok },
	}
	got := map[string]int{}
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		kind, name, ok := strings.Cut(line, " ")
		in := registered[kind]
		if !ok || in == nil || name == "" || strings.ContainsAny(name, " \t") {
			t.Fatalf("published_names.txt:%d: %q is not \"kind name\" with kind step, postconfig, getter or metric", i+1, line)
		}
		got[kind]++
		if !in(name) {
			t.Errorf("published %s %q is not registered", kind, name)
		}
	}
	// The counts of the published set: a shortened list would pass too.
	want := map[string]int{"step": 12, "postconfig": 8, "getter": 47, "metric": 111}
	if !maps.Equal(got, want) {
		t.Errorf("published_names.txt holds %v, want %v", got, want)
	}
}
