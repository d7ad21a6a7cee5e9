package ui

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"

	pb "github.com/rolloutmesh/rolloutmesh/proto/rolloutmesh/v1"
)

// Marker is one action drawn on a step's screenshot, in the screenshot's
// pixel coordinates: a dot for a click, an arrow for a drag, a label for
// typed text or keys.
type Marker struct {
	// Kind is "click", "move", "drag", "text" or "scroll".
	Kind string
	// X, Y is where the action happens (the drag's end); HasPoint is false
	// for text typed where no pointer position is known.
	X, Y     float64
	HasPoint bool
	// FromX, FromY is where a drag starts.
	FromX, FromY float64
	// Label is the button, typed text or keys.
	Label string
}

// maxMarkers bounds what one step draws: a model answer may hold
// thousands of pyautogui calls.
const maxMarkers = 32

// maxLabel bounds a label's runes; the full text is in the parsed action.
const maxLabel = 80

// markers turns a step's parsed actions into markers. It understands
// computer_13 actions (x, y parameters) and pyautogui code; anything else
// draws nothing. It never fails: an action it cannot read is skipped.
func markers(actions []*pb.Action) []Marker {
	var out []Marker
	var cur struct {
		x, y float64
		ok   bool
	}
	add := func(m Marker) {
		if len(out) < maxMarkers {
			if len([]rune(m.Label)) > maxLabel {
				m.Label = string([]rune(m.Label)[:maxLabel-1]) + "…"
			}
			out = append(out, m)
		}
	}
	point := func(kind string, x, y float64, label string) {
		if kind == "drag" && cur.ok {
			add(Marker{Kind: "drag", FromX: cur.x, FromY: cur.y, X: x, Y: y, HasPoint: true, Label: label})
		} else {
			if kind == "drag" {
				kind = "click"
			}
			add(Marker{Kind: kind, X: x, Y: y, HasPoint: true, Label: label})
		}
		cur.x, cur.y, cur.ok = x, y, true
	}
	text := func(kind, s string) {
		add(Marker{Kind: kind, X: cur.x, Y: cur.y, HasPoint: cur.ok, Label: s})
	}
	// The step's actions may be megabytes and a page draws 50 steps: what
	// is read is bounded per step, not per action.
	budget, calls := maxScan, maxMarkers*2
	take := func(s string) string {
		s = s[:min(len(s), max(budget, 0))]
		budget -= len(s)
		return s
	}
	for _, a := range actions {
		if len(out) >= maxMarkers || budget <= 0 || calls <= 0 {
			break
		}
		switch t := strings.ToUpper(a.GetActionType()); t {
		case "CODE":
			code := take(a.GetCode())
			found, matched := pyCalls(code, calls)
			calls -= matched
			for _, c := range found {
				switch c.fn {
				case "click", "leftClick", "doubleClick", "tripleClick", "rightClick", "middleClick", "mouseDown", "mouseUp":
					if x, y, ok := c.point(); ok {
						label := c.fn
						if c.fn == "click" || c.fn == "leftClick" {
							label = ""
						}
						point("click", x, y, label)
					}
				case "moveTo":
					if x, y, ok := c.point(); ok {
						point("move", x, y, "")
					}
				case "dragTo":
					if x, y, ok := c.point(); ok {
						point("drag", x, y, "")
					}
				case "write", "typewrite":
					if s, ok := c.str(0, "message"); ok {
						text("text", s)
					}
				case "press", "hotkey", "keyDown":
					text("text", "⌨ "+strings.Join(c.strs(), "+"))
				case "scroll", "hscroll", "vscroll":
					if x, y, ok := c.pointAt(1); ok {
						point("scroll", x, y, "scroll "+c.first())
					} else {
						text("scroll", "scroll "+c.first())
					}
				}
			}
		case "CLICK", "RIGHT_CLICK", "DOUBLE_CLICK", "MOUSE_DOWN", "MOUSE_UP", "MOVE_TO", "DRAG_TO", "TYPING",
			"PRESS", "HOTKEY", "KEY_DOWN", "KEY_UP", "SCROLL":
			var p map[string]any
			if params := a.GetParametersJson(); len(params) <= budget {
				_ = json.Unmarshal([]byte(take(params)), &p)
			} else {
				budget = 0 // a cut document would not parse
			}
			x, okx := num(p["x"])
			y, oky := num(p["y"])
			has := okx && oky
			switch t {
			case "CLICK", "RIGHT_CLICK", "DOUBLE_CLICK", "MOUSE_DOWN", "MOUSE_UP":
				if has {
					label := ""
					if t != "CLICK" {
						label = strings.ToLower(t)
					}
					point("click", x, y, label)
				}
			case "MOVE_TO":
				if has {
					point("move", x, y, "")
				}
			case "DRAG_TO":
				if has {
					point("drag", x, y, "")
				}
			case "TYPING":
				if s, ok := p["text"].(string); ok {
					text("text", s)
				}
			case "PRESS", "HOTKEY", "KEY_DOWN", "KEY_UP":
				text("text", "⌨ "+keys(p))
			case "SCROLL":
				text("scroll", "scroll")
			}
		}
	}
	return out
}

