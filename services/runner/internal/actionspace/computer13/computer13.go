// Package computer13 parses model answers in OSWorld's computer_13 action
// space: JSON action dicts, usually in ```json fences, or the bare verbs
// WAIT, DONE and FAIL (mm_agents/agent.py parse_actions_from_string).
package computer13

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/action"
)

// MaxInput bounds the answer size the parser looks at.
const MaxInput = 1 << 20

var (
	jsonFence  = regexp.MustCompile("(?s)```json\\s+(.*?)\\s+```")
	plainFence = regexp.MustCompile("(?s)```\\s+(.*?)\\s+```")
	verbFence  = regexp.MustCompile("```\\s*(WAIT|DONE|FAIL)\\s*```")
)

// Parse returns the actions of one model answer, validated against the
// screen.
func Parse(text string, scr action.Screen) ([]action.Action, error) {
	if len(text) > MaxInput {
		return nil, fmt.Errorf("answer longer than %d bytes", MaxInput)
	}
	t := strings.TrimSpace(text)
	switch t {
	case action.TypeWait, action.TypeDone, action.TypeFail:
		return []action.Action{{Type: t}}, nil
	}
	var blocks []string
	for _, m := range jsonFence.FindAllStringSubmatch(t, -1) {
		blocks = append(blocks, m[1])
	}
	if len(blocks) == 0 {
		for _, m := range plainFence.FindAllStringSubmatch(t, -1) {
			blocks = append(blocks, m[1])
		}
	}
	if len(blocks) == 0 {
		if m := verbFence.FindStringSubmatch(t); m != nil {
			return []action.Action{{Type: m[1]}}, nil
		}
		blocks = []string{t}
	}
	var out []action.Action
	for _, b := range blocks {
		as, err := decodeBlock(b, scr)
		if err != nil {
			return nil, err
		}
		out = append(out, as...)
		if len(out) > action.MaxActions {
			return nil, fmt.Errorf("more than %d actions", action.MaxActions)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no action found: answer with a ```json block holding an action dict, or WAIT, DONE or FAIL")
	}
	return out, nil
}

// decodeBlock decodes one JSON value: an action dict, a list of them, or a
// verb string.
func decodeBlock(b string, scr action.Screen) ([]action.Action, error) {
	b = strings.TrimSpace(b)
	switch b {
	case action.TypeWait, action.TypeDone, action.TypeFail:
		return []action.Action{{Type: b}}, nil
	}
	var raws []json.RawMessage
	if strings.HasPrefix(b, "[") {
		if err := json.Unmarshal([]byte(b), &raws); err != nil {
			return nil, fmt.Errorf("action list is not valid JSON: %v", err)
		}
	} else {
		raws = []json.RawMessage{json.RawMessage(b)}
	}
	var out []action.Action
	for _, r := range raws {
		a, err := decodeOne(r, scr)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

// decodeOne accepts {"action_type": T, "parameters": {...}}, the flat form
// with parameters beside action_type, and verb strings.
func decodeOne(raw json.RawMessage, scr action.Screen) (action.Action, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err == nil {
			switch s {
			case action.TypeWait, action.TypeDone, action.TypeFail:
				return action.Action{Type: s}, nil
			}
		}
		return action.Action{}, fmt.Errorf("a string action must be WAIT, DONE or FAIL")
	}
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil {
		return action.Action{}, fmt.Errorf("action is not a JSON object: %v", err)
	}
	typ, _ := obj["action_type"].(string)
	if typ == "" {
		return action.Action{}, fmt.Errorf("action_type must be a non-empty string")
	}
	params := map[string]any{}
	if p, ok := obj["parameters"]; ok && p != nil {
		pm, ok := p.(map[string]any)
		if !ok {
			return action.Action{}, fmt.Errorf("parameters must be an object")
		}
		params = pm
	}
	for k, v := range obj {
		if _, dup := params[k]; !dup && k != "action_type" && k != "parameters" {
			params[k] = v
		}
	}
	return action.Normalize(action.Action{Type: typ, Params: params}, scr)
}
