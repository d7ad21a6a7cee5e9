package osworld

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/osworld/metric"
)

// DefaultEvalTimeout bounds one evaluation. A postconfig open step alone
// may wait DefaultWindowWait for its window and the getters fetch files
// from the guest, so the bound leaves room for that; a metric itself takes
// seconds. Without a bound, a metric doing superlinear work on a large
// input (difflib's matcher is cubic on some line patterns) held the
// episode's slot for hours.
const DefaultEvalTimeout = 10 * time.Minute

func (s *Session) evalTimeout() time.Duration {
	if s.EvalTimeout > 0 {
		return s.EvalTimeout
	}
	return DefaultEvalTimeout
}

// errEvalDeadline is the cause of the evaluation context's end at its
// deadline, telling it apart from the caller's own deadline.
var errEvalDeadline = errors.New("evaluation deadline")

// EvalDeadlineError is the failure of an evaluation that did not finish
// within its deadline. It does not wrap ErrEnvironment even when a getter
// was running: the episode fails with reason "evaluation", whatever part
// of it was slow.
type EvalDeadlineError struct {
	Limit time.Duration
	// Stage is what was running: "postconfig", "the result getter of
	// compare_table", "metric compare_table".
	Stage string
}

func (e *EvalDeadlineError) Error() string {
	return fmt.Sprintf("evaluation did not finish within %s (--eval-timeout): %s was still running", e.Limit, e.Stage)
}

// maxAbandoned bounds the metric runs still working after their
// evaluation gave up on them. Go cannot stop a goroutine: a metric that
// does not look at its context runs on, holding a core and its inputs'
// memory. Past the bound a new metric is not started, so a task that
// makes metrics run away cannot pile them up on a runner. A variable for
// the tests.
var maxAbandoned int64 = 4

var (
	// abandoned counts the metric runs given up on that have not ended.
	abandoned atomic.Int64
	// running counts every metric run that has not ended (tests watch it).
	running atomic.Int64
)

// States of one metric run, settled once by whichever of the run and its
// waiter gets there first.
const (
	runWorking int32 = iota
	runDone
	runAbandoned
)

// runMetric runs fn in a goroutine of its own and waits for it or for
// ctx, whichever ends first, so that an evaluation ends at its deadline
// even while a metric computes. A panic in the metric is its failure, not
// the runner's.
func (s *Session) runMetric(ctx context.Context, name string, fn metric.Func, res, exp any, hasExp bool, opts map[string]any) (float64, error) {
	if n := abandoned.Load(); n >= maxAbandoned {
		return 0, fmt.Errorf("metric %s not started: %d metric runs that outlived their evaluation's deadline are still running on this runner", name, n)
	}
	type outcome struct {
		score float64
		err   error
	}
	done := make(chan outcome, 1)
	var state atomic.Int32
	running.Add(1)
	go func() {
		var o outcome
		defer func() {
			if r := recover(); r != nil {
				o = outcome{err: fmt.Errorf("metric %s panicked: %v", name, r)}
				if s.Log != nil {
					s.Log.Error("metric panicked", zap.String("metric", name), zap.Any("panic", r), zap.ByteString("stack", debug.Stack()))
				}
			}
			done <- o
			if !state.CompareAndSwap(runWorking, runDone) {
				abandoned.Add(-1)
			}
			running.Add(-1)
		}()
		o.score, o.err = fn(ctx, res, exp, hasExp, opts)
	}()
	select {
	case o := <-done:
		return o.score, o.err
	case <-ctx.Done():
		if !state.CompareAndSwap(runWorking, runAbandoned) {
			// It ended as the deadline came: its answer stands.
			o := <-done
			return o.score, o.err
		}
		abandoned.Add(1)
		if s.Log != nil {
			s.Log.Warn("metric abandoned at the evaluation's end; it runs on until it looks at its context",
				zap.String("metric", name), zap.Error(context.Cause(ctx)))
		}
		return 0, context.Cause(ctx)
	}
}
