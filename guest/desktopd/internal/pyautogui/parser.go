package pyautogui

import (
	"fmt"
)

// The syntax tree of the subset.

type expr interface{ at() (line, col int) }

type pos struct{ line, col int }

func (p pos) at() (int, int) { return p.line, p.col }

type (
	literal struct {
		pos
		v value
	}
	nameRef struct {
		pos
		name string
	}
	attrRef struct {
		pos
		x    expr
		name string
	}
	call struct {
		pos
		fn   expr
		args []argument
	}
	unary struct {
		pos
		op string
		x  expr
	}
	binary struct {
		pos
		op   string
		x, y expr
	}
	sequence struct {
		pos
		list  bool
		elems []expr
	}
)

type argument struct {
	name string // keyword, or ""
	star bool   // *iterable
	x    expr
}

type stmt interface{ at() (line, col int) }

type (
	importStmt struct {
		pos
		names []importName
	}
	assignStmt struct {
		pos
		targets []expr // nameRef, attrRef or sequence of nameRef
		value   expr
	}
	exprStmt struct {
		pos
		x expr
	}
	passStmt struct{ pos }
)

type importName struct {
	module string // dotted
	alias  string
}

// keywords of Python; any of them except the handled ones means code
// outside the subset.
var keywords = map[string]bool{
	"False": true, "None": true, "True": true, "and": true, "as": true, "assert": true,
	"async": true, "await": true, "break": true, "class": true, "continue": true, "def": true,
	"del": true, "elif": true, "else": true, "except": true, "finally": true, "for": true,
	"from": true, "global": true, "if": true, "import": true, "in": true, "is": true,
	"lambda": true, "nonlocal": true, "not": true, "or": true, "pass": true, "raise": true,
	"return": true, "try": true, "while": true, "with": true, "yield": true,
}

type parser struct {
	toks  []token
	i     int
	depth int // unary operator recursion, bounded like bracket nesting
}

func parse(src string) ([]stmt, error) {
	toks, err := tokenize(src)
	if err != nil {
		return nil, err
	}
	p := &parser{toks: toks}
	return p.program()
}

func (p *parser) tok() token { return p.toks[p.i] }

func (p *parser) next() token {
	t := p.toks[p.i]
	if p.i < len(p.toks)-1 {
		p.i++
	}
	return t
}

func (p *parser) isOp(s string) bool {
	t := p.tok()
	return t.kind == tOp && t.text == s
}

func (p *parser) isName(s string) bool {
	t := p.tok()
	return t.kind == tName && t.text == s
}

func (p *parser) syntax(t token, format string, args ...any) error {
	return &SyntaxError{Line: t.line, Col: t.col, Msg: fmt.Sprintf(format, args...)}
}

func (p *parser) unsupported(t token, format string, args ...any) error {
	return &Unsupported{Line: t.line, Col: t.col, What: fmt.Sprintf(format, args...)}
}

// describe names a token for messages.
func describe(t token) string {
	switch t.kind {
	case tEOF:
		return "end of input"
	case tNewline:
		return "end of line"
	case tString:
		return "string literal"
	case tNumber:
		return "number " + t.text
	}
	return fmt.Sprintf("'%s'", t.text)
}

func (p *parser) program() ([]stmt, error) {
	var out []stmt
	for {
		for p.tok().kind == tNewline || p.isOp(";") {
			if p.isOp(";") && (len(out) == 0 || p.toks[max(p.i-1, 0)].kind == tNewline) {
				return nil, p.syntax(p.tok(), "invalid syntax")
			}
			p.next()
		}
		if p.tok().kind == tEOF {
			return out, nil
		}
		s, err := p.statement()
		if err != nil {
			return nil, err
		}
		out = append(out, s)
		t := p.tok()
		if t.kind != tNewline && t.kind != tEOF && !p.isOp(";") {
			if t.kind == tOp && t.text == ":" || t.kind == tName && keywords[t.text] {
				return nil, p.unsupported(t, "%s", describe(t))
			}
			return nil, p.syntax(t, "invalid syntax (unexpected %s)", describe(t))
		}
		if p.isOp(";") {
			p.next()
		}
	}
}

