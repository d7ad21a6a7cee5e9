// Package claude parses Anthropic computer-use answers (reference §8):
// calls of the "computer" tool whose coordinates live on a 1280×720 screen
// and are scaled to the real one. Text containing [INFEASIBLE] is FAIL; an
// answer without a tool call is DONE. Actions come out as computer_13
// actions where one fits, else as the pyautogui code OSWorld runs.
package claude

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/action"
	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/env"
)

// The screen Claude reasons in.
const (
	ModelWidth  = 1280
	ModelHeight = 720
)

// MaxCalls bounds tool calls per answer.
const MaxCalls = 16

// ToolName is the computer tool's name.
const ToolName = "computer"

// Tool is the computer tool as an OpenAI function, for gateways that speak
// OpenAI's format.
func Tool() env.Tool {
	return env.Tool{
		Name:        ToolName,
		Description: fmt.Sprintf("Use a mouse and keyboard to interact with a computer, and take screenshots. The screen is %dx%d pixels.", ModelWidth, ModelHeight),
		Parameters: json.RawMessage(`{"type":"object","properties":{` +
			`"action":{"type":"string","enum":["key","type","mouse_move","left_click","left_click_drag","right_click","middle_click","double_click","triple_click","left_press","left_mouse_down","left_mouse_up","hold_key","scroll","wait","screenshot","done","fail","call_user"]},` +
			`"coordinate":{"type":"array","items":{"type":"integer"},"minItems":2,"maxItems":2},` +
			`"start_coordinate":{"type":"array","items":{"type":"integer"},"minItems":2,"maxItems":2},` +
			`"text":{"type":"string"},"scroll_direction":{"type":"string","enum":["up","down","left","right"]},` +
			`"scroll_amount":{"type":"integer"},"duration":{"type":"number"}},"required":["action"]}`),
	}
}

type input struct {
	Action          string    `json:"action"`
	Coordinate      []float64 `json:"coordinate"`
	StartCoordinate []float64 `json:"start_coordinate"`
	Text            string    `json:"text"`
	ScrollDirection string    `json:"scroll_direction"`
	ScrollAmount    *float64  `json:"scroll_amount"`
	Duration        *float64  `json:"duration"`
}

// Parse turns one answer into actions for the screen.
func Parse(text string, calls []action.ToolCall, scr action.Screen) ([]action.Action, error) {
	if strings.Contains(text, "[INFEASIBLE]") {
		return []action.Action{{Type: action.TypeFail}}, nil
	}
	if len(calls) == 0 {
		return []action.Action{{Type: action.TypeDone, Answer: strings.TrimSpace(text)}}, nil
	}
	if len(calls) > MaxCalls {
		return nil, fmt.Errorf("%d tool calls; at most %d", len(calls), MaxCalls)
	}
	if scr.Width <= 0 || scr.Height <= 0 {
		return nil, fmt.Errorf("screen size unknown")
	}
	var out []action.Action
	for _, c := range calls {
		if c.Name != ToolName {
			return nil, fmt.Errorf("unknown tool %q: only %q exists", c.Name, ToolName)
		}
		if len(c.Arguments) > action.MaxTextLen*2 {
			return nil, fmt.Errorf("tool arguments too long")
		}
		var in input
		if err := json.Unmarshal([]byte(c.Arguments), &in); err != nil {
			return nil, fmt.Errorf("computer tool arguments: %v", err)
		}
		acts, err := convert(in, scr)
		if err != nil {
			return nil, err
		}
		cc := c
		for i := range acts {
			acts[i].Tool = &cc
		}
		out = append(out, acts...)
		if len(out) > action.MaxActions {
			return nil, fmt.Errorf("more than %d actions", action.MaxActions)
		}
	}
	return out, nil
}

func scale(c []float64, scr action.Screen) (int, int, error) {
	if len(c) != 2 {
		return 0, 0, fmt.Errorf("coordinate must be [x, y]")
	}
	for _, v := range c {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return 0, 0, fmt.Errorf("coordinate must be finite")
		}
	}
	x := int(math.Round(c[0] * float64(scr.Width) / ModelWidth))
	y := int(math.Round(c[1] * float64(scr.Height) / ModelHeight))
	if x < 0 || y < 0 || x > scr.Width || y > scr.Height {
		return 0, 0, fmt.Errorf("coordinate (%v, %v) outside the %dx%d screen", c[0], c[1], ModelWidth, ModelHeight)
	}
	return x, y, nil
}

// keyNames is OSWorld's renaming of xdotool-style key names.
var keyNames = map[string]string{"page_down": "pagedown", "page_up": "pageup", "super_l": "win", "super": "command", "escape": "esc", "return": "enter"}

func keys(s string) ([]any, error) {
	var out []any
	for _, k := range strings.Split(s, "+") {
		k = strings.ToLower(strings.TrimSpace(k))
		if m, ok := keyNames[k]; ok {
			k = m
		}
		if !action.IsKey(k) {
			return nil, fmt.Errorf("unknown key %q", k)
		}
		out = append(out, k)
	}
	if len(out) == 0 || len(out) > action.MaxHotkeys {
		return nil, fmt.Errorf("key needs 1..%d keys", action.MaxHotkeys)
	}
	return out, nil
}

func c13(scr action.Screen, typ string, p map[string]any) (action.Action, error) {
	return action.Normalize(action.Action{Type: typ, Params: p}, scr)
}

func code(c string) action.Action { return action.Action{Type: action.TypeCode, Code: c} }

