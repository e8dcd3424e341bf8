package refs_test

import (
	"bytes"
	"errors"
	"math"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/toolgate/toolgate/internal/jsonread"
	"github.com/toolgate/toolgate/internal/refs"
)

// decode turns a JSON literal into the shape a call's input has: maps,
// slices, strings, jsonread.Number, bools and nil.
func decode(t testing.TB, s string) any {
	t.Helper()
	v, err := jsonread.Value(jsontext.NewDecoder(strings.NewReader(s)))
	if err != nil {
		t.Fatalf("decode %q: %v", s, err)
	}
	return v
}

const sampleInput = `{
	"a": {"b": "deep", "n": 7},
	"s": "hello world",
	"n": 3.140,
	"big": 12345678901234567890,
	"t": true,
	"z": null,
	"items": ["zero", {"id": "one"}, 2],
	"html": {"x": "<b>&</b>"},
	"my-key_1": "dash",
	"1": "numeric key",
	"secret": "${env.SECRET}",
	"esc": "$${env.SECRET}",
	"quote": "he said \"hi\""
}`

func sampleScope(t testing.TB) refs.Scope {
	return refs.Scope{
		Input: decode(t, sampleInput),
		Env:   map[string]string{"NAME": "gw", "SECRET": "s3cr3t", "API_KEY": "k-1", "REF": "${input.s}"},
	}
}

func TestParse(t *testing.T) {
	tests := []struct {
		name string
		src  string
		refs []refs.Ref
	}{
		{"plain", "no refs here", nil},
		{"empty string", "", nil},
		{"whole input", "${input}", []refs.Ref{{Root: "input", Path: []string{}, Text: "${input}"}}},
		{"nested input", "${input.a.b}", []refs.Ref{{Root: "input", Path: []string{"a", "b"}, Text: "${input.a.b}"}}},
		{"array item", "${input.items.0}", []refs.Ref{{Root: "input", Path: []string{"items", "0"}, Text: "${input.items.0}"}}},
		{"dash and underscore", "${input.my-key_1}", []refs.Ref{{Root: "input", Path: []string{"my-key_1"}, Text: "${input.my-key_1}"}}},
		{"env", "${env.API_KEY}", []refs.Ref{{Root: "env", Path: []string{"API_KEY"}, Text: "${env.API_KEY}"}}},
		{"connection", "Bearer ${connection.gmail}", []refs.Ref{{Root: "connection", Path: []string{"gmail"}, Text: "${connection.gmail}"}}},
		{"in text", "https://h/${input.a}/x?q=${env.NAME}", []refs.Ref{
			{Root: "input", Path: []string{"a"}, Text: "${input.a}"},
			{Root: "env", Path: []string{"NAME"}, Text: "${env.NAME}"},
		}},
		{"adjacent", "${input.a}${input.b}", []refs.Ref{
			{Root: "input", Path: []string{"a"}, Text: "${input.a}"},
			{Root: "input", Path: []string{"b"}, Text: "${input.b}"},
		}},
		{"escape is not a ref", "$${input}", nil},
		{"escape of an invalid ref is not an error", "$${foo}", nil},
		{"escape of an unterminated ref", "$${", nil},
		{"escape then ref", "$${env.X} and ${env.X}", []refs.Ref{{Root: "env", Path: []string{"X"}, Text: "${env.X}"}}},
		{"lone dollars and braces", "$ $$ } {x} $x", nil},
		{"dollar before escape", "$$${input}", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tmpl, err := refs.Parse(tt.src)
			if err != nil {
				t.Fatalf("Parse(%q): %v", tt.src, err)
			}
			if tmpl.Source() != tt.src {
				t.Errorf("Source() = %q, want %q", tmpl.Source(), tt.src)
			}
			got := tmpl.Refs()
			if len(got) != len(tt.refs) {
				t.Fatalf("Refs() = %+v, want %+v", got, tt.refs)
			}
			for i := range got {
				w := tt.refs[i]
				if got[i].Root != w.Root || got[i].Text != w.Text || got[i].String() != w.Text ||
					len(got[i].Path) != len(w.Path) || (len(w.Path) > 0 && !reflect.DeepEqual(got[i].Path, w.Path)) {
					t.Errorf("Refs()[%d] = %+v, want %+v", i, got[i], w)
				}
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want string // in the message: which rule broke
	}{
		{"unterminated", "${input", "unterminated"},
		{"unterminated after text", "abc ${input.a", "unterminated"},
		{"unterminated bare", "${", "unterminated"},
		{"unterminated after a good ref", "${input} ${env.X", "unterminated"},
		{"empty", "${}", "empty"},
		{"unknown root", "${foo}", "unknown reference ${foo}"},
		{"unknown root with path", "${foo.bar}", "unknown reference ${foo.bar}"},
		{"root is case sensitive", "${INPUT}", "unknown reference ${INPUT}"},
		{"process env is not a root", "${PATH}", "unknown reference ${PATH}"},
		{"trailing dot", "${input.}", "bad segment"},
		{"leading dot", "${.input}", "bad segment"},
		{"double dot", "${input..a}", "bad segment"},
		{"space in segment", "${input.a b}", "bad segment"},
		{"spaces around", "${ input }", "bad segment"},
		{"slash in segment", "${input.a/b}", "bad segment"},
		{"bracket index", "${input.items[0]}", "bad segment"},
		{"nested ref", "${input.${input}}", "bad segment"},
		{"env without name", "${env}", "want ${env.NAME}"},
		{"env with path", "${env.A.B}", "want ${env.NAME}"},
		{"connection without name", "${connection}", "want ${connection.NAME}"},
		{"connection with path", "${connection.gmail.token}", "want ${connection.NAME}"},
		{"env empty name", "${env.}", "bad segment"},
		{"bad ref after escape", "$${ok} ${nope}", "${nope}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tmpl, err := refs.Parse(tt.src)
			if err == nil {
				t.Fatalf("Parse(%q) = %+v, want an error", tt.src, tmpl.Refs())
			}
			if tmpl != nil {
				t.Errorf("Parse(%q) returned a template with the error", tt.src)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Parse(%q) error = %q, want it to contain %q", tt.src, err, tt.want)
			}
		})
	}
}

func TestMustParsePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("MustParse(\"${foo}\") did not panic")
		}
	}()
	refs.MustParse("${foo}")
}

