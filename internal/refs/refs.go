// Package refs parses the ${...} references of tool targets once, at load, and
// resolves them per call in a single pass: text a reference produced is never
// scanned again.
package refs

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/toolgate/toolgate/internal/jsonread"
)

// Roots a reference may start with.
const (
	RootInput = "input"
	RootEnv   = "env"
	// RootConnection is the calling user's access token of a connection:
	// ${connection.NAME}.
	RootConnection = "connection"
)

// Ref is one parsed reference: ${input}, ${input.a.0.b}, ${env.NAME} or
// ${connection.NAME}.
type Ref struct {
	// Root is RootInput, RootEnv or RootConnection.
	Root string
	// Path holds the input path segments, or the single env or
	// connection name.
	Path []string
	// Text is the reference as written, e.g. "${input.a}".
	Text string
}

func (r Ref) String() string { return r.Text }

// Scope is what references resolve against on one call.
type Scope struct {
	// Input is the decoded input (maps, slices, strings, jsonread.Number, bools, nil).
	Input any
	// Env is the env of the component that owns the target.
	Env map[string]string
	// Connections are the calling user's access tokens, by connection
	// name: those the target references, fetched before it is resolved.
	Connections map[string]string
}

// MissingError says a reference has no value in the scope. Its message names
// the reference, so the model (or the author) knows what to fix.
type MissingError struct {
	Ref    string
	Reason string
}

func (e *MissingError) Error() string {
	return fmt.Sprintf("reference %s: %s", e.Ref, e.Reason)
}

// Resolve returns the value of r in s, keeping its JSON type.
func (r Ref) Resolve(s Scope) (any, error) {
	switch r.Root {
	case RootEnv:
		v, ok := s.Env[r.Path[0]]
		if !ok {
			return nil, &MissingError{Ref: r.Text, Reason: fmt.Sprintf("no env %q is declared", r.Path[0])}
		}
		return v, nil
	case RootConnection:
		v, ok := s.Connections[r.Path[0]]
		if !ok {
			return nil, &MissingError{Ref: r.Text, Reason: fmt.Sprintf("the user's connection %q is not at hand", r.Path[0])}
		}
		return v, nil
	case RootInput:
		cur := s.Input
		for i, seg := range r.Path {
			switch c := cur.(type) {
			case map[string]any:
				v, ok := c[seg]
				if !ok {
					return nil, &MissingError{Ref: r.Text, Reason: fmt.Sprintf("input has no %q", strings.Join(r.Path[:i+1], "."))}
				}
				cur = v
			case []any:
				n, err := strconv.Atoi(seg)
				if err != nil || n < 0 || n >= len(c) || strconv.Itoa(n) != seg {
					return nil, &MissingError{Ref: r.Text, Reason: fmt.Sprintf("input has no %q (array of %d)", strings.Join(r.Path[:i+1], "."), len(c))}
				}
				cur = c[n]
			default:
				return nil, &MissingError{Ref: r.Text, Reason: fmt.Sprintf("input has no %q (not an object or array)", strings.Join(r.Path[:i+1], "."))}
			}
		}
		return cur, nil
	}
	return nil, &MissingError{Ref: r.Text, Reason: "unknown root"}
}

// part is a literal run or a reference.
type part struct {
	lit string
	ref *Ref
}

// Template is a string that may hold references.
type Template struct {
	src   string
	parts []part
	refs  []Ref
}

// Parse parses s once. Unterminated, empty or unknown references are errors.
// "$${" is an escape for a literal "${".
func Parse(s string) (*Template, error) {
	t := &Template{src: s}
	var lit strings.Builder
	for i := 0; i < len(s); {
		if strings.HasPrefix(s[i:], "$${") {
			lit.WriteString("${")
			i += 3
			continue
		}
		if !strings.HasPrefix(s[i:], "${") {
			lit.WriteByte(s[i])
			i++
			continue
		}
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			return nil, fmt.Errorf("unterminated reference at offset %d in %q", i, s)
		}
		text := s[i : i+end+1]
		ref, err := parseRef(text)
		if err != nil {
			return nil, err
		}
		if lit.Len() > 0 {
			t.parts = append(t.parts, part{lit: lit.String()})
			lit.Reset()
		}
		t.parts = append(t.parts, part{ref: &ref})
		t.refs = append(t.refs, ref)
		i += end + 1
	}
	if lit.Len() > 0 || len(t.parts) == 0 {
		t.parts = append(t.parts, part{lit: lit.String()})
	}
	return t, nil
}

// MustParse is Parse for literals known to be valid, as in tests.
func MustParse(s string) *Template {
	t, err := Parse(s)
	if err != nil {
		panic(err)
	}
	return t
}