func num(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	}
	return 0, false
}

func keys(p map[string]any) string {
	switch k := p["keys"].(type) {
	case []any:
		var s []string
		for _, v := range k {
			if str, ok := v.(string); ok {
				s = append(s, str)
			}
		}
		return strings.Join(s, "+")
	case string:
		return k
	}
	if k, ok := p["key"].(string); ok {
		return k
	}
	return ""
}

// pyCall is one pyautogui.<fn>(...) call of a code action, its arguments
// split at top-level commas.
type pyCall struct {
	fn         string
	positional []string
	named      map[string]string
}

var pyCallRE = regexp.MustCompile(`pyautogui\.([A-Za-z]+)\(`)

// maxScan bounds the code and parameters one step's markers read.
const maxScan = 64 << 10

// maxArgs bounds the text read for one call's arguments: they are numbers
// and short strings, and an unclosed call must not read to the end.
const maxArgs = 4 << 10

// pyCalls finds up to limit pyautogui calls of code, in order, and how
// many it matched (calls whose arguments do not parse are skipped). Only
// literal arguments are understood; a call with expressions yields what
// it can.
func pyCalls(code string, limit int) ([]pyCall, int) {
	if limit <= 0 {
		return nil, 0
	}
	var out []pyCall
	matches := pyCallRE.FindAllStringSubmatchIndex(code, limit)
	for _, m := range matches {
		fn := code[m[2]:m[3]]
		args, ok := splitArgs(code[m[1]:min(len(code), m[1]+maxArgs)])
		if !ok {
			continue
		}
		c := pyCall{fn: fn, named: map[string]string{}}
		for _, a := range args {
			if k, v, ok := strings.Cut(a, "="); ok && isIdent(strings.TrimSpace(k)) && !strings.HasPrefix(strings.TrimSpace(v), "=") {
				c.named[strings.TrimSpace(k)] = strings.TrimSpace(v)
				continue
			}
			c.positional = append(c.positional, strings.TrimSpace(a))
		}
		out = append(out, c)
	}
	return out, len(matches)
}

// splitArgs splits the text after "(" up to its matching ")" at top-level
// commas, minding string literals and brackets.
func splitArgs(s string) ([]string, bool) {
	var args []string
	depth, start := 0, 0
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		if quote != 0 {
			switch c {
			case '\\':
				i++
			case quote:
				quote = 0
			}
			continue
		}
		switch c {
		case '\'', '"':
			quote = c
		case '(', '[', '{':
			depth++
		case ')', ']', '}':
			if depth == 0 {
				if a := strings.TrimSpace(s[start:i]); a != "" {
					args = append(args, a)
				}
				return args, true
			}
			depth--
		case ',':
			if depth == 0 {
				args = append(args, s[start:i])
				start = i + 1
			}
		}
	}
	return nil, false
}

func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

func (c pyCall) arg(i int, name string) (string, bool) {
	if v, ok := c.named[name]; ok {
		return v, true
	}
	if i < len(c.positional) {
		return c.positional[i], true
	}
	return "", false
}

func (c pyCall) point() (float64, float64, bool) { return c.pointAt(0) }

// pointAt reads x and y from positional arguments i and i+1 or x=, y=.
func (c pyCall) pointAt(i int) (float64, float64, bool) {
	xs, okx := c.arg(i, "x")
	ys, oky := c.arg(i+1, "y")
	if !okx || !oky {
		return 0, 0, false
	}
	x, err1 := strconv.ParseFloat(xs, 64)
	y, err2 := strconv.ParseFloat(ys, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return x, y, true
}

func (c pyCall) str(i int, name string) (string, bool) {
	v, ok := c.arg(i, name)
	if !ok {
		return "", false
	}
	return pyString(v)
}

func (c pyCall) first() string {
	if len(c.positional) > 0 {
		return c.positional[0]
	}
	return ""
}

// strs returns the string literals among the arguments (keys of hotkey,
// press's key or list of keys).
func (c pyCall) strs() []string {
	var out []string
	for _, a := range c.positional {
		a = strings.Trim(a, "[]")
		for _, part := range strings.Split(a, ",") {
			if s, ok := pyString(strings.TrimSpace(part)); ok {
				out = append(out, s)
			}
		}
	}
	return out
}

// pyString reads a Python string literal with the common escapes.
func pyString(v string) (string, bool) {
	v = strings.TrimLeft(v, "rRuU")
	if len(v) < 2 || (v[0] != '\'' && v[0] != '"') || v[len(v)-1] != v[0] {
		return "", false
	}
	body := v[1 : len(v)-1]
	var b strings.Builder
	for i := 0; i < len(body); i++ {
		if body[i] != '\\' || i+1 == len(body) {
			b.WriteByte(body[i])
			continue
		}
		i++
		switch body[i] {
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		default:
			b.WriteByte(body[i])
		}
	}
	return b.String(), true
}
