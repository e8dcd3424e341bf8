package dispatch

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/toolgate/toolgate/internal/jsonread"
)

// Param says where and how an operation sends one parameter.
type Param struct {
	Name    string // the parameter's name in the document
	In      string // "path", "query", "header" or "cookie"
	Style   string // "" means the default for In (simple for path and header, form for query and cookie)
	Explode *bool  // nil means the default for the style (true for form, false otherwise)
	// AllowReserved applies to query parameters only: RFC 3986 reserved
	// characters in values are sent as they are, except the four that would
	// change what the query says (see escapeReservedQuery). Elsewhere it is
	// ignored, as the OpenAPI Specification says it is.
	AllowReserved bool
}

// Encoded is what one parameter adds to a request. Which field is set
// depends on the parameter's In.
type Encoded struct {
	// Path replaces {name} in the path template. Everything but RFC 3986
	// unreserved characters and the style's own delimiters is
	// percent-encoded, so the text never leaves its path segment. It may
	// still be "", "." or "..": only the caller knows whether the parameter
	// fills a whole segment, where such a value would name another resource.
	Path string
	// Pairs are the query's or the cookie's "name=value" pairs, each
	// already encoded, to be joined with "&" (query) or "; " (cookie).
	Pairs []string
	// Header is the header's value, not percent-encoded.
	Header string
}

func (p Param) style() string {
	if p.Style != "" {
		return p.Style
	}
	if p.In == "query" || p.In == "cookie" {
		return "form"
	}
	return "simple"
}

func (p Param) explode() bool {
	if p.Explode != nil {
		return *p.Explode
	}
	return p.style() == "form"
}

// stylesIn lists the styles each location allows.
var stylesIn = map[string][]string{
	"path":   {"matrix", "label", "simple"},
	"query":  {"form", "spaceDelimited", "pipeDelimited", "deepObject"},
	"header": {"simple"},
	"cookie": {"form"},
}

// Check reports a location or style the OpenAPI Specification does not
// define for the parameter: a style its In does not allow, deepObject
// without explode, and spaceDelimited or pipeDelimited with explode (the
// specification leaves those undefined). It is called once, at load;
// Encode calls it too.
func (p Param) Check() error {
	if p.Name == "" {
		return fmt.Errorf("%s parameter without a name", p.In)
	}
	styles, ok := stylesIn[p.In]
	if !ok {
		return fmt.Errorf("parameter %q: unknown location %q (want path, query, header or cookie)", p.Name, p.In)
	}
	style := p.style()
	if !slices.Contains(styles, style) {
		return fmt.Errorf("%s parameter %q: style %q is not allowed in %s (want %s)",
			p.In, p.Name, style, p.In, strings.Join(styles, ", "))
	}
	switch {
	case style == "deepObject" && !p.explode():
		return fmt.Errorf("%s parameter %q: style deepObject is defined only with explode true", p.In, p.Name)
	case (style == "spaceDelimited" || style == "pipeDelimited") && p.explode():
		return fmt.Errorf("%s parameter %q: style %s is defined only with explode false", p.In, p.Name, style)
	}
	return nil
}

// Encode serializes v, a value decoded from a call's JSON input, as the
// parameter's style and explode say. v is a string, a bool, a number
// (float64, int, int64, jsonread.Number or a jsontext.Value holding a
// number), or a []any or map[string]any of those. Numbers are written as
// JSON writes them; a jsonread.Number keeps its exact text.
//
// A nil v is refused: the caller omits an absent parameter. Inside an
// array or object a null is left out, as RFC 6570 §2.3 leaves out
// undefined values, and an empty array or object (or one of nulls alone)
// is undefined: it adds nothing to a query or cookie, and "" to a path or
// header. An array or object inside an array or object is an error: no
// style can express it.
//
// A map has no order, so an object's members are written sorted by name:
// {"R":100,"G":200,"B":150} in form style without explode is
// "color=B,150,G,200,R,100".
func (p Param) Encode(v any) (Encoded, error) {
	if err := p.Check(); err != nil {
		return Encoded{}, err
	}
	val, err := flatten(v)
	if err != nil {
		return Encoded{}, fmt.Errorf("%s parameter %q: %w", p.In, p.Name, err)
	}
	if val.kind != scalar && len(val.list) == 0 {
		val.kind = undefined
	}
	switch p.In {
	case "path":
		return Encoded{Path: p.expand(val, escapeStrict)}, nil
	case "header":
		h := p.expand(val, func(s string) string { return s })
		if i := strings.IndexFunc(h, isHeaderControl); i >= 0 {
			return Encoded{}, fmt.Errorf("header parameter %q: control character %q not allowed in a header value", p.Name, h[i])
		}
		return Encoded{Header: h}, nil
	case "cookie":
		return Encoded{Pairs: p.form(val, ",", escapeStrict)}, nil
	}
	esc := escapeStrict
	if p.AllowReserved {
		esc = escapeReservedQuery
	}
	pairs, err := p.queryPairs(val, esc)
	return Encoded{Pairs: pairs}, err
}

