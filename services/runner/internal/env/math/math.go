// Package math is the math environment: a calculator tool and a final
// answer, scored by a benchmark metric (numeric_match by default).
package math

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/action"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/env"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/metrics"
)

// Env is one episode's math environment.
type Env struct {
	metric string
	judge  metrics.Judge
	task   env.Task
}

// New returns a math environment scoring with metric (empty: numeric_match).
func New(metric string, j metrics.Judge) *Env {
	if metric == "" {
		metric = "numeric_match"
	}
	return &Env{metric: metric, judge: j}
}

// SystemPrompt tells the model how to work.
func (e *Env) SystemPrompt() string {
	return "You are a careful mathematician. Use the calculator tool for arithmetic. " +
		"When you know the answer, call final_answer with it (or reply with the answer alone)."
}

// Tools are the calculator and final_answer.
func (e *Env) Tools() []env.Tool {
	return []env.Tool{
		{Name: "calculator", Description: "Evaluate an arithmetic expression (+ - * / // % ^, parentheses, sqrt, log, sin, ...).",
			Parameters: json.RawMessage(`{"type":"object","properties":{"expression":{"type":"string","description":"the expression, e.g. (3+4)*12"}},"required":["expression"]}`)},
		env.FinalAnswerTool(),
	}
}

// Reset starts the episode; there is nothing to set up.
func (e *Env) Reset(_ context.Context, t env.Task) (env.Observation, error) {
	e.task = t
	return env.Observation{}, nil
}

// Step runs tool calls.
func (e *Env) Step(_ context.Context, acts []action.Action) ([]env.Result, env.Observation, error) {
	out := make([]env.Result, len(acts))
	for i, a := range acts {
		out[i] = e.call(a)
	}
	return out, env.Observation{}, nil
}

func (e *Env) call(a action.Action) env.Result {
	if a.Terminal() || a.Type == action.TypeWait {
		return env.Result{OK: true}
	}
	if a.Type != action.TypeTool || a.Tool == nil {
		return env.Result{Error: "this environment takes tool calls only"}
	}
	if a.Tool.Name != "calculator" {
		return env.Result{Error: fmt.Sprintf("unknown tool %q", a.Tool.Name)}
	}
	var args struct {
		Expression string `json:"expression"`
	}
	if err := json.Unmarshal([]byte(a.Tool.Arguments), &args); err != nil || args.Expression == "" {
		return env.Result{Error: "calculator needs {\"expression\": \"...\"}"}
	}
	v, err := Eval(args.Expression)
	if err != nil {
		return env.Result{Error: err.Error()}
	}
	return env.Result{OK: true, Output: Format(v)}
}

// Evaluate scores the final answer.
func (e *Env) Evaluate(ctx context.Context, in env.EvalInput) (env.Evaluation, error) {
	return env.ScoreAnswer(ctx, e.task, in.FinalAnswer, e.metric, e.judge)
}

// Close does nothing.
func (e *Env) Close(context.Context) error { return nil }
