package pyautogui

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/rolloutmesh/rolloutmesh/guest/desktopd/internal/input"
)

// Values of the subset: int64, float64, string, bool, none, []value
// (tuples and lists), module, function and tween.
type value any

type none struct{}

type module struct{ name string }

type function struct{ qual string } // "pyautogui.click", "time.sleep", "print"

// tween stands for pyautogui.easeInQuad and friends; motion is linear.
type tween struct{}

// pythonError is a Python-level error (TypeError, NameError...) found while
// checking the program; real Python would raise it when the line runs.
type pythonError struct {
	Line, Col int
	Kind, Msg string
}

func (e *pythonError) Error() string {
	return fmt.Sprintf("%s: %s (line %d, column %d)", e.Kind, e.Msg, e.Line, e.Col)
}

func pyErr(n interface{ at() (int, int) }, kind, format string, args ...any) error {
	l, c := n.at()
	return &pythonError{Line: l, Col: c, Kind: kind, Msg: fmt.Sprintf(format, args...)}
}

// Program is checked code, ready to run.
type Program struct {
	ops []op
}

type op struct {
	fn   string
	args map[string]value
	line int
	// pause after the call, as pyautogui.PAUSE does; set at compile time
	// because pyautogui.PAUSE assignments are statements in order.
	pause time.Duration
}

// known functions and their parameters in pyautogui's order, with
// defaults. Parameters starting with '*' take the remaining positionals.
type param struct {
	name string
	def  value
}

var (
	xy       = []param{{"x", none{}}, {"y", none{}}}
	tail     = []param{{"tween", tween{}}, {"logScreenshot", none{}}, {"_pause", true}}
	sigClick = cat(xy, []param{{"clicks", int64(1)}, {"interval", 0.0}, {"button", "primary"}, {"duration", 0.0}}, tail)
	sigMulti = cat(xy, []param{{"interval", 0.0}, {"button", "left"}, {"duration", 0.0}}, tail)
	sigOne   = cat(xy, []param{{"duration", 0.0}}, tail)
	sigMove  = cat(xy, []param{{"duration", 0.0}}, tail)
	sigRel   = cat([]param{{"xOffset", none{}}, {"yOffset", none{}}, {"duration", 0.0}}, tail)
	sigDrag  = cat(xy, []param{{"duration", 0.0}, {"tween", tween{}}, {"button", "primary"}, {"logScreenshot", none{}}, {"_pause", true}, {"mouseDownUp", true}})
	sigDragR = cat([]param{{"xOffset", int64(0)}, {"yOffset", int64(0)}, {"duration", 0.0}, {"tween", tween{}}, {"button", "primary"}, {"logScreenshot", none{}}, {"_pause", true}, {"mouseDownUp", true}})
	sigBtn   = cat(xy, []param{{"button", "primary"}, {"duration", 0.0}}, tail)
	sigScr   = []param{{"clicks", nil}, {"x", none{}}, {"y", none{}}, {"logScreenshot", none{}}, {"_pause", true}}
	sigWrite = []param{{"message", nil}, {"interval", 0.0}, {"logScreenshot", none{}}, {"_pause", true}}
	sigPress = []param{{"keys", nil}, {"presses", int64(1)}, {"interval", 0.0}, {"logScreenshot", none{}}, {"_pause", true}}
	sigKey   = []param{{"key", nil}, {"logScreenshot", none{}}, {"_pause", true}}
	sigHot   = []param{{"*args", nil}, {"interval", 0.0}, {"logScreenshot", none{}}, {"_pause", true}}
	sigSleep = []param{{"seconds", nil}}
	sigCopy  = []param{{"text", nil}}
	sigPrint = []param{{"*args", nil}, {"sep", " "}, {"end", "\n"}}
)

func cat(ps ...[]param) []param {
	var out []param
	for _, p := range ps {
		out = append(out, p...)
	}
	return out
}