func TestExpand(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want string
	}{
		{"no refs", "plain", "plain"},
		{"whole input is compact JSON with sorted keys", "${input.a}", `{"b":"deep","n":7}`},
		{"nested string raw", "${input.a.b}", "deep"},
		{"string with quotes raw", "${input.quote}", `he said "hi"`},
		{"number keeps its exact text", "${input.n}", "3.140"},
		{"big number keeps its exact text", "${input.big}", "12345678901234567890"},
		{"bool", "${input.t}", "true"},
		{"present null", "${input.z}", "null"},
		{"array item 0", "${input.items.0}", "zero"},
		{"array item object field", "${input.items.1.id}", "one"},
		{"array item number", "${input.items.2}", "2"},
		{"whole array", "${input.items}", `["zero",{"id":"one"},2]`},
		{"no HTML escaping", "${input.html}", `{"x":"<b>&</b>"}`},
		{"numeric map key", "${input.1}", "numeric key"},
		{"dash key", "${input.my-key_1}", "dash"},
		{"env", "${env.NAME}", "gw"},
		{"spliced", "pre-${input.a.b}-${env.API_KEY}-post", "pre-deep-k-1-post"},
		{"adjacent", "${input.a.b}${input.items.0}", "deepzero"},
		{"escape is literal", "$${input.s}", "${input.s}"},
		{"escape next to a ref", "$${env.NAME}=${env.NAME}", "${env.NAME}=gw"},
		{"one pass: input holding an env ref", "x=${input.secret}", "x=${env.SECRET}"},
		{"one pass: input holding an escape", "${input.esc}", "$${env.SECRET}"},
		{"one pass: env holding an input ref", "${env.REF}", "${input.s}"},
	}
	s := sampleScope(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := refs.MustParse(tt.src).Expand(s, nil)
			if err != nil {
				t.Fatalf("Expand(%q): %v", tt.src, err)
			}
			if got != tt.want {
				t.Errorf("Expand(%q) = %q, want %q", tt.src, got, tt.want)
			}
		})
	}
}

