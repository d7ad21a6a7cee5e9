// Package action holds the runner's representation of one agent action: a
// computer_13 action in OSWorld's dict form, a block of pyautogui code, a
// control verb (WAIT, DONE, FAIL) or a tool call. It also turns computer_13
// actions into the pyautogui code OSWorld's PythonController.execute_action
// would run, so that real OSWorld guests (which only take code) work too.
package action

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	rmv1 "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
)

// Action types beyond computer_13's own.
const (
	TypeCode = "CODE" // pyautogui code in Code
	TypeTool = "TOOL" // a tool call in Tool
	TypeWait = "WAIT"
	TypeDone = "DONE"
	TypeFail = "FAIL"
)

// Limits that keep a hostile model answer from growing without bound.
const (
	MaxActions  = 64
	MaxTextLen  = 64 << 10
	MaxCodeLen  = 256 << 10
	MaxHotkeys  = 8
	MaxScroll   = 10000
	MaxCoordAbs = 100000
	// MaxScreenSide bounds a screen's width and height.
	MaxScreenSide = 16384
)

// Action is one parsed agent action.
type Action struct {
	// Type is a computer_13 action type, TypeCode or TypeTool.
	Type string `json:"action_type"`
	// Params are the computer_13 parameters (x, y, button, text, keys, ...).
	Params map[string]any `json:"parameters,omitempty"`
	// Code is the pyautogui code for TypeCode, or the generated code of a
	// computer_13 action.
	Code string `json:"code,omitempty"`
	// Tool is the call of a TypeTool action.
	Tool *ToolCall `json:"tool_call,omitempty"`
	// Answer is a final answer carried by DONE (UI-TARS finished(content=...)).
	Answer string `json:"answer,omitempty"`
	// CallUser marks a FAIL that asks for the user's help (UI-TARS
	// call_user()): the agent loop answers the first few with WAIT.
	CallUser bool `json:"call_user,omitempty"`
}

// ToolCall is a function call made by the model.
type ToolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Terminal reports whether the action ends the episode.
func (a Action) Terminal() bool { return a.Type == TypeDone || a.Type == TypeFail }

// Screen is a screen size in pixels.
type Screen struct{ Width, Height int }

// ParseScreen parses "WxH".
func ParseScreen(s string) (Screen, error) {
	w, h, ok := strings.Cut(strings.ToLower(strings.TrimSpace(s)), "x")
	if !ok {
		return Screen{}, fmt.Errorf("screen %q: want WIDTHxHEIGHT", s)
	}
	wi, err1 := strconv.Atoi(w)
	hi, err2 := strconv.Atoi(h)
	if err1 != nil || err2 != nil || wi < 1 || hi < 1 || wi > MaxScreenSide || hi > MaxScreenSide {
		return Screen{}, fmt.Errorf("screen %q: want WIDTHxHEIGHT with sides in 1..%d", s, MaxScreenSide)
	}
	return Screen{wi, hi}, nil
}

// computer13Types are the action types of OSWorld's desktop_env/actions.py.
var computer13Types = []string{
	"MOVE_TO", "CLICK", "MOUSE_DOWN", "MOUSE_UP", "RIGHT_CLICK", "DOUBLE_CLICK",
	"DRAG_TO", "SCROLL", "TYPING", "PRESS", "KEY_DOWN", "KEY_UP", "HOTKEY",
	TypeWait, TypeFail, TypeDone,
}

// IsComputer13 reports whether t is a computer_13 action type.
func IsComputer13(t string) bool { return slices.Contains(computer13Types, t) }