var functions = map[string][]param{
	"pyautogui.click": sigClick, "pyautogui.doubleClick": sigMulti, "pyautogui.tripleClick": sigMulti,
	"pyautogui.rightClick": sigOne, "pyautogui.middleClick": sigOne, "pyautogui.leftClick": sigOne,
	"pyautogui.moveTo": sigMove, "pyautogui.moveRel": sigRel, "pyautogui.move": sigRel,
	"pyautogui.dragTo": sigDrag, "pyautogui.dragRel": sigDragR, "pyautogui.drag": sigDragR,
	"pyautogui.mouseDown": sigBtn, "pyautogui.mouseUp": sigBtn,
	"pyautogui.scroll": sigScr, "pyautogui.vscroll": sigScr, "pyautogui.hscroll": sigScr,
	"pyautogui.typewrite": sigWrite, "pyautogui.write": sigWrite,
	"pyautogui.press": sigPress, "pyautogui.keyDown": sigKey, "pyautogui.keyUp": sigKey,
	"pyautogui.hotkey": sigHot, "pyautogui.sleep": sigSleep,
	"time.sleep": sigSleep, "pyperclip.copy": sigCopy, "print": sigPrint,
}

// Compile parses src and checks every statement without running anything.
// Errors are *SyntaxError, *Unsupported or a Python-level error (a
// TypeError, NameError or ValueError that real Python would raise).
func Compile(src string) (*Program, error) {
	stmts, err := parse(src)
	if err != nil {
		return nil, err
	}
	c := &compiler{env: map[string]value{"print": function{"print"}}, pause: 100 * time.Millisecond}
	for _, s := range stmts {
		if err := c.stmt(s); err != nil {
			return nil, err
		}
	}
	return &Program{ops: c.ops}, nil
}

type compiler struct {
	// strBytes counts the bytes of strings built by operators, so that a
	// small program cannot allocate without bound.
	strBytes int
	env      map[string]value
	ops      []op
	pause    time.Duration
}

var importable = map[string]bool{"pyautogui": true, "time": true, "pyperclip": true}

func (c *compiler) stmt(s stmt) error {
	switch s := s.(type) {
	case *passStmt:
		return nil
	case *importStmt:
		for _, n := range s.names {
			if !importable[n.module] {
				return pyUnsupported(s, "import of module %s", n.module)
			}
			c.env[n.alias] = module{n.module}
		}
		return nil
	case *assignStmt:
		v, err := c.eval(s.value)
		if err != nil {
			return err
		}
		for _, t := range s.targets {
			if err := c.assign(t, v); err != nil {
				return err
			}
		}
		return nil
	case *exprStmt:
		if cl, ok := s.x.(*call); ok {
			return c.call(cl)
		}
		// A bare literal or name (a docstring, say) has no effect, but
		// evaluate it for NameErrors.
		_, err := c.eval(s.x)
		return err
	}
	return pyUnsupported(s, "statement")
}

func pyUnsupported(n interface{ at() (int, int) }, format string, args ...any) error {
	l, col := n.at()
	return &Unsupported{Line: l, Col: col, What: fmt.Sprintf(format, args...)}
}

func (c *compiler) assign(t expr, v value) error {
	switch t := t.(type) {
	case *nameRef:
		c.env[t.name] = v
		return nil
	case *attrRef:
		m, err := c.eval(t.x)
		if err != nil {
			return err
		}
		if mod, ok := m.(module); ok && mod.name == "pyautogui" {
			switch t.name {
			case "FAILSAFE", "MINIMUM_DURATION", "MINIMUM_SLEEP", "DARWIN_CATCH_UP_TIME", "LOG_SCREENSHOTS":
				return nil // no effect here: there is no corner to fail safe into
			case "PAUSE":
				f, ok := number(v)
				if !ok || f < 0 {
					return pyErr(t, "TypeError", "pyautogui.PAUSE must be a non-negative number")
				}
				c.pause = seconds(f)
				return nil
			}
		}
		return pyUnsupported(t, "assignment to attribute %s", t.name)
	case *sequence:
		vs, ok := v.([]value)
		if !ok {
			return pyErr(t, "TypeError", "cannot unpack non-iterable %s object", typeName(v))
		}
		if len(vs) != len(t.elems) {
			return pyErr(t, "ValueError", "expected %d values to unpack, got %d", len(t.elems), len(vs))
		}
		for i, e := range t.elems {
			if err := c.assign(e, vs[i]); err != nil {
				return err
			}
		}
		return nil
	}
	return pyUnsupported(t, "assignment target")
}

func typeName(v value) string {
	switch v.(type) {
	case int64, *big.Int:
		return "int"
	case float64:
		return "float"
	case string:
		return "str"
	case bool:
		return "bool"
	case none:
		return "NoneType"
	case []value:
		return "tuple"
	case module:
		return "module"
	case function:
		return "builtin_function_or_method"
	}
	return "object"
}

