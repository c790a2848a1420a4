package artifactfile

import (
	"fmt"
	"strconv"
	"strings"
)

// A reader for libconfig (hyperrealm.com/libconfig), the syntax of
// SWUpdate's sw-description, sufficient to read what the service shows:
// settings "name = value" or "name : value" ended by ';', ',' or nothing;
// groups { … }, arrays [ … ] of scalars of one type, lists ( … ) of any
// values; strings (adjacent ones concatenated; \\ \" \n \r \t \f \xNN),
// integers (decimal, 0x hex, 0b binary, 0o octal, an L or LL suffix),
// floats and booleans; comments #, // and /* */. @include is refused: an
// uploaded file cannot name another. Numbers are kept as written: only
// strings are read from them.

type cfgKind int

const (
	cfgStringKind cfgKind = iota + 1
	cfgIntKind
	cfgFloatKind
	cfgBoolKind
	cfgArrayKind
	cfgListKind
	cfgGroupKind
)

func (k cfgKind) String() string {
	return [...]string{"", "a string", "an integer", "a float", "a boolean", "an array", "a list", "a group"}[k]
}

// cfgValue is one parsed value.
type cfgValue struct {
	kind  cfgKind
	str   string     // a string's text, a number's or boolean's as written
	items []cfgValue // an array's or list's elements
	group *cfgGroup
	line  int
}

// cfgSetting is "name = value".
type cfgSetting struct {
	name  string
	value cfgValue
	line  int
}

// cfgGroup is a group's settings in order; names are unique.
type cfgGroup struct{ settings []cfgSetting }

// get is the value of the setting named name.
func (g *cfgGroup) get(name string) (cfgValue, bool) {
	for _, s := range g.settings {
		if s.name == name {
			return s.value, true
		}
	}
	return cfgValue{}, false
}

// maxCfgDepth bounds nesting, so a hostile file cannot exhaust the stack.
const maxCfgDepth = 64

type tokKind int

const (
	tokEOF tokKind = iota
	tokName
	tokString
	tokNumber
	tokPunct
)

type token struct {
	kind tokKind
	text string // a name, a punctuation character, a number as written, a string's value
	line int
}

func (t token) describe() string {
	switch t.kind {
	case tokEOF:
		return "the end of the file"
	case tokName:
		return fmt.Sprintf("%q", t.text)
	case tokString:
		return "a string"
	case tokNumber:
		return "the number " + t.text
	}
	return "'" + t.text + "'"
}

// lexer splits libconfig text into tokens.
type lexer struct {
	src  []byte
	pos  int
	line int
}

func isNameStart(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '*'
}

func isNameChar(c byte) bool {
	return isNameStart(c) || c >= '0' && c <= '9' || c == '-' || c == '_'
}

// skip passes whitespace and comments.
func (l *lexer) skip() error {
	for l.pos < len(l.src) {
		c := l.src[l.pos]
		switch {
		case c == '\n':
			l.line++
			l.pos++
		case c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v':
			l.pos++
		case c == '#' || c == '/' && l.peek(1) == '/':
			for l.pos < len(l.src) && l.src[l.pos] != '\n' {
				l.pos++
			}
		case c == '/' && l.peek(1) == '*':
			start := l.line
			l.pos += 2
			for {
				if l.pos >= len(l.src) {
					return errorfAt(start, "a comment /* is not closed")
				}
				if l.src[l.pos] == '*' && l.peek(1) == '/' {
					l.pos += 2
					break
				}
				if l.src[l.pos] == '\n' {
					l.line++
				}
				l.pos++
			}
		default:
			return nil
		}
	}
	return nil
}

func (l *lexer) peek(off int) byte {
	if l.pos+off < len(l.src) {
		return l.src[l.pos+off]
	}
	return 0
}

// next is the next token.
func (l *lexer) next() (token, error) {
	if err := l.skip(); err != nil {
		return token{}, err
	}
	if l.pos >= len(l.src) {
		return token{kind: tokEOF, line: l.line}, nil
	}
	c, line := l.src[l.pos], l.line
	switch {
	case strings.IndexByte("=:;,{}[]()", c) >= 0:
		l.pos++
		return token{kind: tokPunct, text: string(c), line: line}, nil
	case c == '"':
		return l.str()
	case isNameStart(c):
		start := l.pos
		for l.pos < len(l.src) && isNameChar(l.src[l.pos]) {
			l.pos++
		}
		return token{kind: tokName, text: string(l.src[start:l.pos]), line: line}, nil
	case c >= '0' && c <= '9' || c == '-' || c == '+' || c == '.':
		start := l.pos
		l.pos++
		for l.pos < len(l.src) {
			d := l.src[l.pos]
			prev := l.src[l.pos-1]
			if isNameChar(d) && d != '-' || d == '.' || (d == '-' || d == '+') && (prev == 'e' || prev == 'E') {
				l.pos++
				continue
			}
			break
		}
		return token{kind: tokNumber, text: string(l.src[start:l.pos]), line: line}, nil
	case c == '@':
		return token{}, errorfAt(line, "@include and other directives are not supported: sw-description must stand alone")
	}
	return token{}, errorfAt(line, "unexpected character %q", rune(c))
}