// value is a parameter's value reduced to what a style can write: one
// scalar, a list of scalars, or name and value pairs sorted by name.
type value struct {
	kind   kind
	scalar string
	list   []string // the list's items, or an object's names and values in turn
}

type kind int

const (
	undefined kind = iota
	scalar
	list
	object
)

// flatten reduces v to a value; its errors are wrapped by Encode.
func flatten(v any) (value, error) {
	switch x := v.(type) {
	case nil:
		return value{}, errors.New("no value")
	case []any:
		var items []string
		for i, e := range x {
			if e == nil {
				continue
			}
			s, err := text(e)
			if err != nil {
				return value{}, fmt.Errorf("item %d: %w", i, err)
			}
			items = append(items, s)
		}
		return value{kind: list, list: items}, nil
	case map[string]any:
		var kv []string
		for _, k := range slices.Sorted(maps.Keys(x)) {
			if x[k] == nil {
				continue
			}
			s, err := text(x[k])
			if err != nil {
				return value{}, fmt.Errorf("member %q: %w", k, err)
			}
			kv = append(kv, k, s)
		}
		return value{kind: object, list: kv}, nil
	}
	s, err := text(v)
	return value{kind: scalar, scalar: s}, err
}

var errNested = errors.New("an array or object inside an array or object has no serialization in any style")

// text writes one scalar as JSON would, without a string's quotes.
func text(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case bool:
		return strconv.FormatBool(x), nil
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return "", fmt.Errorf("%v is not a JSON number", x)
		}
		return strconv.FormatFloat(x, 'f', -1, 64), nil
	case int:
		return strconv.Itoa(x), nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	case jsonread.Number:
		return string(x), nil
	case jsontext.Value:
		if x.Kind() == '0' {
			return string(x), nil
		}
	case []any, map[string]any:
		return "", errNested
	}
	return "", fmt.Errorf("unsupported value of type %T", v)
}

// expand writes val in the path styles (matrix, label, simple) and in the
// header's simple style, as RFC 6570 expands {;name}, {.name} and {name}.
func (p Param) expand(val value, esc func(string) string) string {
	prefix, sep, named := "", ",", false
	switch p.style() {
	case "matrix":
		prefix, sep, named = ";", ";", true
	case "label":
		prefix, sep = ".", "."
	}
	// pair is RFC 6570's "name=value" for ';', which drops the '=' of an
	// empty value; the other two keep it.
	pair := func(k, v string) string {
		if named && v == "" {
			return k
		}
		return k + "=" + v
	}
	switch {
	case val.kind == undefined:
		return ""
	case val.kind == scalar && named:
		return prefix + pair(esc(p.Name), esc(val.scalar))
	case val.kind == scalar:
		return prefix + esc(val.scalar)
	case !p.explode() && named:
		return prefix + esc(p.Name) + "=" + joinEscaped(val.list, ",", esc)
	case !p.explode():
		return prefix + joinEscaped(val.list, ",", esc)
	}
	var parts []string
	if val.kind == list {
		for _, item := range val.list {
			if named {
				parts = append(parts, pair(esc(p.Name), esc(item)))
			} else {
				parts = append(parts, esc(item))
			}
		}
	} else {
		for i := 0; i < len(val.list); i += 2 {
			parts = append(parts, pair(esc(val.list[i]), esc(val.list[i+1])))
		}
	}
	return prefix + strings.Join(parts, sep)
}