func (c *compiler) eval(e expr) (value, error) {
	switch e := e.(type) {
	case *literal:
		if _, big := e.v.(*big.Int); big {
			return nil, pyUnsupported(e, "integer beyond 64 bits")
		}
		return e.v, nil
	case *nameRef:
		v, ok := c.env[e.name]
		if !ok {
			return nil, pyErr(e, "NameError", "name '%s' is not defined", e.name)
		}
		return v, nil
	case *attrRef:
		x, err := c.eval(e.x)
		if err != nil {
			return nil, err
		}
		m, ok := x.(module)
		if !ok {
			return nil, pyUnsupported(e, "attribute %s of a %s", e.name, typeName(x))
		}
		q := m.name + "." + e.name
		if _, ok := functions[q]; ok {
			return function{q}, nil
		}
		if m.name == "pyautogui" && (e.name == "linear" || strings.HasPrefix(e.name, "ease")) {
			return tween{}, nil
		}
		return nil, pyUnsupported(e, "%s", q)
	case *sequence:
		out := make([]value, len(e.elems))
		for i, el := range e.elems {
			v, err := c.eval(el)
			if err != nil {
				return nil, err
			}
			out[i] = v
		}
		return out, nil
	case *unary:
		x, err := c.eval(e.x)
		if err != nil {
			return nil, err
		}
		switch v := x.(type) {
		case int64:
			switch e.op {
			case "-":
				if v == math.MinInt64 {
					return nil, pyUnsupported(e, "integer beyond 64 bits")
				}
				return -v, nil
			case "+":
				return v, nil
			case "~":
				return ^v, nil
			}
		case float64:
			switch e.op {
			case "-":
				return -v, nil
			case "+":
				return v, nil
			}
		case bool:
			return c.eval(&unary{e.pos, e.op, &literal{e.pos, b2i(v)}})
		}
		return nil, pyErr(e, "TypeError", "bad operand type for unary %s: '%s'", e.op, typeName(x))
	case *binary:
		x, err := c.eval(e.x)
		if err != nil {
			return nil, err
		}
		y, err := c.eval(e.y)
		if err != nil {
			return nil, err
		}
		v, err := arith(e, x, y)
		if s, ok := v.(string); ok {
			c.strBytes += len(s)
			if c.strBytes > 4*MaxCode {
				return nil, pyUnsupported(e, "building more than %d bytes of strings", 4*MaxCode)
			}
		}
		return v, err
	case *call:
		return nil, pyUnsupported(e, "a call used as a value")
	}
	return nil, pyUnsupported(e, "expression")
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

func arith(e *binary, x, y value) (value, error) {
	if xb, ok := x.(bool); ok {
		x = b2i(xb)
	}
	if yb, ok := y.(bool); ok {
		y = b2i(yb)
	}
	if xs, ok := x.(string); ok {
		if ys, ok := y.(string); ok && e.op == "+" {
			if len(xs)+len(ys) > MaxCode {
				return nil, pyUnsupported(e, "string longer than %d bytes", MaxCode)
			}
			return xs + ys, nil
		}
		if n, ok := y.(int64); ok && e.op == "*" {
			if n <= 0 {
				return "", nil
			}
			if n > MaxCode || int64(len(xs))*n > MaxCode {
				return nil, pyUnsupported(e, "string longer than %d bytes", MaxCode)
			}
			return strings.Repeat(xs, int(n)), nil
		}
		return nil, pyErr(e, "TypeError", "unsupported operand type(s) for %s: 'str' and '%s'", e.op, typeName(y))
	}
	xi, xInt := x.(int64)
	yi, yInt := y.(int64)
	if xInt && yInt {
		switch e.op {
		case "+", "-", "*":
			r, ok := intOp(e.op, xi, yi)
			if !ok {
				return nil, pyUnsupported(e, "integer beyond 64 bits")
			}
			return r, nil
		case "//", "%":
			if yi == 0 {
				return nil, pyErr(e, "ZeroDivisionError", "integer division or modulo by zero")
			}
			q, m := xi/yi, xi%yi
			if m != 0 && (m < 0) != (yi < 0) { // Python floors
				q--
				m += yi
			}
			if e.op == "//" {
				return q, nil
			}
			return m, nil
		case "&":
			return xi & yi, nil
		case "|":
			return xi | yi, nil
		case "^":
			return xi ^ yi, nil
		}
	}
	xf, okx := number(x)
	yf, oky := number(y)
	if !okx || !oky {
		return nil, pyErr(e, "TypeError", "unsupported operand type(s) for %s: '%s' and '%s'", e.op, typeName(x), typeName(y))
	}
	switch e.op {
	case "+":
		return xf + yf, nil
	case "-":
		return xf - yf, nil
	case "*":
		return xf * yf, nil
	case "/":
		if yf == 0 {
			return nil, pyErr(e, "ZeroDivisionError", "division by zero")
		}
		return xf / yf, nil
	case "//":
		if yf == 0 {
			return nil, pyErr(e, "ZeroDivisionError", "float floor division by zero")
		}
		return math.Floor(xf / yf), nil
	case "%":
		if yf == 0 {
			return nil, pyErr(e, "ZeroDivisionError", "float modulo")
		}
		return xf - math.Floor(xf/yf)*yf, nil
	case "**":
		r := math.Pow(xf, yf)
		if xInt && yInt && yi >= 0 && math.Abs(r) < 1<<62 {
			return int64(r), nil
		}
		return r, nil
	}
	return nil, pyUnsupported(e, "operator %s", e.op)
}

func intOp(op string, x, y int64) (int64, bool) {
	switch op {
	case "+":
		r := x + y
		return r, (r > x) == (y > 0) || y == 0
	case "-":
		r := x - y
		return r, (r < x) == (y > 0) || y == 0
	case "*":
		if x == 0 || y == 0 {
			return 0, true
		}
		r := x * y
		return r, r/y == x && !(x == -1 && y == math.MinInt64) && !(y == -1 && x == math.MinInt64)
	}
	return 0, false
}

func number(v value) (float64, bool) {
	switch v := v.(type) {
	case int64:
		return float64(v), true
	case float64:
		return v, !math.IsNaN(v) && !math.IsInf(v, 0)
	case bool:
		return float64(b2i(v)), true
	}
	return 0, false
}

func seconds(f float64) time.Duration {
	if f <= 0 {
		return 0
	}
	if f > input.MaxDuration.Seconds() {
		return input.MaxDuration
	}
	return time.Duration(f * float64(time.Second))
}

// call binds the arguments of a known function and checks their types.
func (c *compiler) call(cl *call) error {
	fv, err := c.eval(cl.fn)
	if err != nil {
		return err
	}
	fn, ok := fv.(function)
	if !ok {
		return pyErr(cl, "TypeError", "'%s' object is not callable", typeName(fv))
	}
	sig := functions[fn.qual]
	args := map[string]value{}
	var rest []value
	pi := 0
	for _, a := range cl.args {
		v, err := c.eval(a.x)
		if err != nil {
			return err
		}
		vals := []value{v}
		if a.star {
			seq, ok := v.([]value)
			if !ok {
				if s, isStr := v.(string); isStr {
					seq = nil
					for _, r := range s {
						seq = append(seq, string(r))
					}
				} else {
					return pyErr(cl, "TypeError", "argument after * must be an iterable, not %s", typeName(v))
				}
			}
			vals = seq
		}
		if a.name != "" {
			found := false
			for _, p := range sig {
				if p.name == a.name {
					found = true
				}
			}
			if !found {
				return pyErr(cl, "TypeError", "%s() got an unexpected keyword argument '%s'", fn.qual, a.name)
			}
			if _, dup := args[a.name]; dup {
				return pyErr(cl, "TypeError", "%s() got multiple values for argument '%s'", fn.qual, a.name)
			}
			args[a.name] = v
			continue
		}
		for _, v := range vals {
			if pi < len(sig) && strings.HasPrefix(sig[pi].name, "*") {
				rest = append(rest, v)
				continue
			}
			if pi >= len(sig) {
				return pyErr(cl, "TypeError", "%s() takes at most %d positional arguments", fn.qual, len(sig))
			}
			if _, dup := args[sig[pi].name]; dup {
				return pyErr(cl, "TypeError", "%s() got multiple values for argument '%s'", fn.qual, sig[pi].name)
			}
			args[sig[pi].name] = v
			pi++
		}
	}
	for _, p := range sig {
		if strings.HasPrefix(p.name, "*") {
			args[p.name] = rest
			continue
		}
		if _, ok := args[p.name]; !ok {
			if p.def == nil {
				return pyErr(cl, "TypeError", "%s() missing required argument: '%s'", fn.qual, p.name)
			}
			args[p.name] = p.def
		}
	}
	if err := check(cl, fn.qual, args); err != nil {
		return err
	}
	o := op{fn: fn.qual, args: args, line: cl.line}
	if strings.HasPrefix(fn.qual, "pyautogui.") && fn.qual != "pyautogui.sleep" {
		if p, _ := args["_pause"].(bool); p {
			o.pause = c.pause
		}
	}
	c.ops = append(c.ops, o)
	return nil
}

// check validates argument types the way the call would fail in Python.
func check(cl *call, fn string, args map[string]value) error {
	for _, name := range []string{"interval", "duration", "seconds"} {
		if v, ok := args[name]; ok {
			if f, ok := number(v); !ok || f < 0 && name == "seconds" {
				return pyErr(cl, "TypeError", "%s(): %s must be a non-negative number, not %s", fn, name, typeName(v))
			}
		}
	}
	for _, name := range []string{"clicks", "presses", "xOffset", "yOffset"} {
		if v, ok := args[name]; ok {
			if _, isNone := v.(none); isNone && name != "clicks" && name != "presses" {
				continue
			}
			if _, ok := number(v); !ok {
				return pyErr(cl, "TypeError", "%s(): %s must be a number, not %s", fn, name, typeName(v))
			}
		}
	}
	if v, ok := args["button"]; ok {
		if _, ok := buttonOf(v); !ok {
			return pyErr(cl, "ValueError", "%s(): button must be one of 'left', 'middle', 'right', 'primary', 'secondary', 1, 2, 3 (got %v)", fn, v)
		}
	}
	if _, ok := args["x"]; ok {
		if _, _, err := xyOf(args["x"], args["y"]); err != nil {
			return pyErr(cl, "TypeError", "%s(): %v", fn, err)
		}
	}
	switch fn {
	case "pyautogui.typewrite", "pyautogui.write":
		switch m := args["message"].(type) {
		case string:
		case []value:
			for _, k := range m {
				if _, ok := k.(string); !ok {
					return pyErr(cl, "TypeError", "%s(): message items must be key names (str)", fn)
				}
			}
		default:
			return pyErr(cl, "TypeError", "%s(): message must be a str or a list of key names", fn)
		}
	case "pyautogui.press", "pyautogui.keyDown", "pyautogui.keyUp", "pyautogui.hotkey":
		for _, k := range keyArgs(args) {
			if _, ok := k.(string); !ok {
				return pyErr(cl, "TypeError", "%s(): key names must be str, not %s", fn, typeName(k))
			}
		}
	case "pyperclip.copy":
		if _, ok := args["text"].(string); !ok {
			if _, ok := number(args["text"]); !ok {
				return pyErr(cl, "PyperclipException", "only str, int, float, and bool values can be copied to the clipboard, not %s", typeName(args["text"]))
			}
		}
	case "pyautogui.sleep", "time.sleep":
		if f, ok := number(args["seconds"]); !ok || f < 0 {
			return pyErr(cl, "ValueError", "sleep length must be a non-negative number")
		}
	}
	return nil
}

// keyArgs flattens the key arguments of press/keyDown/keyUp/hotkey; a list
// inside hotkey's arguments is flattened too (agents write
// hotkey(['ctrl', 'c']), which pyautogui itself rejects).
func keyArgs(args map[string]value) []value {
	var raw []value
	for _, n := range []string{"keys", "key", "*args"} {
		if v, ok := args[n]; ok {
			if l, ok := v.([]value); ok {
				raw = append(raw, l...)
			} else {
				raw = append(raw, v)
			}
		}
	}
	var out []value
	for _, v := range raw {
		if l, ok := v.([]value); ok {
			out = append(out, l...)
		} else {
			out = append(out, v)
		}
	}
	return out
}

func buttonOf(v value) (int, bool) {
	switch b := v.(type) {
	case string:
		return input.ButtonByName(b)
	case int64:
		if b >= 1 && b <= 3 {
			return int(b), true
		}
	}
	return 0, false
}

// xyOf reads pyautogui's x/y arguments: numbers, None, or a 2-sequence
// in x. nil means "the current position" for that coordinate.
func xyOf(xv, yv value) (*float64, *float64, error) {
	if seq, ok := xv.([]value); ok {
		if len(seq) != 2 {
			return nil, nil, errors.New("a point must have two coordinates")
		}
		xv, yv = seq[0], seq[1]
	}
	get := func(v value, name string) (*float64, error) {
		if _, ok := v.(none); ok || v == nil {
			return nil, nil
		}
		if _, ok := v.(string); ok {
			return nil, fmt.Errorf("%s as an image file name (locate on screen) is not supported", name)
		}
		f, ok := number(v)
		if !ok {
			return nil, fmt.Errorf("%s must be a number, not %s", name, typeName(v))
		}
		return &f, nil
	}
	x, err := get(xv, "x")
	if err != nil {
		return nil, nil, err
	}
	y, err := get(yv, "y")
	return x, y, err
}

// Clipboard sets the clipboard, for pyperclip.copy.
type Clipboard interface {
	SetClipboard(text string) error
}

// Result is what the program did: text printed and warnings (the
// equivalents of stdout and stderr).
type Result struct {
	Output   string
	Warnings string
}

// Run executes the program with exclusive use of the input.
func (p *Program) Run(ctx context.Context, ctl *input.Controller, clip Clipboard) (Result, error) {
	var res Result
	var out, warn strings.Builder
	err := ctl.Do(ctx, func(a *input.Actor) error {
		for _, o := range p.ops {
			if err := runOp(ctx, a, clip, o, &out, &warn); err != nil {
				return fmt.Errorf("line %d: %s: %w", o.line, o.fn, err)
			}
			if err := a.Sleep(ctx, o.pause); err != nil {
				return err
			}
		}
		return nil
	})
	res.Output, res.Warnings = out.String(), warn.String()
	return res, err
}

// minDuration mirrors pyautogui.MINIMUM_DURATION: shorter moves are instant.
const minDuration = 100 * time.Millisecond

func dur(v value) time.Duration {
	f, _ := number(v)
	d := seconds(f)
	if d < minDuration {
		return 0
	}
	return d
}

func runOp(ctx context.Context, a *input.Actor, clip Clipboard, o op, out, warn *strings.Builder) error {
	args := o.args
	target := func() (*input.Point, error) {
		if _, ok := args["x"]; !ok {
			return nil, nil
		}
		x, y, err := xyOf(args["x"], args["y"])
		if err != nil {
			return nil, err
		}
		if x == nil && y == nil {
			return nil, nil
		}
		cur, err := a.Position(ctx)
		if err != nil {
			return nil, err
		}
		if x != nil {
			cur.X = int(math.Round(*x))
		}
		if y != nil {
			cur.Y = int(math.Round(*y))
		}
		// pyautogui clamps to the screen rather than failing.
		w, h := a.ScreenSize()
		cur.X = min(max(cur.X, 0), w-1)
		cur.Y = min(max(cur.Y, 0), h-1)
		return &cur, nil
	}
	moveFirst := func() (*input.Point, error) {
		p, err := target()
		if err != nil || p == nil {
			return p, err
		}
		if d := dur(args["duration"]); d > 0 {
			if err := a.MoveTo(ctx, *p, d); err != nil {
				return nil, err
			}
		}
		return p, nil
	}
	btn := func(def int) int {
		if v, ok := args["button"]; ok {
			b, _ := buttonOf(v)
			return b
		}
		return def
	}
	interval := func() time.Duration {
		f, _ := number(args["interval"])
		return seconds(f)
	}
	keys := func() []string {
		var ks []string
		for _, k := range keyArgs(args) {
			s := k.(string)
			if _, ok := input.KeyKeysym(s); !ok {
				// pyautogui silently ignores unknown key names; say so.
				fmt.Fprintf(warn, "line %d: %s: unknown key name %q ignored\n", o.line, o.fn, s)
				continue
			}
			ks = append(ks, s)
		}
		return ks
	}
	switch o.fn {
	case "pyautogui.click":
		p, err := moveFirst()
		if err != nil {
			return err
		}
		n, _ := number(args["clicks"])
		return a.Click(ctx, p, btn(input.Left), int(n), interval())
	case "pyautogui.doubleClick", "pyautogui.tripleClick":
		p, err := moveFirst()
		if err != nil {
			return err
		}
		n := 2
		if o.fn == "pyautogui.tripleClick" {
			n = 3
		}
		return a.Click(ctx, p, btn(input.Left), n, interval())
	case "pyautogui.rightClick", "pyautogui.middleClick", "pyautogui.leftClick":
		p, err := moveFirst()
		if err != nil {
			return err
		}
		b := map[string]int{"pyautogui.rightClick": input.Right, "pyautogui.middleClick": input.Middle, "pyautogui.leftClick": input.Left}[o.fn]
		return a.Click(ctx, p, b, 1, 0)
	case "pyautogui.moveTo":
		p, err := target()
		if err != nil || p == nil {
			return err
		}
		return a.MoveTo(ctx, *p, dur(args["duration"]))
	case "pyautogui.moveRel", "pyautogui.move", "pyautogui.dragRel", "pyautogui.drag":
		dx, _ := number(args["xOffset"])
		dy, _ := number(args["yOffset"])
		cur, err := a.Position(ctx)
		if err != nil {
			return err
		}
		w, h := a.ScreenSize()
		p := input.Point{X: min(max(cur.X+int(math.Round(dx)), 0), w-1), Y: min(max(cur.Y+int(math.Round(dy)), 0), h-1)}
		if o.fn == "pyautogui.moveRel" || o.fn == "pyautogui.move" {
			return a.MoveTo(ctx, p, dur(args["duration"]))
		}
		return a.DragTo(ctx, p, dur(args["duration"]), btn(input.Left))
	case "pyautogui.dragTo":
		p, err := target()
		if err != nil || p == nil {
			return err
		}
		return a.DragTo(ctx, *p, dur(args["duration"]), btn(input.Left))
	case "pyautogui.mouseDown", "pyautogui.mouseUp":
		p, err := moveFirst()
		if err != nil {
			return err
		}
		if o.fn == "pyautogui.mouseDown" {
			return a.ButtonDown(ctx, p, btn(input.Left))
		}
		return a.ButtonUp(ctx, p, btn(input.Left))
	case "pyautogui.scroll", "pyautogui.vscroll", "pyautogui.hscroll":
		p, err := target()
		if err != nil {
			return err
		}
		n, _ := number(args["clicks"])
		clicks := int(n)
		clicks = min(max(clicks, -1000), 1000)
		if o.fn == "pyautogui.hscroll" {
			return a.Scroll(ctx, p, clicks, 0)
		}
		return a.Scroll(ctx, p, 0, clicks)
	case "pyautogui.typewrite", "pyautogui.write":
		switch m := args["message"].(type) {
		case string:
			return a.Type(ctx, m, interval())
		case []value:
			// A list message is a sequence of key names to press.
			args = map[string]value{"keys": m}
			return a.Press(ctx, keys(), 1, interval())
		}
	case "pyautogui.press":
		n, _ := number(args["presses"])
		return a.Press(ctx, keys(), int(min(max(n, 0), 1000)), interval())
	case "pyautogui.keyDown":
		return a.KeyDown(ctx, keys()...)
	case "pyautogui.keyUp":
		return a.KeyUp(ctx, keys()...)
	case "pyautogui.hotkey":
		return a.Hotkey(ctx, keys(), interval())
	case "pyautogui.sleep", "time.sleep":
		f, _ := number(args["seconds"])
		return a.Sleep(ctx, seconds(f))
	case "pyperclip.copy":
		return clip.SetClipboard(str(args["text"]))
	case "print":
		parts := []string{}
		for _, v := range args["*args"].([]value) {
			parts = append(parts, str(v))
		}
		out.WriteString(strings.Join(parts, str(args["sep"])) + str(args["end"]))
		return nil
	}
	return fmt.Errorf("not interpreted")
}

// str formats a value as Python's str() does for the types of the subset.
func str(v value) string {
	switch v := v.(type) {
	case string:
		return v
	case int64:
		return strconv.FormatInt(v, 10)
	case float64:
		if v == math.Trunc(v) && math.Abs(v) < 1e16 {
			return strconv.FormatFloat(v, 'f', 1, 64)
		}
		return strconv.FormatFloat(v, 'g', -1, 64)
	case bool:
		if v {
			return "True"
		}
		return "False"
	case none:
		return "None"
	case []value:
		parts := make([]string, len(v))
		for i, e := range v {
			if s, ok := e.(string); ok {
				parts[i] = strconv.Quote(s)
			} else {
				parts[i] = str(e)
			}
		}
		return "(" + strings.Join(parts, ", ") + ")"
	}
	return fmt.Sprint(v)
}
