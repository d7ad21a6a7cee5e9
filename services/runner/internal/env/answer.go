package env

import (
	"context"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/metrics"
)

// ScoreAnswer scores a tool environment's final answer against the task's
// reference answer with the task's metric (or def). An unknown metric is
// unsupported, never a silent 0.
func ScoreAnswer(ctx context.Context, t Task, final, def string, j metrics.Judge) (Evaluation, error) {
	name := t.Metric
	if name == "" {
		name = def
	}
	if name == "" {
		name = "exact_match"
	}
	if !metrics.Known(name) {
		return Evaluation{}, &UnsupportedError{Kind: "metric", Name: name}
	}
	s, err := metrics.Score(ctx, name, t.Instruction, final, t.Answer, j)
	if err != nil {
		return Evaluation{}, err
	}
	return Evaluation{Score: s, Details: map[string]any{"metric": name, "prediction": final, "reference": t.Answer}}, nil
}
