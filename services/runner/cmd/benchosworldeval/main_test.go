package main

import (
	"testing"
	"time"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld"
)

func TestPercentile(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	tests := []struct {
		name string
		in   []time.Duration
		p    float64
		want time.Duration
	}{
		{"empty", nil, 50, 0},
		{"one", ms(7), 99, 7 * time.Millisecond},
		{"median of unsorted", ms(5, 1, 4, 2, 3), 50, 3 * time.Millisecond},
		{"p99 of 20 is the slowest", ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20), 99, 20 * time.Millisecond},
		{"p50 of 20 is the 10th", ms(20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1), 50, 10 * time.Millisecond},
		{"max", ms(3, 9, 1), 100, 9 * time.Millisecond},
	}
	for _, tt := range tests {
		if got := percentile(tt.in, tt.p); got != tt.want {
			t.Errorf("%s: percentile(%v, %v) = %v, want %v", tt.name, tt.in, tt.p, got, tt.want)
		}
	}
}

// TestEvalTasks checks that every measured metric is in the runner's
// registry and that its task parses as the evaluator will read it.
func TestEvalTasks(t *testing.T) {
	for _, name := range []string{"compare_table", "compare_pptx_files", "compare_docx_files", "compare_pdfs", "compare_images"} {
		if _, ok := osworld.MetricOptions(name); !ok {
			t.Errorf("metric %s is not registered", name)
			continue
		}
		task, err := evalTask(bench{metric: name}, "result.x", "expected.x")
		if err != nil {
			t.Errorf("evalTask(%s): %v", name, err)
			continue
		}
		if got := task.Evaluator.Func; len(got) != 1 || got[0] != name {
			t.Errorf("evalTask(%s).Evaluator.Func = %v, want [%s]", name, got, name)
		}
		if _, _, unsupported := task.Unsupported(); unsupported {
			t.Errorf("evalTask(%s) needs something the runner lacks: %v", name, task.Missing())
		}
	}
}