// Normalize validates a computer_13 action against the screen, fills in
// numeric parameters as float64/int consistently, and sets Code. It never
// panics on odd parameter types.
func Normalize(a Action, scr Screen) (Action, error) {
	a.Type = strings.ToUpper(strings.TrimSpace(a.Type))
	if !IsComputer13(a.Type) {
		return a, fmt.Errorf("unknown action_type %q", a.Type)
	}
	p := params{m: a.Params, scr: scr}
	out := map[string]any{}
	switch a.Type {
	case "MOVE_TO", "DRAG_TO":
		x, y, err := p.point(true)
		if err != nil {
			return a, err
		}
		out["x"], out["y"] = x, y
	case "CLICK", "RIGHT_CLICK", "DOUBLE_CLICK", "MOUSE_DOWN", "MOUSE_UP":
		x, y, err := p.point(false)
		if err != nil {
			return a, err
		}
		if x >= 0 {
			out["x"], out["y"] = x, y
		}
		if a.Type == "CLICK" || a.Type == "MOUSE_DOWN" || a.Type == "MOUSE_UP" {
			b, err := p.button()
			if err != nil {
				return a, err
			}
			if b != "" {
				out["button"] = b
			}
		}
		if a.Type == "CLICK" {
			if n, ok, err := p.integer("num_clicks"); err != nil {
				return a, err
			} else if ok {
				if n < 1 || n > 3 {
					return a, fmt.Errorf("num_clicks must be 1..3, got %d", n)
				}
				out["num_clicks"] = n
			}
		}
	case "SCROLL":
		for _, k := range []string{"dx", "dy"} {
			n, ok, err := p.integer(k)
			if err != nil {
				return a, err
			}
			if ok {
				if n < -MaxScroll || n > MaxScroll {
					return a, fmt.Errorf("%s out of range: %d", k, n)
				}
				out[k] = n
			}
		}
		if len(out) == 0 {
			return a, fmt.Errorf("SCROLL needs dx or dy")
		}
	case "TYPING":
		s, ok := a.Params["text"].(string)
		if !ok {
			return a, fmt.Errorf("TYPING needs a string text")
		}
		if len(s) > MaxTextLen {
			return a, fmt.Errorf("text longer than %d bytes", MaxTextLen)
		}
		out["text"] = s
	case "PRESS", "KEY_DOWN", "KEY_UP":
		s, ok := a.Params["key"].(string)
		if !ok {
			return a, fmt.Errorf("%s needs a string key", a.Type)
		}
		if !IsKey(s) {
			return a, fmt.Errorf("unknown key %q", s)
		}
		out["key"] = normKey(s)
	case "HOTKEY":
		raw, ok := a.Params["keys"].([]any)
		if !ok || len(raw) == 0 || len(raw) > MaxHotkeys {
			return a, fmt.Errorf("HOTKEY needs keys: a list of 1..%d key names", MaxHotkeys)
		}
		keys := make([]any, 0, len(raw))
		for _, k := range raw {
			s, ok := k.(string)
			if !ok || !IsKey(s) {
				return a, fmt.Errorf("unknown key %v", k)
			}
			keys = append(keys, normKey(s))
		}
		out["keys"] = keys
	}
	if len(out) == 0 {
		out = nil
	}
	a.Params = out
	code, err := Code(a)
	if err != nil {
		return a, err
	}
	a.Code = code
	return a, nil
}

