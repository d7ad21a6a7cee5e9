// Package actionspace is the registry of action spaces: for each, the
// system prompt the model gets, the tools sent with each request, and the
// parser from a model answer to actions. The parsers live in the
// subpackages (computer13, pyautogui, uitars, claude, toolcalls).
package actionspace

import (
	"fmt"
	"sort"
	"strings"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/action"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/actionspace/claude"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/actionspace/computer13"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/actionspace/pyautogui"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/actionspace/toolcalls"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/actionspace/uitars"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/env"
)

// Answer is one model answer as the parsers see it.
type Answer struct {
	Text  string
	Calls []action.ToolCall
	// Tools names the tools the request offered.
	Tools []string
}

// Space is one action space.
type Space struct {
	// Name as AgentConfig.action_space spells it.
	Name string
	// Desktop is true for spaces that drive a screen.
	Desktop bool
	// ModelScreen, when set, is the screen the model reasons in; screenshots
	// are scaled to it (Claude's 1280×720).
	ModelScreen action.Screen
	// Prompt is the built-in system prompt for a screen.
	Prompt func(scr action.Screen) string
	// Tools returns the tools sent with every request, given the
	// environment's own tools.
	Tools func(envTools []env.Tool) []env.Tool
	// Parse turns an answer into actions.
	Parse func(a Answer, scr action.Screen) ([]action.Action, error)
}

func noTools([]env.Tool) []env.Tool { return nil }

var spaces = map[string]Space{
	"computer_13": {
		Name: "computer_13", Desktop: true,
		Prompt: func(s action.Screen) string { return computer13.SystemPrompt(s.Width, s.Height) },
		Tools:  noTools,
		Parse:  func(a Answer, s action.Screen) ([]action.Action, error) { return computer13.Parse(a.Text, s) },
	},
	"pyautogui": {
		Name: "pyautogui", Desktop: true,
		Prompt: func(s action.Screen) string { return pyautogui.SystemPrompt(s.Width, s.Height) },
		Tools:  noTools,
		Parse:  func(a Answer, _ action.Screen) ([]action.Action, error) { return pyautogui.Parse(a.Text) },
	},
	"uitars": {
		Name: "uitars", Desktop: true,
		Prompt: func(action.Screen) string { return uitars.SystemPrompt(uitars.V1, "") },
		Tools:  noTools,
		Parse: func(a Answer, s action.Screen) ([]action.Action, error) {
			p, err := uitars.Parse(a.Text, uitars.V1, s)
			return p.Actions, err
		},
	},
	"uitars15": {
		Name: "uitars15", Desktop: true,
		Prompt: func(action.Screen) string { return uitars.SystemPrompt(uitars.V15, "") },
		Tools:  noTools,
		Parse: func(a Answer, s action.Screen) ([]action.Action, error) {
			p, err := uitars.Parse(a.Text, uitars.V15, s)
			return p.Actions, err
		},
	},
	"claude_computer_use": {
		Name: "claude_computer_use", Desktop: true,
		ModelScreen: action.Screen{Width: claude.ModelWidth, Height: claude.ModelHeight},
		Prompt:      func(action.Screen) string { return claude.SystemPrompt() },
		Tools:       func([]env.Tool) []env.Tool { return []env.Tool{claude.Tool()} },
		Parse:       func(a Answer, s action.Screen) ([]action.Action, error) { return claude.Parse(a.Text, a.Calls, s) },
	},
	"tool_calls": {
		Name:   "tool_calls",
		Prompt: func(action.Screen) string { return "" },
		Tools:  func(t []env.Tool) []env.Tool { return t },
		Parse: func(a Answer, _ action.Screen) ([]action.Action, error) {
			return toolcalls.Parse(a.Text, a.Calls, a.Tools)
		},
	},
}

// aliases maps other spellings to space names.
var aliases = map[string]string{
	"computer13": "computer_13", "uitars1": "uitars", "uitars10": "uitars", "ui_tars": "uitars",
	"uitars1.5": "uitars15", "uitars_15": "uitars15", "claude": "claude_computer_use", "toolcalls": "tool_calls", "tools": "tool_calls",
}

// Get returns the named action space.
func Get(name string) (Space, error) {
	n := strings.ToLower(strings.TrimSpace(name))
	if a, ok := aliases[n]; ok {
		n = a
	}
	s, ok := spaces[n]
	if !ok {
		return Space{}, fmt.Errorf("unknown action space %q (have %s)", name, strings.Join(Names(), ", "))
	}
	return s, nil
}

// Names lists the action spaces.
func Names() []string {
	out := make([]string, 0, len(spaces))
	for n := range spaces {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