func parseRef(text string) (Ref, error) {
	inner := text[2 : len(text)-1]
	if inner == "" {
		return Ref{}, fmt.Errorf("empty reference %s", text)
	}
	segs := strings.Split(inner, ".")
	for _, seg := range segs {
		if !validSegment(seg) {
			return Ref{}, fmt.Errorf("invalid reference %s: bad segment %q", text, seg)
		}
	}
	switch segs[0] {
	case RootInput:
		return Ref{Root: RootInput, Path: segs[1:], Text: text}, nil
	case RootEnv:
		if len(segs) != 2 {
			return Ref{}, fmt.Errorf("invalid reference %s: want ${env.NAME}", text)
		}
		return Ref{Root: RootEnv, Path: segs[1:], Text: text}, nil
	case RootConnection:
		if len(segs) != 2 {
			return Ref{}, fmt.Errorf("invalid reference %s: want ${connection.NAME}", text)
		}
		return Ref{Root: RootConnection, Path: segs[1:], Text: text}, nil
	}
	return Ref{}, fmt.Errorf("unknown reference %s: the root must be input, env or connection", text)
}

func validSegment(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}

// Source returns the template as written.
func (t *Template) Source() string { return t.src }

// Refs lists the references in order.
func (t *Template) Refs() []Ref { return t.refs }

// Literal reports the template's text when it holds no reference.
func (t *Template) Literal() (string, bool) {
	if len(t.refs) > 0 {
		return "", false
	}
	return t.parts[0].lit, true
}

// Single returns the reference when the template is exactly one reference.
func (t *Template) Single() (Ref, bool) {
	if len(t.parts) == 1 && t.parts[0].ref != nil {
		return *t.parts[0].ref, true
	}
	return Ref{}, false
}

// Encoder transforms substituted text before it is spliced in: a path or
// query escaper, or nil for raw text. It may refuse a value that has no
// safe place there; the error is reported with the reference's name.
type Encoder func(string) (string, error)

// Expand resolves every reference as text (strings raw, other values as
// compact JSON), passes it through enc, and splices it between the literals.
func (t *Template) Expand(s Scope, enc Encoder) (string, error) {
	return t.expand(s, func(int) Encoder { return enc })
}

// ExpandEach is Expand with one encoder per reference, in order: it lets a
// URL template encode references as path segments before the '?' and as
// query values after it. A nil encoder leaves the text raw.
func (t *Template) ExpandEach(s Scope, encs []Encoder) (string, error) {
	return t.expand(s, func(i int) Encoder {
		if i < len(encs) {
			return encs[i]
		}
		return nil
	})
}

func (t *Template) expand(s Scope, encFor func(int) Encoder) (string, error) {
	if len(t.refs) == 0 {
		return t.parts[0].lit, nil
	}
	var b strings.Builder
	n := 0
	for _, p := range t.parts {
		if p.ref == nil {
			b.WriteString(p.lit)
			continue
		}
		v, err := p.ref.Resolve(s)
		if err != nil {
			return "", err
		}
		text, err := Text(v)
		if err != nil {
			return "", fmt.Errorf("reference %s: %w", p.ref.Text, err)
		}
		if enc := encFor(n); enc != nil {
			if text, err = enc(text); err != nil {
				return "", fmt.Errorf("reference %s: %w", p.ref.Text, err)
			}
		}
		n++
		b.WriteString(text)
	}
	return b.String(), nil
}

// LiteralBefore returns the literal text that stands before reference i,
// with the references before it left out.
func (t *Template) LiteralBefore(i int) string {
	var b strings.Builder
	n := 0
	for _, p := range t.parts {
		if p.ref != nil {
			if n == i {
				break
			}
			n++
			continue
		}
		b.WriteString(p.lit)
	}
	return b.String()
}

// Skeleton returns the template with every reference replaced by repl; it
// lets callers check the shape of the text (a URL, say) at load.
func (t *Template) Skeleton(repl string) string {
	var b strings.Builder
	for _, p := range t.parts {
		if p.ref != nil {
			b.WriteString(repl)
		} else {
			b.WriteString(p.lit)
		}
	}
	return b.String()
}

// Text renders a resolved value for splicing: a string as is, anything else
// as compact JSON without HTML escaping.
func Text(v any) (string, error) {
	if s, ok := v.(string); ok {
		return s, nil
	}
	b, err := compactJSON(v)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

func compactJSON(v any) ([]byte, error) {
	return json.Marshal(v, jsonread.Legacy, jsontext.EscapeForHTML(false))
}