// Code returns the pyautogui code OSWorld's controller runs for a
// normalized computer_13 action (deterministic: no random easing), or "" for
// WAIT/DONE/FAIL, which the controller treats as no-ops.
func Code(a Action) (string, error) {
	p := a.Params
	xy := func() string {
		if _, ok := p["x"]; ok {
			return fmt.Sprintf("x=%v, y=%v", p["x"], p["y"])
		}
		return ""
	}
	join := func(parts ...string) string {
		var nz []string
		for _, s := range parts {
			if s != "" {
				nz = append(nz, s)
			}
		}
		return strings.Join(nz, ", ")
	}
	switch a.Type {
	case TypeCode:
		return a.Code, nil
	case TypeWait, TypeDone, TypeFail, TypeTool:
		return "", nil
	case "MOVE_TO":
		return fmt.Sprintf("pyautogui.moveTo(%v, %v, duration=0.5)", p["x"], p["y"]), nil
	case "CLICK":
		args := []string{}
		if b, ok := p["button"]; ok {
			args = append(args, "button="+pyStr(b.(string)))
		}
		args = append(args, xy())
		if n, ok := p["num_clicks"]; ok {
			args = append(args, fmt.Sprintf("clicks=%v", n))
		}
		return "pyautogui.click(" + join(args...) + ")", nil
	case "MOUSE_DOWN", "MOUSE_UP":
		fn := map[string]string{"MOUSE_DOWN": "mouseDown", "MOUSE_UP": "mouseUp"}[a.Type]
		args := []string{xy()}
		if b, ok := p["button"]; ok {
			args = append(args, "button="+pyStr(b.(string)))
		}
		return "pyautogui." + fn + "(" + join(args...) + ")", nil
	case "RIGHT_CLICK":
		return "pyautogui.rightClick(" + xy() + ")", nil
	case "DOUBLE_CLICK":
		return "pyautogui.doubleClick(" + xy() + ")", nil
	case "DRAG_TO":
		return fmt.Sprintf("pyautogui.dragTo(%v, %v, duration=1.0, button='left')", p["x"], p["y"]), nil
	case "SCROLL":
		var lines []string
		if dx, ok := p["dx"]; ok {
			lines = append(lines, fmt.Sprintf("pyautogui.hscroll(%v)", dx))
		}
		if dy, ok := p["dy"]; ok {
			lines = append(lines, fmt.Sprintf("pyautogui.vscroll(%v)", dy))
		}
		return strings.Join(lines, "\n"), nil
	case "TYPING":
		return "pyautogui.typewrite(" + pyStr(p["text"].(string)) + ")", nil
	case "PRESS":
		return "pyautogui.press(" + pyStr(p["key"].(string)) + ")", nil
	case "KEY_DOWN":
		return "pyautogui.keyDown(" + pyStr(p["key"].(string)) + ")", nil
	case "KEY_UP":
		return "pyautogui.keyUp(" + pyStr(p["key"].(string)) + ")", nil
	case "HOTKEY":
		var ks []string
		for _, k := range p["keys"].([]any) {
			ks = append(ks, pyStr(k.(string)))
		}
		return "pyautogui.hotkey(" + strings.Join(ks, ", ") + ")", nil
	}
	return "", fmt.Errorf("no pyautogui code for action_type %q", a.Type)
}

