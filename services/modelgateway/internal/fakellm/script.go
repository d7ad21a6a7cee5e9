package fakellm

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"regexp"

	"github.com/rolloutmesh/rolloutmesh/serverkit/boundedread"
)

// Rule is one line of a script: when Match (a regular expression over the
// text of the last user message) matches, fakellm answers with Reply and/or
// ToolCalls. The first matching rule wins.
type Rule struct {
	Match     string           `json:"match"`
	Reply     string           `json:"reply,omitempty"`
	ToolCalls []ScriptToolCall `json:"tool_calls,omitempty"`

	re *regexp.Regexp
}

// ScriptToolCall is a tool call a Rule answers with.
type ScriptToolCall struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// maxScriptLine bounds one script line (a reply may be long, not unbounded).
const maxScriptLine = 1 << 20

// ParseScript reads JSONL rules; blank lines and lines starting with '#' are
// skipped. Errors name the line.
func ParseScript(r io.Reader) ([]Rule, error) {
	var rules []Rule
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), maxScriptLine)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		var rule Rule
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&rule); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		if err := rule.compile(); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		rules = append(rules, rule)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read script: %w", err)
	}
	return rules, nil
}

// maxScript bounds a script file; the demo script is a few kilobytes.
const maxScript = 16 << 20

// LoadScript reads a script file: a regular file of at most 16 MiB, since
// a FIFO would block the start and a device never end.
func LoadScript(path string) ([]Rule, error) {
	raw, err := boundedread.ReadFile(path, maxScript)
	if err != nil {
		return nil, fmt.Errorf("read script: %w", err)
	}
	rules, err := ParseScript(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("script %s: %w", path, err)
	}
	return rules, nil
}

func (r *Rule) compile() error {
	re, err := regexp.Compile(r.Match)
	if err != nil {
		return fmt.Errorf("match: %w", err)
	}
	if r.Reply == "" && len(r.ToolCalls) == 0 {
		return fmt.Errorf("rule %q has neither reply nor tool_calls", r.Match)
	}
	for i, tc := range r.ToolCalls {
		if tc.Name == "" {
			return fmt.Errorf("tool_calls[%d].name: empty", i)
		}
		if len(tc.Arguments) > 0 {
			var obj map[string]any
			if err := json.Unmarshal(tc.Arguments, &obj); err != nil {
				return fmt.Errorf("tool_calls[%d].arguments: not a JSON object: %w", i, err)
			}
		}
	}
	r.re = re
	return nil
}

// CompileRules checks and compiles rules built in code (tests, demos).
func CompileRules(rules []Rule) ([]Rule, error) {
	out := make([]Rule, len(rules))
	for i, r := range rules {
		if err := r.compile(); err != nil {
			return nil, fmt.Errorf("rule %d: %w", i, err)
		}
		out[i] = r
	}
	return out, nil
}
