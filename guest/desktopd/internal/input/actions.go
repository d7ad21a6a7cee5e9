package input

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"
)

// Action is one computer_13 action of OSWorld (desktop_env/actions.py),
// validated. Coordinates are optional where OSWorld has them optional.
type Action struct {
	Type    string
	At      *Point
	Button  int
	Clicks  int
	DX, DY  int
	Text    string
	Keys    []string
	Seconds float64
}

// ActionTypes lists the accepted action types.
var ActionTypes = []string{
	"MOVE_TO", "CLICK", "MOUSE_DOWN", "MOUSE_UP", "RIGHT_CLICK", "DOUBLE_CLICK",
	"DRAG_TO", "SCROLL", "TYPING", "PRESS", "KEY_DOWN", "KEY_UP", "HOTKEY",
	"WAIT", "FAIL", "DONE",
}

// ParseAction decodes one action in OSWorld's dict form
// {"action_type": T, "parameters": {...}}, the flat form with the
// parameters beside action_type, or the bare strings "WAIT", "FAIL" and
// "DONE", and checks it against a width×height screen.
func ParseAction(raw json.RawMessage, width, height int) (Action, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return Action{}, fmt.Errorf("bad action string: %v", err)
		}
		switch s {
		case "WAIT", "FAIL", "DONE":
			return Action{Type: s}, nil
		}
		return Action{}, fmt.Errorf("unknown action %q: a string action must be WAIT, FAIL or DONE", s)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return Action{}, fmt.Errorf("an action must be a JSON object or string: %v", err)
	}
	var typ string
	if err := json.Unmarshal(obj["action_type"], &typ); err != nil || typ == "" {
		return Action{}, fmt.Errorf("action_type must be a non-empty string")
	}
	params := map[string]json.RawMessage{}
	if p, ok := obj["parameters"]; ok && string(p) != "null" {
		if err := json.Unmarshal(p, &params); err != nil {
			return Action{}, fmt.Errorf("parameters must be an object: %v", err)
		}
	}
	for k, v := range obj {
		if _, dup := params[k]; !dup && k != "action_type" && k != "parameters" {
			params[k] = v
		}
	}
	p := paramReader{m: params, w: width, h: height}
	a := Action{Type: strings.ToUpper(typ)}
	switch a.Type {
	case "MOVE_TO":
		a.At = p.point(true)
	case "CLICK":
		a.At = p.point(false)
		a.Button = p.button()
		a.Clicks = p.intIn("num_clicks", 1, 1, 3)
	case "MOUSE_DOWN", "MOUSE_UP":
		a.Button = p.button()
		a.At = p.point(false)
	case "RIGHT_CLICK", "DOUBLE_CLICK":
		a.At = p.point(false)
	case "DRAG_TO":
		a.At = p.point(true)
		a.Button = p.button()
	case "SCROLL":
		a.DX = p.intIn("dx", 0, -1000, 1000)
		a.DY = p.intIn("dy", 0, -1000, 1000)
		a.At = p.point(false)
	case "TYPING":
		a.Text = p.str("text", true)
		if len(a.Text) > 1<<20 {
			p.fail("text longer than 1 MiB")
		}
	case "PRESS", "KEY_DOWN", "KEY_UP":
		a.Keys = []string{p.key("key")}
	case "HOTKEY":
		a.Keys = p.keys("keys")
	case "WAIT":
		a.Seconds = p.float("seconds", 0, 0, MaxDuration.Seconds())
	case "FAIL", "DONE":
	default:
		return Action{}, fmt.Errorf("unknown action_type %q (want one of %s)", typ, strings.Join(ActionTypes, ", "))
	}
	if p.err != nil {
		return Action{}, fmt.Errorf("%s: %w", a.Type, p.err)
	}
	return a, nil
}

type paramReader struct {
	m    map[string]json.RawMessage
	w, h int
	err  error
}

func (p *paramReader) fail(format string, args ...any) {
	if p.err == nil {
		p.err = fmt.Errorf(format, args...)
	}
}

func (p *paramReader) number(name string) (float64, bool) {
	raw, ok := p.m[name]
	if !ok || string(raw) == "null" {
		return 0, false
	}
	var f float64
	if err := json.Unmarshal(raw, &f); err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		p.fail("parameter %s must be a number", name)
		return 0, false
	}
	return f, true
}

func (p *paramReader) float(name string, def, min, max float64) float64 {
	f, ok := p.number(name)
	if !ok {
		return def
	}
	if f < min || f > max {
		p.fail("parameter %s=%v out of range [%v, %v]", name, f, min, max)
	}
	return f
}