// form writes val in form style, as RFC 6570 expands {?name} without the
// leading '?' and with each pair on its own; spaceDelimited and
// pipeDelimited are form with their own delimiter between the items of an
// unexploded array or object.
func (p Param) form(val value, delim string, esc func(string) string) []string {
	name := escapeStrict(p.Name)
	switch {
	case val.kind == undefined:
		return nil
	case val.kind == scalar:
		return []string{name + "=" + esc(val.scalar)}
	case !p.explode():
		return []string{name + "=" + joinEscaped(val.list, delim, esc)}
	}
	var out []string
	if val.kind == list {
		for _, item := range val.list {
			out = append(out, name+"="+esc(item))
		}
	} else {
		for i := 0; i < len(val.list); i += 2 {
			out = append(out, esc(val.list[i])+"="+esc(val.list[i+1]))
		}
	}
	return out
}

func (p Param) queryPairs(val value, esc func(string) string) ([]string, error) {
	style := p.style()
	switch {
	case style == "form":
		return p.form(val, ",", esc), nil
	case style == "deepObject" && val.kind == object:
		name := escapeStrict(p.Name)
		out := make([]string, 0, len(val.list)/2)
		for i := 0; i < len(val.list); i += 2 {
			// The brackets are percent-encoded, as the OpenAPI Specification's
			// examples write them: RFC 3986 allows no '[' or ']' in a query.
			out = append(out, name+"%5B"+esc(val.list[i])+"%5D="+esc(val.list[i+1]))
		}
		return out, nil
	case val.kind == undefined:
		return nil, nil
	case style == "deepObject":
		return nil, fmt.Errorf("query parameter %q: style deepObject takes an object", p.Name)
	case val.kind == scalar:
		return nil, fmt.Errorf("query parameter %q: style %s takes an array or an object", p.Name, style)
	case style == "spaceDelimited":
		return p.form(val, "%20", esc), nil
	default: // pipeDelimited; '|' is encoded too, for RFC 3986 allows no '|' in a query
		return p.form(val, "%7C", esc), nil
	}
}

func joinEscaped(items []string, sep string, esc func(string) string) string {
	var b strings.Builder
	for i, s := range items {
		if i > 0 {
			b.WriteString(sep)
		}
		b.WriteString(esc(s))
	}
	return b.String()
}

// isHeaderControl reports the characters net/http refuses in a header
// value (all controls but the tab); refusing them here names the parameter.
// CR and LF would otherwise start a header of the caller's choosing.
func isHeaderControl(r rune) bool {
	return r < ' ' && r != '\t' || r == 0x7f
}

func isUnreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}

// escapeStrict keeps RFC 3986 unreserved characters alone, so a path value
// stays in its segment and a query or cookie value holds nothing that
// splits it. A cookie value then holds only characters RFC 6265 allows,
// but for the ',' form style puts between items, which servers accept.
func escapeStrict(s string) string { return escape(s, isUnreserved) }

// escapeReservedQuery is the escaping of a query value with allowReserved:
// RFC 3986 reserved characters stay, but for four that still change what
// the query says however the document meant them: '&' would end the pair,
// '#' the whole query (what follows is a fragment the server never sees),
// '=' would end a deepObject or exploded object's name, and '+' reads as a
// space to every form-urlencoded parser. '%' is always encoded: a literal
// one would make the value decode to something else.
func escapeReservedQuery(s string) string {
	return escape(s, func(c byte) bool {
		return isUnreserved(c) || strings.IndexByte(":/?[]@!$'()*,;", c) >= 0
	})
}

func escape(s string, keep func(byte) bool) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if c := s[i]; keep(c) {
			b.WriteByte(c)
		} else {
			b.Write([]byte{'%', hex[c>>4], hex[c&15]})
		}
	}
	return b.String()
}
