// Package toolcalls is the action space of tool environments (math, py,
// rag, web): OpenAI function tool calls. An answer without tool calls is the
// final answer, as in seed 002's _run_conversation.
package toolcalls

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/action"
)

// Limits on one answer.
const (
	MaxCalls    = 16
	MaxArgsSize = 256 << 10
)

// FinalAnswer is the tool whose call ends the episode with an answer.
const FinalAnswer = "final_answer"

// Parse turns the model's tool calls into TOOL actions, or its text into a
// DONE action carrying the final answer. When allowed is not empty, a call
// of any other tool is refused, so the model learns the tool list.
func Parse(text string, calls []action.ToolCall, allowed []string) ([]action.Action, error) {
	if len(calls) == 0 {
		if len(text) > action.MaxTextLen*16 {
			return nil, fmt.Errorf("answer longer than %d bytes", action.MaxTextLen*16)
		}
		return []action.Action{{Type: action.TypeDone, Answer: strings.TrimSpace(text)}}, nil
	}
	if len(calls) > MaxCalls {
		return nil, fmt.Errorf("%d tool calls in one answer; at most %d", len(calls), MaxCalls)
	}
	out := make([]action.Action, 0, len(calls))
	for i, c := range calls {
		if c.Name == "" {
			return nil, fmt.Errorf("tool call %d has no function name", i)
		}
		if len(allowed) > 0 && c.Name != FinalAnswer && !slices.Contains(allowed, c.Name) {
			return nil, fmt.Errorf("tool call %d: unknown tool %q; the tools are %s", i, c.Name, strings.Join(allowed, ", "))
		}
		if len(c.Arguments) > MaxArgsSize {
			return nil, fmt.Errorf("tool call %d: arguments longer than %d bytes", i, MaxArgsSize)
		}
		args := strings.TrimSpace(c.Arguments)
		if args == "" {
			args = "{}"
		}
		var obj map[string]any
		if err := json.Unmarshal([]byte(args), &obj); err != nil {
			return nil, fmt.Errorf("tool call %d (%s): arguments are not a JSON object: %v", i, c.Name, err)
		}
		if c.Name == FinalAnswer {
			// The final answer ends the episode; its argument is the answer.
			ans := fmt.Sprint(obj["answer"])
			if obj["answer"] == nil {
				ans = ""
			}
			out = append(out, action.Action{Type: action.TypeDone, Answer: ans})
			break
		}
		cc := c
		cc.Arguments = args
		out = append(out, action.Action{Type: action.TypeTool, Tool: &cc})
	}
	return out, nil
}