func (p *paramReader) intIn(name string, def, min, max int) int {
	f, ok := p.number(name)
	if !ok {
		return def
	}
	if f != math.Trunc(f) || f < float64(min) || f > float64(max) {
		p.fail("parameter %s=%v must be an integer in [%d, %d]", name, f, min, max)
		return def
	}
	return int(f)
}

// point reads x and y; both or neither must be present.
func (p *paramReader) point(required bool) *Point {
	x, okx := p.number("x")
	y, oky := p.number("y")
	if !okx && !oky {
		if required {
			p.fail("parameters x and y are required")
		}
		return nil
	}
	if okx != oky {
		p.fail("parameters x and y go together")
		return nil
	}
	pt := Point{int(math.Round(x)), int(math.Round(y))}
	if pt.X < 0 || pt.Y < 0 || pt.X >= p.w || pt.Y >= p.h {
		p.fail("point (%v, %v) is off the %dx%d screen", x, y, p.w, p.h)
		return nil
	}
	return &pt
}

func (p *paramReader) button() int {
	raw, ok := p.m["button"]
	if !ok || string(raw) == "null" {
		return Left
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		p.fail("parameter button must be a string")
		return Left
	}
	b, ok := ButtonByName(s)
	if !ok {
		p.fail("parameter button=%q must be left, right or middle", s)
	}
	return b
}

// ButtonByName maps pyautogui's button names to X buttons.
func ButtonByName(s string) (int, bool) {
	switch strings.ToLower(s) {
	case "left", "primary", "1":
		return Left, true
	case "middle", "2":
		return Middle, true
	case "right", "secondary", "3":
		return Right, true
	}
	return 0, false
}

func (p *paramReader) str(name string, required bool) string {
	raw, ok := p.m[name]
	if !ok || string(raw) == "null" {
		if required {
			p.fail("parameter %s is required", name)
		}
		return ""
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		p.fail("parameter %s must be a string", name)
	}
	return s
}

func (p *paramReader) key(name string) string {
	k := p.str(name, true)
	if _, ok := KeyKeysym(k); !ok && p.err == nil {
		p.fail("parameter %s=%q is not a key name", name, k)
	}
	return k
}

func (p *paramReader) keys(name string) []string {
	raw, ok := p.m[name]
	var ks []string
	if !ok || json.Unmarshal(raw, &ks) != nil || len(ks) == 0 || len(ks) > 16 {
		p.fail("parameter %s must be a list of 1 to 16 key names", name)
		return nil
	}
	for _, k := range ks {
		if _, ok := KeyKeysym(k); !ok {
			p.fail("%q in %s is not a key name", k, name)
		}
	}
	return ks
}

// Perform runs one validated action, none once ctx has ended.
func (a *Actor) Perform(ctx context.Context, act Action) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	switch act.Type {
	case "MOVE_TO":
		return a.MoveTo(ctx, *act.At, 0)
	case "CLICK":
		return a.Click(ctx, act.At, act.Button, act.Clicks, 0)
	case "MOUSE_DOWN":
		return a.ButtonDown(ctx, act.At, act.Button)
	case "MOUSE_UP":
		return a.ButtonUp(ctx, act.At, act.Button)
	case "RIGHT_CLICK":
		return a.Click(ctx, act.At, Right, 1, 0)
	case "DOUBLE_CLICK":
		return a.Click(ctx, act.At, Left, 2, 0)
	case "DRAG_TO":
		// OSWorld drags over one second; a quarter is enough for toolkits
		// to see the motion and keeps episodes quick.
		return a.DragTo(ctx, *act.At, 250*time.Millisecond, act.Button)
	case "SCROLL":
		return a.Scroll(ctx, act.At, act.DX, act.DY)
	case "TYPING":
		return a.Type(ctx, act.Text, 0)
	case "PRESS":
		return a.Press(ctx, act.Keys, 1, 0)
	case "KEY_DOWN":
		return a.KeyDown(ctx, act.Keys...)
	case "KEY_UP":
		return a.KeyUp(ctx, act.Keys...)
	case "HOTKEY":
		return a.Hotkey(ctx, act.Keys, 0)
	case "WAIT":
		return a.Sleep(ctx, time.Duration(act.Seconds*float64(time.Second)))
	case "FAIL", "DONE":
		return nil
	}
	return fmt.Errorf("unknown action type %q", act.Type)
}
