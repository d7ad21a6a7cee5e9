package osworld

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/env"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/guest"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric"
)

// cubicDiffTask is diff_text_file over two files that make difflib's
// matcher cubic: n lines cycling through k values in a and the reverse
// cycle in b share no two adjacent lines, so every matching block is one
// line long and each of the n/k recursions rescans all of a. At 40,000
// lines that is minutes of CPU; at the 200,000 lines the metric accepts,
// hours.
func cubicDiffTask(t *testing.T, dir string, n int) Task {
	t.Helper()
	const k = 100
	var a, b strings.Builder
	for i := range n {
		fmt.Fprintf(&a, "%d\n", i%k)
		fmt.Fprintf(&b, "%d\n", k-1-i%k)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]string{"result.txt": a.String(), "expected.txt": b.String()} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	task, err := ParseTask([]byte(`{"instruction":"x","evaluator":{"func":"diff_text_file",
		"result":{"type":"cache_file","path":"result.txt"},"expected":{"type":"cache_file","path":"expected.txt"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	return task
}

// TestEvaluateStopsAtTheCallersDeadline: a metric working for minutes
// does not keep Evaluate past the deadline of its context.
func TestEvaluateStopsAtTheCallersDeadline(t *testing.T) {
	dir := t.TempDir()
	task := cubicDiffTask(t, dir, 40_000)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	type result struct {
		ev  env.Evaluation
		err error
	}
	done := make(chan result, 1)
	start := time.Now()
	go func() {
		ev, err := (&Session{CacheDir: dir}).Evaluate(ctx, task, env.EvalInput{})
		done <- result{ev, err}
	}()
	select {
	case r := <-done:
		if r.err == nil {
			t.Fatalf("Evaluate past its deadline = score %v, want an error", r.ev.Score)
		}
		t.Logf("Evaluate returned after %s: %v", time.Since(start).Round(time.Millisecond), r.err)
	case <-time.After(20 * time.Second):
		t.Fatalf("Evaluate still running 20s after start, 19s past its context's deadline")
	}
	waitMetricsEnd(t, 2*time.Second)
}

// TestEvaluateDeadline: past the session's EvalTimeout the evaluation is a
// failure naming the deadline and the metric that was running, not a
// score and not an environment error, and the metric stops soon after,
// since it looks at its context.
func TestEvaluateDeadline(t *testing.T) {
	dir := t.TempDir()
	task := cubicDiffTask(t, dir, 40_000)
	s := &Session{CacheDir: dir, EvalTimeout: time.Second}
	start := time.Now()
	ev, err := s.Evaluate(context.Background(), task, env.EvalInput{})
	took := time.Since(start)
	var de *EvalDeadlineError
	if !errors.As(err, &de) {
		t.Fatalf("Evaluate = score %v, error %v; want an *EvalDeadlineError", ev.Score, err)
	}
	if errors.Is(err, env.ErrEnvironment) {
		t.Errorf("the deadline's error %v is an environment error", err)
	}
	if want := "evaluation did not finish within 1s (--eval-timeout): metric diff_text_file was still running"; err.Error() != want {
		t.Errorf("error = %q, want %q", err, want)
	}
	if took > 5*time.Second {
		t.Errorf("Evaluate returned after %s with a 1s deadline", took)
	}
	waitMetricsEnd(t, 2*time.Second)
}

// TestEvaluateDeadlineInGetter: the deadline covers the getters too.
func TestEvaluateDeadlineInGetter(t *testing.T) {
	task, err := ParseTask([]byte(`{"instruction":"x","evaluator":{"func":"exact_match",
		"result":{"type":"vm_command_line","command":"sleep 60"},"expected":{"type":"rule","rules":{"expected":""}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	s := &Session{Guest: hangingGuest{}, CacheDir: t.TempDir(), EvalTimeout: 200 * time.Millisecond}
	_, err = s.Evaluate(context.Background(), task, env.EvalInput{})
	var de *EvalDeadlineError
	if !errors.As(err, &de) || de.Stage != "the result getter of exact_match" {
		t.Fatalf("Evaluate = %v, want an *EvalDeadlineError in the result getter", err)
	}
}

// hangingGuest answers nothing until the request's context ends.
type hangingGuest struct{ guestAPI }

func (hangingGuest) Execute(ctx context.Context, _ any, _, _ bool) (guest.ExecResult, error) {
	<-ctx.Done()
	return guest.ExecResult{}, ctx.Err()
}

// waitMetricsEnd fails the test when metric runs are still going after d.
func waitMetricsEnd(t *testing.T, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for running.Load() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d metric runs still going %s after their evaluation ended", running.Load(), d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestAbandonedMetricsAreBounded: a metric that never looks at its
// context runs on after its evaluation gave up; past maxAbandoned such
// runs, no metric starts and the evaluation says why, until they end.
func TestAbandonedMetricsAreBounded(t *testing.T) {
	release := make(chan struct{})
	const name = "test_ignores_its_context"
	metrics[name] = metric.Spec{Fn: func(context.Context, any, any, bool, map[string]any) (float64, error) {
		<-release
		return 1, nil
	}}
	oldMax := maxAbandoned
	maxAbandoned = 1
	t.Cleanup(func() {
		delete(metrics, name)
		maxAbandoned = oldMax
	})
	task, err := ParseTask([]byte(`{"instruction":"x","evaluator":{"func":"` + name + `","result":{"type":"rule","rules":1}}}`))
	if err != nil {
		t.Fatal(err)
	}
	s := &Session{CacheDir: t.TempDir(), EvalTimeout: 100 * time.Millisecond}
	var de *EvalDeadlineError
	if _, err := s.Evaluate(context.Background(), task, env.EvalInput{}); !errors.As(err, &de) {
		t.Fatalf("first Evaluate = %v, want an *EvalDeadlineError", err)
	}
	start := time.Now()
	_, err = s.Evaluate(context.Background(), task, env.EvalInput{})
	if err == nil || !strings.Contains(err.Error(), "1 metric runs that outlived their evaluation's deadline are still running") {
		t.Fatalf("second Evaluate = %v, want a refusal naming the run still going", err)
	}
	if d := time.Since(start); d > 50*time.Millisecond {
		t.Errorf("the refusal took %s", d)
	}
	close(release)
	waitMetricsEnd(t, 2*time.Second)
	if n := abandoned.Load(); n != 0 {
		t.Fatalf("abandoned = %d after the run ended", n)
	}
	if ev, err := (&Session{CacheDir: t.TempDir()}).Evaluate(context.Background(), task, env.EvalInput{}); err != nil || ev.Score != 1 {
		t.Errorf("Evaluate once the run ended = %v, %v; want 1", ev.Score, err)
	}
}

// TestMetricPanicIsAFailure: a metric that panics fails the evaluation;
// it takes neither the runner nor the score.
func TestMetricPanicIsAFailure(t *testing.T) {
	const name = "test_panics"
	metrics[name] = metric.Spec{Fn: func(context.Context, any, any, bool, map[string]any) (float64, error) {
		var m map[string]int
		m["x"] = 1
		return 1, nil
	}}
	t.Cleanup(func() { delete(metrics, name) })
	task, err := ParseTask([]byte(`{"instruction":"x","evaluator":{"func":"` + name + `","result":{"type":"rule","rules":1}}}`))
	if err != nil {
		t.Fatal(err)
	}
	_, err = (&Session{CacheDir: t.TempDir()}).Evaluate(context.Background(), task, env.EvalInput{})
	if err == nil || !strings.Contains(err.Error(), "metric test_panics panicked: assignment to entry in nil map") {
		t.Fatalf("Evaluate = %v, want the panic as the evaluation's error", err)
	}
}
