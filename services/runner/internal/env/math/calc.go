package math

import (
	"fmt"
	stdmath "math"
	"strconv"
	"strings"
	"unicode"
)

// Limits of the calculator.
const (
	MaxExprLen = 4096
	maxDepth   = 64
)

// Eval evaluates an arithmetic expression: numbers, + - * / // % ^ **,
// parentheses, unary signs, the constants pi and e, and the functions
// sqrt, abs, exp, ln, log (base 10, or log(x, base)), sin, cos, tan, asin,
// acos, atan, floor, ceil, round, min, max, pow. It never panics.
func Eval(expr string) (float64, error) {
	if len(expr) > MaxExprLen {
		return 0, fmt.Errorf("expression longer than %d bytes", MaxExprLen)
	}
	p := &parser{s: expr}
	v, err := p.expr(0)
	if err != nil {
		return 0, err
	}
	p.space()
	if p.i < len(p.s) {
		return 0, fmt.Errorf("unexpected %q at offset %d", p.s[p.i:min(len(p.s), p.i+10)], p.i)
	}
	if stdmath.IsNaN(v) || stdmath.IsInf(v, 0) {
		return 0, fmt.Errorf("result is not a finite number")
	}
	return v, nil
}

// Format prints a result the way people write it: integers without a
// decimal point, others with up to 12 significant digits.
func Format(v float64) string {
	if v == stdmath.Trunc(v) && stdmath.Abs(v) < 1e15 {
		return strconv.FormatInt(int64(v), 10)
	}
	return strconv.FormatFloat(v, 'g', 12, 64)
}

type parser struct {
	s string
	i int
}

func (p *parser) space() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t' || p.s[p.i] == '\n') {
		p.i++
	}
}

func (p *parser) peek(tok string) bool {
	p.space()
	return strings.HasPrefix(p.s[p.i:], tok)
}

func (p *parser) eat(tok string) bool {
	if p.peek(tok) {
		p.i += len(tok)
		return true
	}
	return false
}

// expr := term (('+'|'-') term)*
func (p *parser) expr(depth int) (float64, error) {
	if depth > maxDepth {
		return 0, fmt.Errorf("expression nested too deeply")
	}
	v, err := p.term(depth)
	if err != nil {
		return 0, err
	}
	for {
		switch {
		case p.eat("+"):
			w, err := p.term(depth)
			if err != nil {
				return 0, err
			}
			v += w
		case p.eat("-"):
			w, err := p.term(depth)
			if err != nil {
				return 0, err
			}
			v -= w
		default:
			return v, nil
		}
	}
}

// term := unary (('*'|'/'|'//'|'%') unary)*
func (p *parser) term(depth int) (float64, error) {
	v, err := p.unary(depth)
	if err != nil {
		return 0, err
	}
	for {
		var op string
		switch {
		case p.peek("**"):
			return v, nil // handled in power
		case p.eat("*"), p.eat("×"):
			op = "*"
		case p.eat("//"):
			op = "//"
		case p.eat("/"), p.eat("÷"):
			op = "/"
		case p.eat("%"):
			op = "%"
		default:
			return v, nil
		}
		w, err := p.unary(depth)
		if err != nil {
			return 0, err
		}
		switch op {
		case "*":
			v *= w
		case "/", "//", "%":
			if w == 0 {
				return 0, fmt.Errorf("division by zero")
			}
			switch op {
			case "/":
				v /= w
			case "//":
				v = stdmath.Floor(v / w)
			default:
				v = v - w*stdmath.Floor(v/w)
			}
		}
	}
}

// unary := ('+'|'-') unary | power
func (p *parser) unary(depth int) (float64, error) {
	if depth > maxDepth {
		return 0, fmt.Errorf("expression nested too deeply")
	}
	switch {
	case p.eat("-"):
		v, err := p.unary(depth + 1)
		return -v, err
	case p.eat("+"):
		return p.unary(depth + 1)
	}
	return p.power(depth)
}

// power := atom (('^'|'**') unary)?   (right-associative)
func (p *parser) power(depth int) (float64, error) {
	v, err := p.atom(depth)
	if err != nil {
		return 0, err
	}
	if p.eat("**") || p.eat("^") {
		w, err := p.unary(depth + 1)
		if err != nil {
			return 0, err
		}
		return stdmath.Pow(v, w), nil
	}
	return v, nil
}