// pyStr quotes s as a Python string literal (repr-like, single quotes).
func pyStr(s string) string {
	var b strings.Builder
	b.WriteByte('\'')
	for _, r := range s {
		switch r {
		case '\\':
			b.WriteString(`\\`)
		case '\'':
			b.WriteString(`\'`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			if r < 0x20 || r == 0x7f {
				fmt.Fprintf(&b, `\x%02x`, r)
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('\'')
	return b.String()
}

// PyStr is pyStr for other packages that generate code.
func PyStr(s string) string { return pyStr(s) }

type params struct {
	m   map[string]any
	scr Screen
}

func (p params) number(k string) (float64, bool, error) {
	v, ok := p.m[k]
	if !ok || v == nil {
		return 0, false, nil
	}
	var f float64
	switch n := v.(type) {
	case float64:
		f = n
	case int:
		f = float64(n)
	case json.Number:
		var err error
		if f, err = n.Float64(); err != nil {
			return 0, false, fmt.Errorf("%s: not a number", k)
		}
	case string:
		var err error
		if f, err = strconv.ParseFloat(strings.TrimSpace(n), 64); err != nil {
			return 0, false, fmt.Errorf("%s: not a number: %q", k, n)
		}
	default:
		return 0, false, fmt.Errorf("%s: not a number", k)
	}
	if math.IsNaN(f) || math.IsInf(f, 0) || math.Abs(f) > MaxCoordAbs {
		return 0, false, fmt.Errorf("%s out of range", k)
	}
	return f, true, nil
}

func (p params) integer(k string) (int, bool, error) {
	f, ok, err := p.number(k)
	return int(math.Round(f)), ok, err
}

// point reads x and y. Both or neither must be given; required says which.
// Coordinates outside the screen are an error (OSWorld's x∈[0,W], y∈[0,H]).
func (p params) point(required bool) (int, int, error) {
	x, okx, err := p.integer("x")
	if err != nil {
		return 0, 0, err
	}
	y, oky, err := p.integer("y")
	if err != nil {
		return 0, 0, err
	}
	if okx != oky {
		return 0, 0, fmt.Errorf("x and y must be given together")
	}
	if !okx {
		if required {
			return 0, 0, fmt.Errorf("x and y are required")
		}
		return -1, -1, nil
	}
	if p.scr.Width > 0 && (x < 0 || y < 0 || x > p.scr.Width || y > p.scr.Height) {
		return 0, 0, fmt.Errorf("point (%d, %d) outside the %dx%d screen", x, y, p.scr.Width, p.scr.Height)
	}
	return x, y, nil
}

func (p params) button() (string, error) {
	v, ok := p.m["button"]
	if !ok || v == nil {
		return "", nil
	}
	s, _ := v.(string)
	switch s {
	case "left", "right", "middle":
		return s, nil
	}
	return "", fmt.Errorf("button must be left, right or middle, got %v", v)
}

// ToProto converts an action for the API.
func ToProto(a Action) *rmv1.Action {
	pa := &rmv1.Action{ActionType: a.Type, Code: a.Code}
	if len(a.Params) > 0 || a.Answer != "" {
		m := map[string]any{}
		for k, v := range a.Params {
			m[k] = v
		}
		if a.Answer != "" {
			m["answer"] = a.Answer
		}
		b, _ := json.Marshal(m)
		pa.ParametersJson = string(b)
	}
	if a.Tool != nil {
		pa.ToolCall = &rmv1.ToolCall{Id: a.Tool.ID, Name: a.Tool.Name, ArgumentsJson: a.Tool.Arguments}
	}
	return pa
}

// NeedsPaste reports whether pyautogui.typewrite would lose some of text:
// it presses one key per character and silently skips characters that are
// no key of a US keyboard, which is every character outside ASCII.
func NeedsPaste(text string) bool {
	for _, r := range text {
		if r > 0x7e {
			return true
		}
	}
	return false
}

// PasteCode is the pyautogui code that types text through the clipboard,
// as OSWorld's UI-TARS agents type: pyperclip.copy, then ctrl+v. The text
// is escaped to ASCII so that the guest's locale cannot garble the
// command line.
func PasteCode(text string) string {
	var b strings.Builder
	for _, r := range pyStr(text) {
		switch {
		case r <= 0x7e:
			b.WriteRune(r)
		case r <= 0xffff:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			fmt.Fprintf(&b, `\U%08x`, r)
		}
	}
	return "import pyperclip; pyperclip.copy(" + b.String() + "); pyautogui.hotkey('ctrl', 'v'); time.sleep(0.5)"
}

// OSWorldDict is the action as OSWorld's traj.jsonl records it: the code
// string for pyautogui actions, the verb for WAIT/DONE/FAIL, the dict for
// computer_13 actions.
func (a Action) OSWorldDict() any {
	switch a.Type {
	case TypeCode:
		return a.Code
	case TypeWait, TypeDone, TypeFail:
		if len(a.Params) == 0 {
			return a.Type
		}
	case TypeTool:
		return map[string]any{"action_type": "TOOL", "name": a.Tool.Name, "arguments": a.Tool.Arguments}
	}
	d := map[string]any{"action_type": a.Type}
	if len(a.Params) > 0 {
		d["parameters"] = a.Params
	}
	return d
}