// str reads a string literal, its escapes resolved.
func (l *lexer) str() (token, error) {
	line := l.line
	l.pos++ // the opening quote
	var b strings.Builder
	for {
		if l.pos >= len(l.src) {
			return token{}, errorfAt(line, "a string is not closed (missing '\"')")
		}
		c := l.src[l.pos]
		switch c {
		case '"':
			l.pos++
			return token{kind: tokString, text: b.String(), line: line}, nil
		case '\n':
			l.line++
			b.WriteByte(c)
			l.pos++
		case '\\':
			e := l.peek(1)
			l.pos += 2
			switch e {
			case '\\', '"':
				b.WriteByte(e)
			case 'n':
				b.WriteByte('\n')
			case 'r':
				b.WriteByte('\r')
			case 't':
				b.WriteByte('\t')
			case 'f':
				b.WriteByte('\f')
			case 'x':
				if l.pos+2 > len(l.src) {
					return token{}, errorfAt(l.line, "\\x needs two hex digits")
				}
				n, err := strconv.ParseUint(string(l.src[l.pos:l.pos+2]), 16, 8)
				if err != nil {
					return token{}, errorfAt(l.line, "\\x needs two hex digits")
				}
				b.WriteByte(byte(n))
				l.pos += 2
			default:
				return token{}, errorfAt(l.line, "unknown escape \\%c in a string", e)
			}
		default:
			b.WriteByte(c)
			l.pos++
		}
	}
}

// parser is a recursive-descent parser over the lexer, one token ahead.
type parser struct {
	lex lexer
	tok token
}

func (p *parser) advance() error {
	t, err := p.lex.next()
	if err != nil {
		return err
	}
	p.tok = t
	return nil
}

func (p *parser) isPunct(s string) bool { return p.tok.kind == tokPunct && p.tok.text == s }

// parseLibconfig parses a whole document: its top-level settings.
func parseLibconfig(src []byte) (*cfgGroup, error) {
	p := &parser{lex: lexer{src: src, line: 1}}
	if err := p.advance(); err != nil {
		return nil, err
	}
	g, err := p.settings(0, 0)
	if err != nil {
		return nil, err
	}
	if p.tok.kind != tokEOF {
		return nil, errorfAt(p.tok.line, "expected a setting name, found %s", p.tok.describe())
	}
	return g, nil
}

// settings reads settings until '}' or the end (neither consumed).
func (p *parser) settings(depth, openedAt int) (*cfgGroup, error) {
	g := &cfgGroup{}
	seen := map[string]int{}
	for p.tok.kind == tokName {
		name, line := p.tok.text, p.tok.line
		if first, dup := seen[name]; dup {
			return nil, errorfAt(line, "duplicate setting %q (first on line %d)", name, first)
		}
		seen[name] = line
		if err := p.advance(); err != nil {
			return nil, err
		}
		if !p.isPunct("=") && !p.isPunct(":") {
			return nil, errorfAt(p.tok.line, "expected '=' or ':' after %q, found %s", name, p.tok.describe())
		}
		if err := p.advance(); err != nil {
			return nil, err
		}
		v, err := p.value(depth)
		if err != nil {
			return nil, err
		}
		g.settings = append(g.settings, cfgSetting{name: name, value: v, line: line})
		if p.isPunct(";") || p.isPunct(",") {
			if err := p.advance(); err != nil {
				return nil, err
			}
			continue
		}
		// libconfig makes the terminator optional, so a setting may be
		// followed directly by the next name, the group's end or the end.
		if p.tok.kind != tokName && !p.isPunct("}") && p.tok.kind != tokEOF {
			return nil, errorfAt(p.tok.line, "expected ';' after the value of %q, found %s", name, p.tok.describe())
		}
	}
	if depth > 0 && !p.isPunct("}") {
		if p.tok.kind == tokEOF {
			return nil, errorfAt(p.tok.line, "the group opened on line %d is not closed (missing '}')", openedAt)
		}
		return nil, errorfAt(p.tok.line, "expected a setting name or '}', found %s", p.tok.describe())
	}
	return g, nil
}