func TestExpandWholeInput(t *testing.T) {
	in := decode(t, `{"b":[1,2.50],"a":"<x>"}`)
	got, err := refs.MustParse("${input}").Expand(refs.Scope{Input: in}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"a":"<x>","b":[1,2.50]}`; got != want {
		t.Errorf("Expand(${input}) = %q, want %q", got, want)
	}
}

func TestMissing(t *testing.T) {
	tests := []struct {
		name   string
		src    string
		ref    string // the reference the error must name
		reason string
	}{
		{"absent key", "${input.nope}", "${input.nope}", `"nope"`},
		{"absent nested key", "${input.a.nope}", "${input.a.nope}", `"a.nope"`},
		{"absent parent", "${input.x.y.z}", "${input.x.y.z}", `"x"`},
		{"through a string", "${input.s.len}", "${input.s.len}", "not an object or array"},
		{"through a number", "${input.n.x}", "${input.n.x}", "not an object or array"},
		{"through null", "${input.z.x}", "${input.z.x}", "not an object or array"},
		{"index out of range", "${input.items.3}", "${input.items.3}", "array of 3"},
		{"far out of range", "${input.items.99999999999999999999}", "${input.items.99999999999999999999}", "array of 3"},
		{"negative index", "${input.items.-1}", "${input.items.-1}", "array of 3"},
		{"leading zero index", "${input.items.01}", "${input.items.01}", "array of 3"},
		{"key on an array", "${input.items.id}", "${input.items.id}", "array of 3"},
		{"unknown env", "${env.NOPE}", "${env.NOPE}", `no env "NOPE"`},
		{"env names are case sensitive", "${env.name}", "${env.name}", `no env "name"`},
		{"missing in the middle of text", "a/${input.s}/${input.nope}/b", "${input.nope}", `"nope"`},
	}
	s := sampleScope(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := refs.MustParse(tt.src).Expand(s, nil)
			if err == nil {
				t.Fatalf("Expand(%q) = %q, want a missing error", tt.src, got)
			}
			if got != "" {
				t.Errorf("Expand(%q) returned %q with the error", tt.src, got)
			}
			var me *refs.MissingError
			if !errors.As(err, &me) {
				t.Fatalf("Expand(%q) error %T %v, want *refs.MissingError", tt.src, err, err)
			}
			if me.Ref != tt.ref {
				t.Errorf("MissingError.Ref = %q, want %q", me.Ref, tt.ref)
			}
			if !strings.Contains(err.Error(), tt.ref) {
				t.Errorf("error %q does not name %s", err, tt.ref)
			}
			if !strings.Contains(err.Error(), tt.reason) {
				t.Errorf("error %q does not say %s", err, tt.reason)
			}
		})
	}
}

func TestMissingScopes(t *testing.T) {
	tests := []struct {
		name  string
		src   string
		scope refs.Scope
	}{
		{"nil env", "${env.NAME}", refs.Scope{}},
		{"nil input with a path", "${input.a}", refs.Scope{Env: map[string]string{"a": "x"}}},
		{"string input with a path", "${input.a}", refs.Scope{Input: "a"}},
		{"env does not fall back to input", "${env.a}", refs.Scope{Input: map[string]any{"a": "x"}}},
		{"input does not fall back to env", "${input.NAME}", refs.Scope{Input: map[string]any{}, Env: map[string]string{"NAME": "x"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := refs.MustParse(tt.src).Refs()[0]
			v, err := r.Resolve(tt.scope)
			var me *refs.MissingError
			if !errors.As(err, &me) || me.Ref != tt.src {
				t.Fatalf("Resolve(%s) = %v, %v; want a MissingError naming it", tt.src, v, err)
			}
		})
	}
}

func TestRefResolveUnknownRoot(t *testing.T) {
	r := refs.Ref{Root: "foo", Text: "${foo}"}
	_, err := r.Resolve(refs.Scope{Input: map[string]any{"foo": 1}})
	var me *refs.MissingError
	if !errors.As(err, &me) || me.Ref != "${foo}" || !strings.Contains(err.Error(), "unknown root") {
		t.Errorf("Resolve of an unknown root = %v, want a MissingError naming ${foo}", err)
	}
}

func TestRefResolveKeepsType(t *testing.T) {
	s := sampleScope(t)
	tests := []struct {
		src  string
		want any
	}{
		{"${input.a}", map[string]any{"b": "deep", "n": jsonread.Number("7")}},
		{"${input.n}", jsonread.Number("3.140")},
		{"${input.t}", true},
		{"${input.z}", nil},
		{"${input.items.1}", map[string]any{"id": "one"}},
		{"${env.NAME}", "gw"},
	}
	for _, tt := range tests {
		t.Run(tt.src, func(t *testing.T) {
			got, err := refs.MustParse(tt.src).Refs()[0].Resolve(s)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Resolve(%s) = %#v, want %#v", tt.src, got, tt.want)
			}
		})
	}
}

func TestExpandUnencodable(t *testing.T) {
	s := refs.Scope{Input: map[string]any{"f": math.NaN()}}
	got, err := refs.MustParse("v=${input.f}").Expand(s, nil)
	if err == nil || !strings.Contains(err.Error(), "${input.f}") {
		t.Errorf("Expand of NaN = %q, %v; want an error naming ${input.f}", got, err)
	}
}

func TestExpandEncoder(t *testing.T) {
	s := refs.Scope{Input: decode(t, `{"p":"../a b/c?d#e","obj":{"k":"v/w"},"n":1.50}`)}
	tests := []struct {
		name string
		src  string
		enc  refs.Encoder
		want string
	}{
		{"path escape cannot climb", "https://h/files/${input.p}", pathEscape, "https://h/files/..%2Fa%20b%2Fc%3Fd%23e"},
		{"query escape", "https://h/s?q=${input.p}", queryEscape, "https://h/s?q=..%2Fa+b%2Fc%3Fd%23e"},
		{"encoder sees compact JSON", "https://h/${input.obj}", pathEscape, "https://h/%7B%22k%22:%22v%2Fw%22%7D"},
		{"encoder sees number text", "https://h/${input.n}", pathEscape, "https://h/1.50"},
		{"literals are not encoded", "https://h/a b/${input.n}", pathEscape, "https://h/a b/1.50"},
		{"nil encoder is raw", "https://h/${input.p}", nil, "https://h/../a b/c?d#e"},
		{"no refs skip the encoder", "x/$${y}", upper, "x/${y}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := refs.MustParse(tt.src).Expand(s, tt.enc)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("Expand(%q) = %q, want %q", tt.src, got, tt.want)
			}
		})
	}
}

// The url escapers as Encoders, which never refuse a value.
var (
	pathEscape  refs.Encoder = func(s string) (string, error) { return url.PathEscape(s), nil }
	queryEscape refs.Encoder = func(s string) (string, error) { return url.QueryEscape(s), nil }
	upper       refs.Encoder = func(s string) (string, error) { return strings.ToUpper(s), nil }
)

// TestExpandEncoderRefuses checks that an encoder's refusal fails the
// expansion with the reference named, its reason kept for errors.Is, and
// no partial text returned.
func TestExpandEncoderRefuses(t *testing.T) {
	errNoSlash := errors.New("no slash here")
	refuse := func(s string) (string, error) {
		if strings.Contains(s, "/") {
			return "", errNoSlash
		}
		return s, nil
	}
	s := refs.Scope{Input: decode(t, `{"ok":"a","bad":"a/b"}`)}
	got, err := refs.MustParse("/x/${input.ok}/${input.bad}").ExpandEach(s, []refs.Encoder{refuse, refuse})
	if !errors.Is(err, errNoSlash) || !strings.Contains(err.Error(), "reference ${input.bad}: ") {
		t.Errorf("ExpandEach error = %v; want one naming ${input.bad} and wrapping the encoder's", err)
	}
	if got != "" {
		t.Errorf("ExpandEach returned %q with its error", got)
	}
	if _, err := refs.MustParse("/x/${input.ok}/${input.bad}").ExpandEach(s, []refs.Encoder{refuse, nil}); err != nil {
		t.Errorf("a nil encoder for the second reference still refused: %v", err)
	}
}

func TestExpandEach(t *testing.T) {
	s := refs.Scope{Input: decode(t, `{"a":"x/y z","b":"1&2=3"}`), Env: map[string]string{"K": "k v"}}
	tests := []struct {
		name string
		src  string
		encs []refs.Encoder
		want string
	}{
		{"path then query", "https://h/${input.a}?q=${input.b}", []refs.Encoder{pathEscape, queryEscape}, "https://h/x%2Fy%20z?q=1%262%3D3"},
		{"same ref, two encoders", "/${input.a}?a=${input.a}", []refs.Encoder{pathEscape, queryEscape}, "/x%2Fy%20z?a=x%2Fy+z"},
		{"nil encoder leaves raw", "/${input.a}?q=${input.b}", []refs.Encoder{nil, queryEscape}, "/x/y z?q=1%262%3D3"},
		{"fewer encoders than refs", "/${input.a}/${input.b}/${env.K}", []refs.Encoder{pathEscape}, "/x%2Fy%20z/1&2=3/k v"},
		{"no encoders", "/${input.a}", nil, "/x/y z"},
		{"escape does not take an encoder", "$${input.a}/${input.a}", []refs.Encoder{pathEscape}, "${input.a}/x%2Fy%20z"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := refs.MustParse(tt.src).ExpandEach(s, tt.encs)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("ExpandEach(%q) = %q, want %q", tt.src, got, tt.want)
			}
		})
	}
}

func TestExpandEachMissing(t *testing.T) {
	_, err := refs.MustParse("/${input.a}?q=${input.b}").ExpandEach(
		refs.Scope{Input: map[string]any{"a": "x"}}, []refs.Encoder{pathEscape, queryEscape})
	var me *refs.MissingError
	if !errors.As(err, &me) || me.Ref != "${input.b}" {
		t.Errorf("ExpandEach error = %v, want a MissingError naming ${input.b}", err)
	}
}

func TestLiteralBefore(t *testing.T) {
	tests := []struct {
		name string
		src  string
		i    int
		want string
	}{
		{"first ref", "https://h/${input.a}/x?q=${input.b}&r=1", 0, "https://h/"},
		{"second ref skips the first", "https://h/${input.a}/x?q=${input.b}&r=1", 1, "https://h//x?q="},
		{"past the last ref is all literal", "https://h/${input.a}/x?q=${input.b}&r=1", 2, "https://h//x?q=&r=1"},
		{"ref at start", "${input.a}/x", 0, ""},
		{"adjacent refs", "${input.a}${input.b}", 1, ""},
		{"escape is unescaped", "$${x}?${input.a}", 0, "${x}?"},
		{"no refs", "a$${b}", 0, "a${b}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := refs.MustParse(tt.src).LiteralBefore(tt.i); got != tt.want {
				t.Errorf("LiteralBefore(%q, %d) = %q, want %q", tt.src, tt.i, got, tt.want)
			}
		})
	}
}

func TestLiteralBeforeFirst(t *testing.T) {
	tests := []struct{ src, want string }{
		{"https://h/${input.a}/x", "https://h/"},
		{"${input.a}/x", ""},
		{"plain", "plain"},
		{"", ""},
		{"$${a}${input.a}", "${a}"},
	}
	for _, tt := range tests {
		t.Run(tt.src, func(t *testing.T) {
			if got := refs.MustParse(tt.src).LiteralBefore(0); got != tt.want {
				t.Errorf("LiteralBefore(0) of %q = %q, want %q", tt.src, got, tt.want)
			}
		})
	}
}

func TestSkeleton(t *testing.T) {
	tests := []struct {
		name, src, repl, want string
	}{
		{"url", "https://${input.host}/a/${input.id}?q=${env.K}", "X", "https://X/a/X?q=X"},
		{"empty repl", "a${input}b", "", "ab"},
		{"no refs", "plain", "X", "plain"},
		{"escape is unescaped", "$${input}/${input.a}", "_", "${input}/_"},
		{"only a ref", "${input}", "R", "R"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := refs.MustParse(tt.src).Skeleton(tt.repl); got != tt.want {
				t.Errorf("Skeleton(%q, %q) = %q, want %q", tt.src, tt.repl, got, tt.want)
			}
		})
	}
}

func TestLiteral(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want string
		ok   bool
	}{
		{"plain", "plain", "plain", true},
		{"empty", "", "", true},
		{"escape", "$${input}", "${input}", true},
		{"escapes and dollars", "$ $${a} $${b}$", "$ ${a} ${b}$", true},
		{"ref", "${input}", "", false},
		{"ref in text", "a${input.a}", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := refs.MustParse(tt.src).Literal()
			if got != tt.want || ok != tt.ok {
				t.Errorf("Literal(%q) = %q, %v; want %q, %v", tt.src, got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestSingle(t *testing.T) {
	tests := []struct {
		name string
		src  string
		ok   bool
	}{
		{"whole input", "${input}", true},
		{"nested", "${input.a.b}", true},
		{"env", "${env.NAME}", true},
		{"leading space", " ${input.a}", false},
		{"trailing text", "${input.a}!", false},
		{"two refs", "${input.a}${input.b}", false},
		{"plain", "plain", false},
		{"escape", "$${input}", false},
		{"empty", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, ok := refs.MustParse(tt.src).Single()
			if ok != tt.ok {
				t.Fatalf("Single(%q) ok = %v, want %v", tt.src, ok, tt.ok)
			}
			if ok && r.Text != tt.src {
				t.Errorf("Single(%q) = %q", tt.src, r.Text)
			}
			if !ok && r.Text != "" {
				t.Errorf("Single(%q) = %q with ok=false", tt.src, r.Text)
			}
		})
	}
}

func TestText(t *testing.T) {
	tests := []struct {
		name string
		v    any
		want string
	}{
		{"string raw", `a"b<c>`, `a"b<c>`},
		{"number", jsonread.Number("1e3"), "1e3"},
		{"float", 2.5, "2.5"},
		{"nil", nil, "null"},
		{"bool", false, "false"},
		{"object sorted, no HTML escaping", map[string]any{"z": "<&>", "a": []any{1, "x"}}, `{"a":[1,"x"],"z":"<&>"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := refs.Text(tt.v)
			if err != nil || got != tt.want {
				t.Errorf("Text(%#v) = %q, %v; want %q", tt.v, got, err, tt.want)
			}
		})
	}
	if _, err := refs.Text(jsonread.Number("not a number")); err == nil {
		t.Error("Text of an invalid jsonread.Number did not fail")
	}
}

