// Package uitars parses UI-TARS answers (reference §7): a
// "Thought: ... Action: ..." text whose action calls are Python-like with
// keyword string arguments. Version 1.0 gives coordinates on a 0-1000
// relative grid; 1.5 gives absolute pixels in the smart-resized image.
// Actions come out as computer_13 actions where one fits (so desktopd runs
// them natively), each with the pyautogui code OSWorld's
// parsing_response_to_pyautogui_code would run.
package uitars

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/rolloutmesh/rolloutmesh/services/runner/internal/action"
)

// Version selects the coordinate convention.
type Version int

// The UI-TARS versions.
const (
	V1  Version = 1 // qwen2vl: relative coordinates on a 0-1000 grid
	V15 Version = 2 // qwen25vl: absolute pixels in the smart-resized image
)

// MaxInput bounds the answer size the parser looks at.
const MaxInput = 256 << 10

// Parsed is a parsed answer.
type Parsed struct {
	Thought string
	Actions []action.Action
}

var thinkRe = regexp.MustCompile(`(?s)^\s*<think>.*?</think>`)

// Parse parses one answer for a screen (the screenshot as sent, which the
// runner does not downscale, so image and screen sizes are equal).
func Parse(text string, v Version, scr action.Screen) (Parsed, error) {
	if len(text) > MaxInput {
		return Parsed{}, fmt.Errorf("answer longer than %d bytes", MaxInput)
	}
	if scr.Width <= 0 || scr.Height <= 0 {
		return Parsed{}, fmt.Errorf("screen size unknown")
	}
	text = thinkRe.ReplaceAllString(text, "")
	idx := strings.LastIndex(text, "Action:")
	if idx < 0 {
		return Parsed{}, fmt.Errorf(`no "Action:" in the answer`)
	}
	var p Parsed
	head := text[:idx]
	for _, k := range []string{"Thought:", "Action_Summary:", "Reflection:"} {
		if i := strings.Index(head, k); i >= 0 {
			p.Thought = strings.TrimSpace(head[i+len(k):])
			break
		}
	}
	body := strings.TrimSpace(text[idx+len("Action:"):])
	if body == "" {
		return Parsed{}, fmt.Errorf(`empty "Action:"`)
	}
	for _, callText := range splitCalls(body) {
		name, args, err := parseCall(callText)
		if err != nil {
			return Parsed{}, err
		}
		acts, err := convert(name, args, v, scr)
		if err != nil {
			return Parsed{}, err
		}
		p.Actions = append(p.Actions, acts...)
		if len(p.Actions) > action.MaxActions {
			return Parsed{}, fmt.Errorf("more than %d actions", action.MaxActions)
		}
	}
	if len(p.Actions) == 0 {
		return Parsed{}, fmt.Errorf("no action in the answer")
	}
	return p, nil
}

// splitCalls splits the action text on blank lines outside quotes.
func splitCalls(s string) []string {
	var out []string
	var cur strings.Builder
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == '\\' && i+1 < len(s) {
				cur.WriteByte(c)
				i++
				c = s[i]
			} else if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '\n' && i+1 < len(s) && s[i+1] == '\n':
			if t := strings.TrimSpace(cur.String()); t != "" {
				out = append(out, t)
			}
			cur.Reset()
			i++
			continue
		}
		cur.WriteByte(c)
	}
	if t := strings.TrimSpace(cur.String()); t != "" {
		out = append(out, t)
	}
	return out
}

var identRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*`)

// parseCall parses name(k='v', ...): keyword arguments with string values.
func parseCall(s string) (string, map[string]string, error) {
	s = strings.TrimSpace(s)
	name := identRe.FindString(s)
	if name == "" {
		return "", nil, fmt.Errorf("action %q: want name(arg='value', ...)", clip(s))
	}
	rest := strings.TrimSpace(s[len(name):])
	if strings.HasPrefix(rest, "(") && !strings.HasSuffix(rest, ")") {
		// UI-TARS sometimes stops before the call's closing parenthesis
		// (click(start_box='(100,200)'); the reference parser closes it.
		rest += ")"
	}
	if !strings.HasPrefix(rest, "(") || !strings.HasSuffix(rest, ")") {
		return "", nil, fmt.Errorf("action %q: want name(arg='value', ...)", clip(s))
	}
	inner := rest[1 : len(rest)-1]
	args := map[string]string{}
	i := 0
	for {
		for i < len(inner) && (inner[i] == ' ' || inner[i] == ',' || inner[i] == '\n' || inner[i] == '\t') {
			i++
		}
		if i >= len(inner) {
			break
		}
		key := identRe.FindString(inner[i:])
		if key == "" {
			return "", nil, fmt.Errorf("action %s: bad argument list", name)
		}
		i += len(key)
		for i < len(inner) && inner[i] == ' ' {
			i++
		}
		if i >= len(inner) || inner[i] != '=' {
			return "", nil, fmt.Errorf("action %s: argument %s needs =", name, key)
		}
		i++
		for i < len(inner) && inner[i] == ' ' {
			i++
		}
		if i >= len(inner) || (inner[i] != '\'' && inner[i] != '"') {
			return "", nil, fmt.Errorf("action %s: argument %s must be a quoted string", name, key)
		}
		val, n, ok := unquote(inner[i:])
		if !ok {
			// UI-TARS often leaves quotes unescaped inside content: take
			// everything up to the last quote, as the upstream parser does.
			if key == "content" {
				q := inner[i]
				last := strings.LastIndexByte(inner, q)
				if last > i {
					args[key] = unescape(inner[i+1 : last])
					break
				}
			}
			return "", nil, fmt.Errorf("action %s: unterminated string in %s", name, key)
		}
		args[key] = val
		i += n
	}
	return name, args, nil
}

// unquote reads a Python string literal at the start of s and returns its
// value and length.
func unquote(s string) (string, int, bool) {
	q := s[0]
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		c := s[i]
		if c == '\\' && i+1 < len(s) {
			i++
			b.WriteString(escape(s[i]))
			continue
		}
		if c == q {
			// A closing quote must end the argument.
			rest := strings.TrimLeft(s[i+1:], " \n\t")
			if rest == "" || rest[0] == ',' {
				return b.String(), i + 1, true
			}
			return "", 0, false
		}
		b.WriteByte(c)
	}
	return "", 0, false
}

// escape is the text of the escape sequence of a backslash and c. The
// byte is kept as it is: string(c) would make a character of it, which
// split the UTF-8 of a non-ASCII character after a backslash.
func escape(c byte) string {
	switch c {
	case 'n':
		return "\n"
	case 't':
		return "\t"
	case 'r':
		return "\r"
	}
	return string([]byte{c})
}

func unescape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
			b.WriteString(escape(s[i]))
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

var numRe = regexp.MustCompile(`-?\d+(?:\.\d+)?`)

// SmartResize is Qwen2.5-VL's smart_resize: each side rounded to a
// multiple of 28 with the pixel count kept within [100·28², 16384·28²].
func SmartResize(height, width int) (int, int) {
	const factor, minPixels, maxPixels = 28, 100 * 28 * 28, 16384 * 28 * 28
	roundBy := func(n float64) int { return int(math.RoundToEven(n/factor)) * factor }
	floorBy := func(n float64) int { return int(math.Floor(n/factor)) * factor }
	ceilBy := func(n float64) int { return int(math.Ceil(n/factor)) * factor }
	h, w := float64(height), float64(width)
	hb, wb := max(factor, roundBy(h)), max(factor, roundBy(w))
	if hb*wb > maxPixels {
		beta := math.Sqrt(h * w / maxPixels)
		hb, wb = max(factor, floorBy(h/beta)), max(factor, floorBy(w/beta))
	} else if hb*wb < minPixels {
		beta := math.Sqrt(minPixels / (h * w))
		hb, wb = ceilBy(h*beta), ceilBy(w*beta)
	}
	return hb, wb
}

// point converts a box or point argument into screen pixels (box centre).
func point(s string, v Version, scr action.Screen) (int, int, error) {
	nums := numRe.FindAllString(s, 5)
	if len(nums) != 2 && len(nums) != 4 {
		return 0, 0, fmt.Errorf("coordinates %q: want (x,y) or (x1,y1,x2,y2)", clip(s))
	}
	f := make([]float64, len(nums))
	for i, n := range nums {
		x, err := strconv.ParseFloat(n, 64)
		if err != nil || math.IsInf(x, 0) || math.Abs(x) > 1e6 {
			return 0, 0, fmt.Errorf("coordinates %q: bad number", clip(s))
		}
		f[i] = x
	}
	x, y := f[0], f[1]
	if len(f) == 4 {
		x, y = (f[0]+f[2])/2, (f[1]+f[3])/2
	}
	dx, dy := 1000.0, 1000.0
	if v == V15 {
		h, w := SmartResize(scr.Height, scr.Width)
		dx, dy = float64(w), float64(h)
	}
	// Full precision to the pixel: rounding the normalised value to 3
	// decimals first moved points by up to 1.24 px on a 1920-wide screen.
	px := int(math.Round(x / dx * float64(scr.Width)))
	py := int(math.Round(y / dy * float64(scr.Height)))
	px = min(max(px, 0), scr.Width)
	py = min(max(py, 0), scr.Height)
	return px, py, nil
}

func boxArg(args map[string]string, names ...string) (string, bool) {
	for _, n := range names {
		if s, ok := args[n]; ok {
			return s, true
		}
	}
	return "", false
}

func c13(scr action.Screen, typ string, params map[string]any) (action.Action, error) {
	return action.Normalize(action.Action{Type: typ, Params: params}, scr)
}

// keyMap is UI-TARS 1.5's key renaming.
var keyMap = map[string]string{"arrowleft": "left", "arrowright": "right", "arrowup": "up", "arrowdown": "down", "space": "space"}

func keyName(k string) string {
	k = strings.ToLower(strings.TrimSpace(k))
	if m, ok := keyMap[k]; ok {
		return m
	}
	return k
}

// convert maps one UI-TARS call to actions.
func convert(name string, args map[string]string, v Version, scr action.Screen) ([]action.Action, error) {
	at := func(names ...string) (int, int, error) {
		s, ok := boxArg(args, names...)
		if !ok {
			return 0, 0, fmt.Errorf("%s needs %s", name, names[0])
		}
		return point(s, v, scr)
	}
	one := func(a action.Action, err error) ([]action.Action, error) {
		if err != nil {
			return nil, err
		}
		return []action.Action{a}, nil
	}
	switch name {
	case "click", "left_single", "right_single", "left_double", "hover":
		x, y, err := at("start_box", "point")
		if err != nil {
			return nil, err
		}
		switch name {
		case "click", "left_single":
			return one(c13(scr, "CLICK", map[string]any{"button": "left", "x": x, "y": y}))
		case "right_single":
			return one(c13(scr, "CLICK", map[string]any{"button": "right", "x": x, "y": y}))
		case "left_double":
			return one(c13(scr, "DOUBLE_CLICK", map[string]any{"x": x, "y": y}))
		default:
			return one(c13(scr, "MOVE_TO", map[string]any{"x": x, "y": y}))
		}
	case "drag", "select":
		sx, sy, err := at("start_box", "start_point")
		if err != nil {
			return nil, err
		}
		ex, ey, err := at("end_box", "end_point")
		if err != nil {
			return nil, err
		}
		a1, err := c13(scr, "MOVE_TO", map[string]any{"x": sx, "y": sy})
		if err != nil {
			return nil, err
		}
		a2, err := c13(scr, "DRAG_TO", map[string]any{"x": ex, "y": ey})
		if err != nil {
			return nil, err
		}
		return []action.Action{a1, a2}, nil
	case "scroll":
		dir := strings.ToLower(args["direction"])
		var out []action.Action
		if _, ok := boxArg(args, "start_box", "point"); ok {
			x, y, err := at("start_box", "point")
			if err != nil {
				return nil, err
			}
			a, err := c13(scr, "MOVE_TO", map[string]any{"x": x, "y": y})
			if err != nil {
				return nil, err
			}
			out = append(out, a)
		}
		var p map[string]any
		switch dir {
		case "up":
			p = map[string]any{"dy": 5}
		case "down":
			p = map[string]any{"dy": -5}
		case "left":
			p = map[string]any{"dx": -5}
		case "right":
			p = map[string]any{"dx": 5}
		default:
			return nil, fmt.Errorf("scroll direction must be up, down, left or right, got %q", dir)
		}
		a, err := c13(scr, "SCROLL", p)
		if err != nil {
			return nil, err
		}
		return append(out, a), nil
	case "hotkey":
		ks := strings.Fields(args["key"])
		if len(ks) == 0 {
			ks = strings.Fields(args["hotkey"])
		}
		if len(ks) == 0 {
			return nil, fmt.Errorf("hotkey needs key")
		}
		keys := make([]any, len(ks))
		for i, k := range ks {
			keys[i] = keyName(k)
		}
		if len(keys) == 1 {
			return one(c13(scr, "PRESS", map[string]any{"key": keys[0]}))
		}
		return one(c13(scr, "HOTKEY", map[string]any{"keys": keys}))
	case "press", "keydown", "keyup", "release":
		k := keyName(firstNonEmpty(args["key"], args["press"], args["keydown"], args["keyup"]))
		typ := map[string]string{"press": "PRESS", "keydown": "KEY_DOWN", "keyup": "KEY_UP", "release": "KEY_UP"}[name]
		return one(c13(scr, typ, map[string]any{"key": k}))
	case "type":
		content, ok := args["content"]
		if !ok {
			return nil, fmt.Errorf("type needs content")
		}
		submit := strings.HasSuffix(content, "\n")
		content = strings.TrimSuffix(content, "\n")
		var out []action.Action
		if content != "" {
			a, err := c13(scr, "TYPING", map[string]any{"text": content})
			if err != nil {
				return nil, err
			}
			out = append(out, a)
		}
		if submit {
			a, err := c13(scr, "PRESS", map[string]any{"key": "enter"})
			if err != nil {
				return nil, err
			}
			out = append(out, a)
		}
		if len(out) == 0 {
			return []action.Action{{Type: action.TypeWait}}, nil
		}
		return out, nil
	case "wait":
		return []action.Action{{Type: action.TypeWait}}, nil
	case "finished":
		return []action.Action{{Type: action.TypeDone, Answer: args["content"]}}, nil
	case "call_user":
		return []action.Action{{Type: action.TypeFail, CallUser: true}}, nil
	case "error_env":
		return []action.Action{{Type: action.TypeFail}}, nil
	}
	return nil, fmt.Errorf("unknown UI-TARS action %q", name)
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}
