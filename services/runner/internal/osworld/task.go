// Package osworld implements OSWorld's task machinery on the host side:
// the task JSON format, the setup and postconfig steps of
// desktop_env/controllers/setup.py, the evaluator's getters, and a registry
// of metrics that grows. A task needing a step, getter or metric that is not
// here is reported as unsupported with its name, never scored 0 silently.
package osworld

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// MaxTaskSize bounds a task file.
const MaxTaskSize = 4 << 20

// Task is an OSWorld task (evaluation_examples/examples/<domain>/<id>.json).
type Task struct {
	ID          string    `json:"id"`
	Snapshot    string    `json:"snapshot,omitempty"`
	Instruction string    `json:"instruction"`
	Source      Sources   `json:"source,omitempty"`
	Config      []Step    `json:"config,omitempty"`
	RelatedApps []string  `json:"related_apps,omitempty"`
	Evaluator   Evaluator `json:"evaluator"`
	Proxy       bool      `json:"proxy,omitempty"`
	FixedIP     bool      `json:"fixed_ip,omitempty"`
}

// Step is one setup or postconfig step.
type Step struct {
	Type       string          `json:"type"`
	Parameters json.RawMessage `json:"parameters,omitempty"`
}

// Evaluator is a task's evaluator. Func, Result, Expected and Options are
// either single values or lists of the same length.
type Evaluator struct {
	Func       []string         `json:"-"`
	Conj       string           `json:"conj,omitempty"`
	Result     []map[string]any `json:"-"`
	Expected   []map[string]any `json:"-"`
	Options    []map[string]any `json:"-"`
	Postconfig []Step           `json:"postconfig,omitempty"`
	// List is true when func was a list.
	List bool `json:"-"`
}

// UnmarshalJSON accepts OSWorld's single-or-list fields.
func (e *Evaluator) UnmarshalJSON(b []byte) error {
	var raw struct {
		Func       json.RawMessage `json:"func"`
		Conj       string          `json:"conj"`
		Result     json.RawMessage `json:"result"`
		Expected   json.RawMessage `json:"expected"`
		Options    json.RawMessage `json:"options"`
		Postconfig []Step          `json:"postconfig"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	e.Conj, e.Postconfig = raw.Conj, raw.Postconfig
	switch e.Conj {
	case "", "and", "or":
	default:
		return fmt.Errorf("evaluator.conj must be \"and\" or \"or\", got %q", e.Conj)
	}
	fb := bytes.TrimSpace(raw.Func)
	if len(fb) == 0 {
		return fmt.Errorf("evaluator.func is required")
	}
	if fb[0] == '[' {
		e.List = true
		if err := json.Unmarshal(fb, &e.Func); err != nil {
			return fmt.Errorf("evaluator.func: %v", err)
		}
	} else {
		var s string
		if err := json.Unmarshal(fb, &s); err != nil {
			return fmt.Errorf("evaluator.func must be a string or a list of strings")
		}
		e.Func = []string{s}
	}
	if len(e.Func) == 0 || len(e.Func) > 64 {
		return fmt.Errorf("evaluator.func must name 1..64 metrics")
	}
	var err error
	if e.Result, err = objects(raw.Result, e.List, len(e.Func), "result"); err != nil {
		return err
	}
	if e.Expected, err = objects(raw.Expected, e.List, len(e.Func), "expected"); err != nil {
		return err
	}
	if e.Options, err = objects(raw.Options, e.List, len(e.Func), "options"); err != nil {
		return err
	}
	return nil
}

// objects decodes a field that is an object (or null) when single, a list
// of objects (entries may be null) when list.
func objects(raw json.RawMessage, list bool, n int, name string) ([]map[string]any, error) {
	out := make([]map[string]any, n)
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return out, nil
	}
	if list && raw[0] == '[' {
		var l []map[string]any
		if err := json.Unmarshal(raw, &l); err != nil {
			return nil, fmt.Errorf("evaluator.%s: %v", name, err)
		}
		if len(l) != n {
			return nil, fmt.Errorf("evaluator.%s has %d entries, func has %d", name, len(l), n)
		}
		return l, nil
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("evaluator.%s must be an object: %v", name, err)
	}
	// A single object with a list func applies to every entry (OSWorld's
	// options may be shared this way).
	for i := range out {
		out[i] = m
	}
	return out, nil
}

// ParseTask decodes and checks an OSWorld task.
func ParseTask(data []byte) (Task, error) {
	if len(data) > MaxTaskSize {
		return Task{}, fmt.Errorf("task larger than %d bytes", MaxTaskSize)
	}
	var t Task
	if err := json.Unmarshal(data, &t); err != nil {
		return Task{}, fmt.Errorf("task: %v", err)
	}
	if t.Instruction == "" {
		return Task{}, fmt.Errorf("task: instruction is required")
	}
	if len(t.Evaluator.Func) == 0 {
		return Task{}, fmt.Errorf("task: evaluator.func is required")
	}
	for i, s := range t.Config {
		if s.Type == "" {
			return Task{}, fmt.Errorf("task: config[%d].type is required", i)
		}
	}
	for i, s := range t.Evaluator.Postconfig {
		if s.Type == "" {
			return Task{}, fmt.Errorf("task: evaluator.postconfig[%d].type is required", i)
		}
	}
	return t, nil
}

// Unsupported returns the first of Missing as "kind", "name"; ok is false
// when the task needs nothing missing. Checked before an episode starts, so
// no model call is wasted on a task that cannot be scored.
func (t Task) Unsupported() (kind, name string, ok bool) {
	m := t.Missing()
	if len(m) == 0 {
		return "", "", false
	}
	return m[0].Kind, m[0].Name, true
}