func TestValueResolve(t *testing.T) {
	s := sampleScope(t)
	tests := []struct {
		name string
		body string
		want string // compact JSON the resolved document must encode to
		typ  func(any) bool
	}{
		{
			name: "whole input stays an object",
			body: `"${input.a}"`,
			want: `{"b":"deep","n":7}`,
			typ:  func(v any) bool { _, ok := v.(map[string]any); return ok },
		},
		{
			name: "number stays a number with its exact text",
			body: `{"n":"${input.n}","big":"${input.big}"}`,
			want: `{"big":12345678901234567890,"n":3.140}`,
			typ: func(v any) bool {
				m := v.(map[string]any)
				return m["n"] == jsonread.Number("3.140") && m["big"] == jsonread.Number("12345678901234567890")
			},
		},
		{
			name: "bool, null and array keep their types",
			body: `{"t":"${input.t}","z":"${input.z}","arr":"${input.items}"}`,
			want: `{"arr":["zero",{"id":"one"},2],"t":true,"z":null}`,
			typ: func(v any) bool {
				m := v.(map[string]any)
				_, isArr := m["arr"].([]any)
				z, hasZ := m["z"]
				return m["t"] == true && hasZ && z == nil && isArr
			},
		},
		{
			name: "string inside a longer string is spliced raw",
			body: `{"greeting":"say: ${input.quote}!"}`,
			want: `{"greeting":"say: he said \"hi\"!"}`,
		},
		{
			name: "number inside a longer string is its text",
			body: `{"id":"n-${input.n}"}`,
			want: `{"id":"n-3.140"}`,
			typ:  func(v any) bool { return v.(map[string]any)["id"] == "n-3.140" },
		},
		{
			name: "object inside a longer string is compact JSON without HTML escaping",
			body: `{"q":"filter=${input.html}"}`,
			want: `{"q":"filter={\"x\":\"<b>&</b>\"}"}`,
			typ:  func(v any) bool { return v.(map[string]any)["q"] == `filter={"x":"<b>&</b>"}` },
		},
		{
			name: "env in a header-like string",
			body: `{"auth":"Bearer ${env.API_KEY}","raw":"${env.API_KEY}"}`,
			want: `{"auth":"Bearer k-1","raw":"k-1"}`,
		},
		{
			name: "refs in arrays and nested objects",
			body: `{"list":["${input.a.b}",{"deep":["${input.items.1.id}",1.0]}],"lit":[1,"x"]}`,
			want: `{"list":["deep",{"deep":["one",1.0]}],"lit":[1,"x"]}`,
		},
		{
			name: "literal numbers keep their text",
			body: `{"f":1.10,"e":1E+2,"i":-0,"r":"${input.s}"}`,
			want: `{"e":1E+2,"f":1.10,"i":-0,"r":"hello world"}`,
		},
		{
			name: "escape gives a literal and is not resolved",
			body: `{"tmpl":"$${input.s}","mix":"$${env.SECRET} ${env.NAME}"}`,
			want: `{"mix":"${env.SECRET} gw","tmpl":"${input.s}"}`,
		},
		{
			name: "one pass: input holding an env ref is sent literally",
			body: `{"v":"${input.secret}","t":"x ${input.secret} y","e":"${input.esc}"}`,
			want: `{"e":"$${env.SECRET}","t":"x ${env.SECRET} y","v":"${env.SECRET}"}`,
		},
		{
			name: "one pass: whole input holding refs",
			body: `"${input}"`,
			typ: func(v any) bool {
				m := v.(map[string]any)
				return m["secret"] == "${env.SECRET}" && m["esc"] == "$${env.SECRET}"
			},
		},
		{
			name: "no refs at all",
			body: `{"a":[1,2,{"b":"<c>"}]}`,
			want: `{"a":[1,2,{"b":"<c>"}]}`,
		},
		{
			name: "scalar document",
			body: `"id ${input.items.0}"`,
			want: `"id zero"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			val, err := refs.ParseJSON([]byte(tt.body))
			if err != nil {
				t.Fatalf("ParseJSON(%s): %v", tt.body, err)
			}
			v, err := val.Resolve(s)
			if err != nil {
				t.Fatalf("Resolve: %v", err)
			}
			if tt.typ != nil && !tt.typ(v) {
				t.Errorf("Resolve(%s) = %#v: wrong type or value", tt.body, v)
			}
			out, err := val.ResolveJSON(s)
			if err != nil {
				t.Fatalf("ResolveJSON: %v", err)
			}
			if bytes.HasSuffix(out, []byte("\n")) {
				t.Errorf("ResolveJSON(%s) ends with a newline", tt.body)
			}
			if tt.want != "" && string(out) != tt.want {
				t.Errorf("ResolveJSON(%s) =\n  %s\nwant\n  %s", tt.body, out, tt.want)
			}
		})
	}
}

func TestValueResolveIsRepeatable(t *testing.T) {
	val, err := refs.ParseJSON([]byte(`{"lit":{"k":[1,2]},"v":"${input.x}","t":"a ${input.x}"}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range []string{"one", "two", "${input.x}"} {
		out, err := val.ResolveJSON(refs.Scope{Input: map[string]any{"x": x}})
		if err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(map[string]any{"lit": map[string]any{"k": []int{1, 2}}, "v": x, "t": "a " + x}, json.Deterministic(true))
		if !bytes.Equal(out, want) {
			t.Errorf("call with x=%q: got %s, want %s", x, out, want)
		}
	}
}

func TestValueMissing(t *testing.T) {
	tests := []struct {
		name, body, ref string
	}{
		{"single", `{"a":"${input.nope}"}`, "${input.nope}"},
		{"spliced", `{"a":"x ${env.NOPE}"}`, "${env.NOPE}"},
		{"deep in an array", `{"a":[1,{"b":["${input.items.7}"]}]}`, "${input.items.7}"},
		{"top level", `"${input.a.nope}"`, "${input.a.nope}"},
	}
	s := sampleScope(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			val, err := refs.ParseJSON([]byte(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			v, err := val.Resolve(s)
			var me *refs.MissingError
			if !errors.As(err, &me) || me.Ref != tt.ref {
				t.Errorf("Resolve(%s) = %v, %v; want a MissingError naming %s", tt.body, v, err, tt.ref)
			}
			out, err := val.ResolveJSON(s)
			if !errors.As(err, &me) || out != nil {
				t.Errorf("ResolveJSON(%s) = %s, %v; want no body and a MissingError", tt.body, out, err)
			}
		})
	}
}

func TestValueRefs(t *testing.T) {
	val, err := refs.ParseJSON([]byte(`{"b":"${env.B}","a":["${input.x}","y ${input.z} ${input.w}",{"c":"$${input.no}"}],"n":1}`))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range val.Refs() {
		got = append(got, r.Text)
	}
	want := []string{"${input.x}", "${input.z}", "${input.w}", "${env.B}"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Refs() = %q, want %q", got, want)
	}
}

func TestParseJSONErrors(t *testing.T) {
	tests := []struct {
		name string
		body string
		want string
	}{
		{"invalid JSON", `{"a":`, "invalid JSON"},
		{"empty", ``, "invalid JSON"},
		{"trailing value", `{"a":1} {"b":2}`, "trailing data"},
		{"trailing garbage", `{"a":1} x`, "invalid JSON"},
		{"trailing close bracket", `{"a":"${input}"}]`, "invalid JSON"},
		{"trailing close brace", `{"a":1}}`, "invalid JSON"},
		{"scalar with trailing bracket", `1]`, "invalid JSON"},
		{"bad ref names its key", `{"hdr":{"x":"${foo}"}}`, "hdr: x: unknown reference ${foo}"},
		{"bad ref names its index", `{"list":["ok","${input."]}`, "list: [1]: unterminated"},
		{"empty ref", `["${}"]`, "[0]: empty reference"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			val, err := refs.ParseJSON([]byte(tt.body))
			if err == nil {
				t.Fatalf("ParseJSON(%s) = %v, want an error", tt.body, val)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("ParseJSON(%s) error = %q, want it to contain %q", tt.body, err, tt.want)
			}
		})
	}
}

func TestParseJSONWhitespace(t *testing.T) {
	val, err := refs.ParseJSON([]byte(" \n\t{\"a\":\"${input.x}\"}\r\n "))
	if err != nil {
		t.Fatalf("ParseJSON with surrounding whitespace: %v", err)
	}
	out, err := val.ResolveJSON(refs.Scope{Input: map[string]any{"x": jsonread.Number("5")}})
	if err != nil || string(out) != `{"a":5}` {
		t.Errorf("ResolveJSON = %s, %v; want {\"a\":5}", out, err)
	}
}

func TestCompile(t *testing.T) {
	val, err := refs.Compile(map[string]any{"a": "${input.x}", "b": []any{"v=${input.x}", 2}})
	if err != nil {
		t.Fatal(err)
	}
	out, err := val.ResolveJSON(refs.Scope{Input: map[string]any{"x": []any{true}}})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"a":[true],"b":["v=[true]",2]}`; string(out) != want {
		t.Errorf("ResolveJSON = %s, want %s", out, want)
	}
	if _, err := refs.Compile([]any{"${env}"}); err == nil {
		t.Error("Compile of a bad reference did not fail")
	}
}

// TestResolveConnection: ${connection.NAME} is the token the scope holds
// for NAME; one not at hand is a MissingError naming the reference, never
// another connection's token.
func TestResolveConnection(t *testing.T) {
	tmpl := refs.MustParse("Bearer ${connection.gmail}")
	got, err := tmpl.Expand(refs.Scope{Connections: map[string]string{"gmail": "at_1", "cal": "at_2"}}, nil)
	if err != nil || got != "Bearer at_1" {
		t.Fatalf("Expand = %q, %v", got, err)
	}
	_, err = tmpl.Expand(refs.Scope{Connections: map[string]string{"cal": "at_2"}}, nil)
	var missing *refs.MissingError
	if !errors.As(err, &missing) || missing.Ref != "${connection.gmail}" || strings.Contains(err.Error(), "at_2") {
		t.Fatalf("a connection not at hand: %v", err)
	}
}