func (p *parser) statement() (stmt, error) {
	t := p.tok()
	at := pos{t.line, t.col}
	if t.kind == tName && keywords[t.text] {
		switch t.text {
		case "import":
			return p.importStatement()
		case "pass":
			p.next()
			return &passStmt{at}, nil
		case "True", "False", "None", "not", "lambda", "await":
			// Expressions; handled (or refused) below.
		default:
			return nil, p.unsupported(t, "'%s' statement", t.text)
		}
	}
	x, err := p.exprList()
	if err != nil {
		return nil, err
	}
	if !p.isOp("=") {
		if p.tok().kind == tOp {
			switch p.tok().text {
			case "+=", "-=", "*=", "/=", "//=", "%=", "**=", ">>=", "<<=", "&=", "|=", "^=", "@=", ":", ":=":
				return nil, p.unsupported(p.tok(), "'%s'", p.tok().text)
			}
		}
		return &exprStmt{at, x}, nil
	}
	targets := []expr{x}
	var value expr
	for p.isOp("=") {
		p.next()
		v, err := p.exprList()
		if err != nil {
			return nil, err
		}
		if p.isOp("=") {
			targets = append(targets, v)
		} else {
			value = v
		}
	}
	for _, tg := range targets {
		if err := checkTarget(tg); err != nil {
			return nil, err
		}
	}
	return &assignStmt{at, targets, value}, nil
}

func checkTarget(e expr) error {
	switch t := e.(type) {
	case *nameRef, *attrRef:
		return nil
	case *sequence:
		for _, el := range t.elems {
			if _, ok := el.(*nameRef); !ok {
				l, c := el.at()
				return &Unsupported{Line: l, Col: c, What: "nested assignment target"}
			}
		}
		return nil
	case *call:
		l, c := e.at()
		return &SyntaxError{Line: l, Col: c, Msg: "cannot assign to function call here. Maybe you meant '==' instead of '='?"}
	case *literal:
		l, c := e.at()
		return &SyntaxError{Line: l, Col: c, Msg: "cannot assign to literal here. Maybe you meant '==' instead of '='?"}
	}
	l, c := e.at()
	return &SyntaxError{Line: l, Col: c, Msg: "cannot assign to expression"}
}

func (p *parser) importStatement() (stmt, error) {
	kw := p.next()
	s := &importStmt{pos: pos{kw.line, kw.col}}
	for {
		t := p.next()
		if t.kind != tName || keywords[t.text] {
			return nil, p.syntax(t, "invalid syntax (expected a module name)")
		}
		mod := t.text
		for p.isOp(".") {
			p.next()
			n := p.next()
			if n.kind != tName {
				return nil, p.syntax(n, "invalid syntax (expected a module name)")
			}
			mod += "." + n.text
		}
		alias := mod
		if p.isName("as") {
			p.next()
			n := p.next()
			if n.kind != tName || keywords[n.text] {
				return nil, p.syntax(n, "invalid syntax (expected a name after 'as')")
			}
			alias = n.text
		}
		s.names = append(s.names, importName{module: mod, alias: alias})
		if !p.isOp(",") {
			return s, nil
		}
		p.next()
	}
}

// exprList parses an expression or a bare tuple "a, b".
func (p *parser) exprList() (expr, error) {
	t := p.tok()
	first, err := p.expression()
	if err != nil {
		return nil, err
	}
	if !p.isOp(",") {
		return first, nil
	}
	seq := &sequence{pos: pos{t.line, t.col}, elems: []expr{first}}
	for p.isOp(",") {
		p.next()
		if p.startsExpr() {
			e, err := p.expression()
			if err != nil {
				return nil, err
			}
			seq.elems = append(seq.elems, e)
		}
	}
	return seq, nil
}

func (p *parser) startsExpr() bool {
	t := p.tok()
	switch t.kind {
	case tName, tNumber, tString:
		return true
	case tOp:
		switch t.text {
		case "(", "[", "{", "-", "+", "~", "*":
			return true
		}
	}
	return false
}

var binaryPrec = map[string]int{
	"|": 1, "^": 2, "&": 3, "<<": 4, ">>": 4, "+": 5, "-": 5,
	"*": 6, "/": 6, "//": 6, "%": 6, "@": 6,
}

func (p *parser) expression() (expr, error) {
	t := p.tok()
	if t.kind == tName {
		switch t.text {
		case "not", "lambda", "await", "yield":
			return nil, p.unsupported(t, "'%s' expression", t.text)
		}
	}
	e, err := p.binaryExpr(1)
	if err != nil {
		return nil, err
	}
	t = p.tok()
	switch {
	case t.kind == tName && (t.text == "if" || t.text == "and" || t.text == "or" || t.text == "in" || t.text == "is" || t.text == "not" || t.text == "for"):
		return nil, p.unsupported(t, "'%s' in an expression", t.text)
	case t.kind == tOp && (t.text == "<" || t.text == ">" || t.text == "==" || t.text == "!=" || t.text == "<=" || t.text == ">=" || t.text == ":="):
		return nil, p.unsupported(t, "comparison '%s'", t.text)
	}
	return e, nil
}

func (p *parser) binaryExpr(minPrec int) (expr, error) {
	x, err := p.unaryExpr()
	if err != nil {
		return nil, err
	}
	for {
		t := p.tok()
		prec, ok := binaryPrec[t.text]
		if t.kind != tOp || !ok || prec < minPrec {
			return x, nil
		}
		p.next()
		y, err := p.binaryExpr(prec + 1)
		if err != nil {
			return nil, err
		}
		x = &binary{pos{t.line, t.col}, t.text, x, y}
	}
}

