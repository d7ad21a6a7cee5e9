// Package env holds what the agent loop and the environments share: the
// task as an environment sees it, observations, action results, tools and
// evaluations. Each environment lives in a subpackage (desktop, math, py,
// rag, web); the loop talks to them through its own small interface, so a
// new environment plugs in without touching the loop.
package env

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Modes are the environment modes a runner knows.
const (
	ModeDesktop = "desktop"
	ModeMath    = "math"
	ModePy      = "py"
	ModeRAG     = "rag"
	ModeWeb     = "web"
)

// CanonicalMode maps the seeds' aliases to a mode name ("osworld" is
// "desktop"); unknown names are returned unchanged.
func CanonicalMode(m string) string {
	if m == "osworld" || m == "" {
		return ModeDesktop
	}
	return m
}

// Task is one task as the environments need it.
type Task struct {
	ID          string
	Domain      string
	Instruction string
	// Spec is the task as loaded: OSWorld's task JSON or a benchmark item.
	Spec json.RawMessage
	// Answer is the reference answer of benchmark tasks.
	Answer string
	// Metric names the benchmark metric for tasks without an evaluator.
	Metric string
	// Mode is the environment mode the task asks for (empty: the default).
	Mode string
}

// Observation is what the agent sees.
type Observation struct {
	Screenshot []byte // PNG
	A11yTree   string
	Terminal   string
	// Text is the observation of tool environments.
	Text string
}

// Result is the outcome of one action or tool call.
type Result struct {
	OK     bool
	Error  string
	Output string
	// Image is an optional screenshot returned by a tool.
	Image []byte
}

// Tool is a function a tool environment offers the model.
type Tool struct {
	Name        string
	Description string
	// Parameters is the JSON Schema of the arguments.
	Parameters json.RawMessage
}

// Evaluation is the score of a finished episode.
type Evaluation struct {
	Score float64
	// Details describe how the score came about (metrics, getter results).
	Details map[string]any
}

// EvalInput is what the episode hands the evaluator.
type EvalInput struct {
	// FinalAnswer is the agent's final answer (seed 002's extraction).
	FinalAnswer string
	// LastActionFailed is true when the agent's last action was FAIL
	// (OSWorld scores infeasible tasks by it).
	LastActionFailed bool
}

// UnsupportedError says a task needs a setup step, getter or metric this
// runner does not implement. Episodes report it as UNSUPPORTED with Kind and
// Name, never as a 0 score.
type UnsupportedError struct {
	Kind string // "step", "getter", "metric", "env"
	Name string
	// Why is set when the name is known but refused here (a Google
	// account the mesh does not have).
	Why string
}

func (e *UnsupportedError) Error() string {
	if e.Why != "" {
		return "unsupported " + e.Kind + ": " + e.Name + " (" + e.Why + ")"
	}
	return "unsupported " + e.Kind + ": " + e.Name
}

// Reason is the failure_reason of the episode, e.g. "unsupported_step:googledrive".
func (e *UnsupportedError) Reason() string { return "unsupported_" + e.Kind + ":" + e.Name }

// AsUnsupported returns the UnsupportedError in err's chain, if any.
func AsUnsupported(err error) (*UnsupportedError, bool) {
	var u *UnsupportedError
	ok := errors.As(err, &u)
	return u, ok
}

// ErrGuestUnreachable marks errors where the environment's guest stopped
// answering; the episode is reported failed with reason guest_unreachable.
var ErrGuestUnreachable = errors.New("guest unreachable")

// ErrEnvironment marks failures of the environment itself rather than of
// the agent: an interpreter or sandbox tool missing, a setup step that
// failed, an evaluator input that could not be fetched. The episode is
// reported failed with reason env_error; scoring it 0 would teach the model
// that a broken deployment was its fault.
var ErrEnvironment = errors.New("environment error")

// EnvError marks err as an environment failure, keeping its chain (an
// UnsupportedError or ErrGuestUnreachable inside still decides the reason).
func EnvError(err error) error {
	if err == nil || errors.Is(err, ErrEnvironment) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrEnvironment, err)
}

// FinalAnswerName is the tool that ends a tool episode with an answer.
const FinalAnswerName = "final_answer"

// FinalAnswerTool is the final_answer tool every tool environment offers.
func FinalAnswerTool() Tool {
	return Tool{Name: FinalAnswerName, Description: "Give the final answer and end the task.",
		Parameters: json.RawMessage(`{"type":"object","properties":{"answer":{"type":"string"}},"required":["answer"]}`)}
}