// value reads one value.
func (p *parser) value(depth int) (cfgValue, error) {
	if depth >= maxCfgDepth {
		return cfgValue{}, errorfAt(p.tok.line, "nested deeper than %d levels", maxCfgDepth)
	}
	t := p.tok
	switch {
	case p.isPunct("{"):
		if err := p.advance(); err != nil {
			return cfgValue{}, err
		}
		g, err := p.settings(depth+1, t.line)
		if err != nil {
			return cfgValue{}, err
		}
		return cfgValue{kind: cfgGroupKind, group: g, line: t.line}, p.advance() // past '}'
	case p.isPunct("[") || p.isPunct("("):
		return p.sequence(depth)
	}
	return p.scalar()
}

// sequence reads an array [ scalars of one type ] or a list ( values ),
// a trailing comma allowed.
func (p *parser) sequence(depth int) (cfgValue, error) {
	open := p.tok
	array := open.text == "["
	closing, kind := ")", cfgListKind
	if array {
		closing, kind = "]", cfgArrayKind
	}
	v := cfgValue{kind: kind, line: open.line}
	if err := p.advance(); err != nil {
		return cfgValue{}, err
	}
	for !p.isPunct(closing) {
		if p.tok.kind == tokEOF {
			return cfgValue{}, errorfAt(p.tok.line, "the %s opened on line %d is not closed (missing '%s')", kind.String()[3:], open.line, closing)
		}
		var (
			item cfgValue
			err  error
		)
		if array {
			item, err = p.scalar()
			if err == nil && len(v.items) > 0 && item.kind != v.items[0].kind {
				err = errorfAt(item.line, "an array holds values of one type, %s here is not %s (use a list ( … ) to mix)",
					item.kind, v.items[0].kind)
			}
		} else {
			item, err = p.value(depth + 1)
		}
		if err != nil {
			return cfgValue{}, err
		}
		v.items = append(v.items, item)
		if p.isPunct(",") {
			// libconfig's grammar lets commas repeat ("a,,b", "a,").
			for p.isPunct(",") {
				if err := p.advance(); err != nil {
					return cfgValue{}, err
				}
			}
			continue
		}
		if !p.isPunct(closing) {
			return cfgValue{}, errorfAt(p.tok.line, "expected ',' or '%s', found %s", closing, p.tok.describe())
		}
	}
	return v, p.advance()
}

// scalar reads a string (adjacent ones joined), number or boolean.
func (p *parser) scalar() (cfgValue, error) {
	t := p.tok
	switch t.kind {
	case tokString:
		var b strings.Builder
		for p.tok.kind == tokString {
			b.WriteString(p.tok.text)
			if err := p.advance(); err != nil {
				return cfgValue{}, err
			}
		}
		return cfgValue{kind: cfgStringKind, str: b.String(), line: t.line}, nil
	case tokNumber:
		kind, ok := numberKind(t.text)
		if !ok {
			return cfgValue{}, errorfAt(t.line, "%q is not a number", t.text)
		}
		return cfgValue{kind: kind, str: t.text, line: t.line}, p.advance()
	case tokName:
		if strings.EqualFold(t.text, "true") || strings.EqualFold(t.text, "false") {
			return cfgValue{kind: cfgBoolKind, str: strings.ToLower(t.text), line: t.line}, p.advance()
		}
	}
	return cfgValue{}, errorfAt(t.line, "expected a value, found %s", t.describe())
}

// numberKind says whether s is a libconfig integer or float.
func numberKind(s string) (cfgKind, bool) {
	body := strings.TrimLeft(s, "+-")
	if len(s)-len(body) > 1 {
		return 0, false
	}
	intBody := strings.TrimSuffix(strings.TrimSuffix(body, "L"), "L")
	lower := strings.ToLower(intBody)
	var err error
	switch {
	case strings.HasPrefix(lower, "0x"):
		_, err = strconv.ParseUint(lower[2:], 16, 64)
	case strings.HasPrefix(lower, "0b"):
		_, err = strconv.ParseUint(lower[2:], 2, 64)
	case strings.HasPrefix(lower, "0o"):
		_, err = strconv.ParseUint(lower[2:], 8, 64)
	default:
		_, err = strconv.ParseUint(intBody, 10, 64)
	}
	if err == nil && intBody != "" {
		return cfgIntKind, true
	}
	if body == "" || body == "." || !(body[0] >= '0' && body[0] <= '9' || body[0] == '.') ||
		strings.ContainsAny(body, "xXbBoOL_") {
		return 0, false
	}
	if _, err := strconv.ParseFloat(body, 64); err != nil {
		return 0, false
	}
	return cfgFloatKind, true
}

// errorfAt is a parse error at a line.
func errorfAt(line int, format string, args ...any) error {
	return fmt.Errorf("line %d: %s", line, fmt.Sprintf(format, args...))
}