func (p *parser) unaryExpr() (expr, error) {
	t := p.tok()
	if t.kind == tOp && (t.text == "-" || t.text == "+" || t.text == "~") {
		p.depth++
		defer func() { p.depth-- }()
		if p.depth > 1000 {
			return nil, p.unsupported(t, "more than 1000 unary operators in a row")
		}
		p.next()
		x, err := p.unaryExpr()
		if err != nil {
			return nil, err
		}
		return &unary{pos{t.line, t.col}, t.text, x}, nil
	}
	x, err := p.postfix()
	if err != nil {
		return nil, err
	}
	if p.isOp("**") {
		op := p.next()
		y, err := p.unaryExpr()
		if err != nil {
			return nil, err
		}
		return &binary{pos{op.line, op.col}, "**", x, y}, nil
	}
	return x, nil
}

func (p *parser) postfix() (expr, error) {
	x, err := p.atom()
	if err != nil {
		return nil, err
	}
	for {
		t := p.tok()
		switch {
		case p.isOp("."):
			p.next()
			n := p.next()
			if n.kind != tName {
				return nil, p.syntax(n, "invalid syntax (expected a name after '.')")
			}
			x = &attrRef{pos{n.line, n.col}, x, n.text}
		case p.isOp("("):
			p.next()
			args, err := p.arguments()
			if err != nil {
				return nil, err
			}
			x = &call{pos{t.line, t.col}, x, args}
		case p.isOp("["):
			return nil, p.unsupported(t, "subscript")
		default:
			return x, nil
		}
	}
}

func (p *parser) arguments() ([]argument, error) {
	var args []argument
	seenKw := false
	for !p.isOp(")") {
		t := p.tok()
		var a argument
		switch {
		case p.isOp("**"):
			return nil, p.unsupported(t, "**kwargs")
		case p.isOp("*"):
			p.next()
			a.star = true
		case t.kind == tName && !keywords[t.text] && p.toks[p.i+1].kind == tOp && p.toks[p.i+1].text == "=":
			a.name = t.text
			p.next()
			p.next()
			seenKw = true
		case seenKw:
			return nil, p.syntax(t, "positional argument follows keyword argument")
		}
		x, err := p.expression()
		if err != nil {
			return nil, err
		}
		a.x = x
		args = append(args, a)
		if p.isName("for") {
			return nil, p.unsupported(p.tok(), "generator expression")
		}
		if p.isOp(",") {
			p.next()
			continue
		}
		if !p.isOp(")") {
			return nil, p.syntax(p.tok(), "invalid syntax. Perhaps you forgot a comma? (unexpected %s)", describe(p.tok()))
		}
	}
	p.next()
	return args, nil
}

func (p *parser) atom() (expr, error) {
	t := p.next()
	at := pos{t.line, t.col}
	switch t.kind {
	case tNumber:
		return &literal{at, t.num}, nil
	case tString:
		s := t.text
		// Adjacent string literals concatenate.
		for p.tok().kind == tString {
			s += p.next().text
		}
		return &literal{at, s}, nil
	case tName:
		switch t.text {
		case "True":
			return &literal{at, true}, nil
		case "False":
			return &literal{at, false}, nil
		case "None":
			return &literal{at, none{}}, nil
		}
		if keywords[t.text] {
			return nil, p.unsupported(t, "'%s'", t.text)
		}
		return &nameRef{at, t.text}, nil
	case tOp:
		switch t.text {
		case "(", "[":
			closeOp := closing[t.text]
			seq := &sequence{pos: at, list: t.text == "["}
			trailingComma := false
			for !p.isOp(closeOp) {
				e, err := p.expression()
				if err != nil {
					return nil, err
				}
				seq.elems = append(seq.elems, e)
				trailingComma = false
				if p.isName("for") {
					return nil, p.unsupported(p.tok(), "comprehension")
				}
				if p.isOp(",") {
					p.next()
					trailingComma = true
					continue
				}
				if !p.isOp(closeOp) {
					return nil, p.syntax(p.tok(), "invalid syntax. Perhaps you forgot a comma? (unexpected %s)", describe(p.tok()))
				}
			}
			p.next()
			if t.text == "(" && len(seq.elems) == 1 && !trailingComma {
				return seq.elems[0], nil // parenthesised expression
			}
			return seq, nil
		case "{":
			return nil, p.unsupported(t, "dict or set display")
		case "...":
			return &literal{at, none{}}, nil
		}
	}
	return nil, p.syntax(t, "invalid syntax (unexpected %s)", describe(t))
}