func (p *parser) atom(depth int) (float64, error) {
	p.space()
	if p.i >= len(p.s) {
		return 0, fmt.Errorf("unexpected end of expression")
	}
	if p.eat("(") {
		v, err := p.expr(depth + 1)
		if err != nil {
			return 0, err
		}
		if !p.eat(")") {
			return 0, fmt.Errorf("missing )")
		}
		return v, nil
	}
	c := p.s[p.i]
	if c >= '0' && c <= '9' || c == '.' {
		start := p.i
		for p.i < len(p.s) && (p.s[p.i] >= '0' && p.s[p.i] <= '9' || p.s[p.i] == '.' || p.s[p.i] == '_') {
			p.i++
		}
		if p.i < len(p.s) && (p.s[p.i] == 'e' || p.s[p.i] == 'E') {
			j := p.i + 1
			if j < len(p.s) && (p.s[j] == '+' || p.s[j] == '-') {
				j++
			}
			if j < len(p.s) && p.s[j] >= '0' && p.s[j] <= '9' {
				p.i = j
				for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
					p.i++
				}
			}
		}
		v, err := strconv.ParseFloat(strings.ReplaceAll(p.s[start:p.i], "_", ""), 64)
		if err != nil {
			return 0, fmt.Errorf("bad number %q", p.s[start:p.i])
		}
		return v, nil
	}
	if unicode.IsLetter(rune(c)) {
		start := p.i
		for p.i < len(p.s) && (unicode.IsLetter(rune(p.s[p.i])) || p.s[p.i] >= '0' && p.s[p.i] <= '9') {
			p.i++
		}
		name := strings.ToLower(p.s[start:p.i])
		switch name {
		case "pi":
			return stdmath.Pi, nil
		case "e":
			return stdmath.E, nil
		}
		if !p.eat("(") {
			return 0, fmt.Errorf("unknown name %q", name)
		}
		var args []float64
		if !p.eat(")") {
			for {
				v, err := p.expr(depth + 1)
				if err != nil {
					return 0, err
				}
				args = append(args, v)
				if len(args) > 16 {
					return 0, fmt.Errorf("too many arguments")
				}
				if p.eat(")") {
					break
				}
				if !p.eat(",") {
					return 0, fmt.Errorf("missing , or ) in call of %s", name)
				}
			}
		}
		return call(name, args)
	}
	return 0, fmt.Errorf("unexpected %q at offset %d", string(c), p.i)
}

func call(name string, args []float64) (float64, error) {
	one := map[string]func(float64) float64{
		"sqrt": stdmath.Sqrt, "abs": stdmath.Abs, "exp": stdmath.Exp, "ln": stdmath.Log,
		"sin": stdmath.Sin, "cos": stdmath.Cos, "tan": stdmath.Tan, "asin": stdmath.Asin,
		"acos": stdmath.Acos, "atan": stdmath.Atan, "floor": stdmath.Floor, "ceil": stdmath.Ceil,
		"round": stdmath.Round, "log10": stdmath.Log10, "log2": stdmath.Log2,
	}
	if f, ok := one[name]; ok {
		if len(args) != 1 {
			return 0, fmt.Errorf("%s takes 1 argument", name)
		}
		return f(args[0]), nil
	}
	switch name {
	case "log":
		switch len(args) {
		case 1:
			return stdmath.Log10(args[0]), nil
		case 2:
			return stdmath.Log(args[0]) / stdmath.Log(args[1]), nil
		}
		return 0, fmt.Errorf("log takes 1 or 2 arguments")
	case "pow":
		if len(args) != 2 {
			return 0, fmt.Errorf("pow takes 2 arguments")
		}
		return stdmath.Pow(args[0], args[1]), nil
	case "min", "max":
		if len(args) == 0 {
			return 0, fmt.Errorf("%s needs arguments", name)
		}
		v := args[0]
		for _, a := range args[1:] {
			if name == "min" {
				v = min(v, a)
			} else {
				v = max(v, a)
			}
		}
		return v, nil
	}
	return 0, fmt.Errorf("unknown function %q", name)
}