func convert(in input, scr action.Screen) ([]action.Action, error) {
	var pos map[string]any
	var x, y int
	if in.Coordinate != nil {
		var err error
		if x, y, err = scale(in.Coordinate, scr); err != nil {
			return nil, err
		}
		pos = map[string]any{"x": x, "y": y}
	}
	one := func(a action.Action, err error) ([]action.Action, error) {
		if err != nil {
			return nil, err
		}
		return []action.Action{a}, nil
	}
	clickCode := map[string]string{"left_click": "click", "right_click": "rightClick", "double_click": "doubleClick", "middle_click": "middleClick", "triple_click": "tripleClick"}
	switch in.Action {
	case "left_click", "right_click", "double_click", "middle_click", "triple_click":
		if in.Text != "" || in.Action == "middle_click" || in.Action == "triple_click" {
			// Modifier clicks and the clicks computer_13 lacks run as code.
			at := ""
			if pos != nil {
				at = fmt.Sprintf("%d, %d", x, y)
			}
			c := "pyautogui." + clickCode[in.Action] + "(" + at + ")"
			if in.Text != "" {
				ks, err := keys(in.Text)
				if err != nil {
					return nil, err
				}
				var down, up []string
				for i, k := range ks {
					down = append(down, "pyautogui.keyDown("+action.PyStr(k.(string))+")")
					up = append(up, "pyautogui.keyUp("+action.PyStr(ks[len(ks)-1-i].(string))+")")
				}
				c = strings.Join(down, "; ") + "; " + c + "; " + strings.Join(up, "; ")
			}
			return []action.Action{code(c)}, nil
		}
		typ := map[string]string{"left_click": "CLICK", "right_click": "RIGHT_CLICK", "double_click": "DOUBLE_CLICK"}[in.Action]
		p := map[string]any{}
		for k, v := range pos {
			p[k] = v
		}
		if typ == "CLICK" {
			p["button"] = "left"
		}
		return one(c13(scr, typ, p))
	case "left_press":
		at := ""
		if pos != nil {
			at = fmt.Sprintf("%d, %d", x, y)
		}
		return []action.Action{code("pyautogui.mouseDown(" + at + "); time.sleep(1); pyautogui.mouseUp(" + at + ")")}, nil
	case "mouse_move":
		if pos == nil {
			return nil, fmt.Errorf("mouse_move needs coordinate")
		}
		return one(c13(scr, "MOVE_TO", pos))
	case "left_click_drag":
		if pos == nil {
			return nil, fmt.Errorf("left_click_drag needs coordinate")
		}
		var out []action.Action
		if in.StartCoordinate != nil {
			sx, sy, err := scale(in.StartCoordinate, scr)
			if err != nil {
				return nil, err
			}
			a, err := c13(scr, "MOVE_TO", map[string]any{"x": sx, "y": sy})
			if err != nil {
				return nil, err
			}
			out = append(out, a)
		}
		a, err := c13(scr, "DRAG_TO", pos)
		if err != nil {
			return nil, err
		}
		return append(out, a), nil
	case "left_mouse_down":
		return one(c13(scr, "MOUSE_DOWN", map[string]any{"button": "left"}))
	case "left_mouse_up":
		return one(c13(scr, "MOUSE_UP", map[string]any{"button": "left"}))
	case "hold_key":
		ks, err := keys(in.Text)
		if err != nil {
			return nil, err
		}
		var out []action.Action
		for _, k := range ks {
			a, err := c13(scr, "KEY_DOWN", map[string]any{"key": k})
			if err != nil {
				return nil, err
			}
			out = append(out, a)
		}
		return out, nil
	case "key":
		ks, err := keys(in.Text)
		if err != nil {
			return nil, err
		}
		if len(ks) == 1 {
			return one(c13(scr, "PRESS", map[string]any{"key": ks[0]}))
		}
		return one(c13(scr, "HOTKEY", map[string]any{"keys": ks}))
	case "type":
		if in.Text == "" {
			return nil, fmt.Errorf("type needs text")
		}
		return one(c13(scr, "TYPING", map[string]any{"text": in.Text}))
	case "scroll":
		amount := 3.0
		if in.ScrollAmount != nil {
			amount = *in.ScrollAmount
		}
		if amount < 0 || amount > 100 {
			return nil, fmt.Errorf("scroll_amount must be 0..100")
		}
		var out []action.Action
		if pos != nil {
			a, err := c13(scr, "MOVE_TO", pos)
			if err != nil {
				return nil, err
			}
			out = append(out, a)
		}
		var p map[string]any
		switch in.ScrollDirection {
		case "up":
			p = map[string]any{"dy": amount}
		case "down":
			p = map[string]any{"dy": -amount}
		case "left":
			p = map[string]any{"dx": -amount}
		case "right":
			p = map[string]any{"dx": amount}
		default:
			return nil, fmt.Errorf("scroll_direction must be up, down, left or right")
		}
		a, err := c13(scr, "SCROLL", p)
		if err != nil {
			return nil, err
		}
		return append(out, a), nil
	case "wait", "screenshot":
		return []action.Action{{Type: action.TypeWait}}, nil
	case "done":
		return []action.Action{{Type: action.TypeDone}}, nil
	case "fail", "call_user":
		return []action.Action{{Type: action.TypeFail}}, nil
	}
	return nil, fmt.Errorf("invalid action %q", in.Action)
}

// SystemPrompt is the system prompt for Claude computer use.
func SystemPrompt() string {
	return fmt.Sprintf(`You are utilising an Ubuntu virtual machine using the computer tool to interact with it. The screen is %dx%d pixels.
* Take actions with the computer tool; after each action you get a new screenshot.
* When the task is complete, answer without calling a tool. If the task cannot be done, say [INFEASIBLE].`, ModelWidth, ModelHeight)
}
