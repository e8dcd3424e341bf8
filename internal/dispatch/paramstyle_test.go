package dispatch_test

import (
	"math"
	"net/url"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/toolgate/toolgate/internal/dispatch"
	"github.com/toolgate/toolgate/internal/jsonread"
)

func ptr(b bool) *bool { return &b }

// rendered is what a parameter adds to a request, written as the OpenAPI
// Specification's examples write it: a query's pairs joined with '&', a
// cookie's with "; ".
func rendered(p dispatch.Param, e dispatch.Encoded) string {
	switch p.In {
	case "path":
		return e.Path
	case "header":
		return e.Header
	case "cookie":
		return strings.Join(e.Pairs, "; ")
	}
	return strings.Join(e.Pairs, "&")
}

// na marks a combination the specification leaves undefined: Encode must
// refuse it.
const na = "n/a"

// The color parameter's four values in the specification's Style Examples
// table. The object's numbers are float64, as a JSON decoder into any
// gives them.
var (
	colorEmpty  = ""
	colorString = "blue"
	colorArray  = []any{"blue", "black", "brown"}
	colorObject = map[string]any{"R": float64(100), "G": float64(200), "B": float64(150)}
)

// TestStyleExamples reproduces every cell of the OpenAPI Specification's
// Style Examples table, for each location a style is allowed in.
//
// Objects are written with their members sorted (a map has no order), so
// where the table writes R, G, B we expect B, G, R.
//
// Where the 3.0.3 and 3.1.0 tables and their 3.0.4 and 3.1.1 corrections
// differ, we follow the corrections, which patch versions make (tools
// are to make no distinction between 3.1.0 and 3.1.1):
//   - label without explode joins items with ',' as RFC 6570 §3.2.5 does
//     (3.1.0 wrote ".blue.black.brown" and ".R.100.G.200.B.150");
//   - simple with the empty string is the empty string, as RFC 6570
//     expands it (3.1.0 wrote n/a);
//   - pipeDelimited's '|' and deepObject's brackets are percent-encoded,
//     as RFC 3986 allows none of them in a query (3.1.0 wrote them bare).
func TestStyleExamples(t *testing.T) {
	tests := []struct {
		in, style string
		explode   bool
		// checkFails: Check refuses the combination, so every cell is n/a.
		checkFails bool
		empty      string
		str        string
		array      string
		object     string
	}{
		{"path", "matrix", false, false, ";color", ";color=blue", ";color=blue,black,brown", ";color=B,150,G,200,R,100"},
		{"path", "matrix", true, false, ";color", ";color=blue", ";color=blue;color=black;color=brown", ";B=150;G=200;R=100"},
		{"path", "label", false, false, ".", ".blue", ".blue,black,brown", ".B,150,G,200,R,100"},
		{"path", "label", true, false, ".", ".blue", ".blue.black.brown", ".B=150.G=200.R=100"},
		{"path", "simple", false, false, "", "blue", "blue,black,brown", "B,150,G,200,R,100"},
		{"path", "simple", true, false, "", "blue", "blue,black,brown", "B=150,G=200,R=100"},
		{"header", "simple", false, false, "", "blue", "blue,black,brown", "B,150,G,200,R,100"},
		{"header", "simple", true, false, "", "blue", "blue,black,brown", "B=150,G=200,R=100"},
		{"query", "form", false, false, "color=", "color=blue", "color=blue,black,brown", "color=B,150,G,200,R,100"},
		{"query", "form", true, false, "color=", "color=blue", "color=blue&color=black&color=brown", "B=150&G=200&R=100"},
		{"cookie", "form", false, false, "color=", "color=blue", "color=blue,black,brown", "color=B,150,G,200,R,100"},
		{"cookie", "form", true, false, "color=", "color=blue", "color=blue; color=black; color=brown", "B=150; G=200; R=100"},
		{"query", "spaceDelimited", false, false, na, na, "color=blue%20black%20brown", "color=B%20150%20G%20200%20R%20100"},
		{"query", "spaceDelimited", true, true, na, na, na, na},
		{"query", "pipeDelimited", false, false, na, na, "color=blue%7Cblack%7Cbrown", "color=B%7C150%7CG%7C200%7CR%7C100"},
		{"query", "pipeDelimited", true, true, na, na, na, na},
		{"query", "deepObject", false, true, na, na, na, na},
		{"query", "deepObject", true, false, na, na, na, "color%5BB%5D=150&color%5BG%5D=200&color%5BR%5D=100"},
	}
	for _, tt := range tests {
		p := dispatch.Param{Name: "color", In: tt.in, Style: tt.style, Explode: ptr(tt.explode)}
		if err := p.Check(); (err != nil) != tt.checkFails {
			t.Errorf("%s %s explode=%t: Check() = %v, want error: %t", tt.in, tt.style, tt.explode, err, tt.checkFails)
		}
		for _, c := range []struct {
			column string
			value  any
			want   string
		}{
			{"empty", colorEmpty, tt.empty},
			{"string", colorString, tt.str},
			{"array", colorArray, tt.array},
			{"object", colorObject, tt.object},
		} {
			e, err := p.Encode(c.value)
			if c.want == na {
				if err == nil {
					t.Errorf("%s %s explode=%t %s: Encode = %q, want an error", tt.in, tt.style, tt.explode, c.column, rendered(p, e))
				}
				continue
			}
			if err != nil {
				t.Errorf("%s %s explode=%t %s: %v", tt.in, tt.style, tt.explode, c.column, err)
				continue
			}
			if got := rendered(p, e); got != c.want {
				t.Errorf("%s %s explode=%t %s: got %q, want %q", tt.in, tt.style, tt.explode, c.column, got, c.want)
			}
		}
	}
}

// TestDefaults: no style means simple in path and header and form in query
// and cookie; no explode means true for form and false for the rest.
func TestDefaults(t *testing.T) {
	tests := []struct {
		in   string
		want string
	}{
		{"path", "blue,black,brown"},
		{"header", "blue,black,brown"},
		{"query", "color=blue&color=black&color=brown"},
		{"cookie", "color=blue; color=black; color=brown"},
	}
	for _, tt := range tests {
		p := dispatch.Param{Name: "color", In: tt.in}
		e, err := p.Encode(colorArray)
		if err != nil {
			t.Fatalf("%s: %v", tt.in, err)
		}
		if got := rendered(p, e); got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.in, got, tt.want)
		}
	}
	p := dispatch.Param{Name: "color", In: "path", Style: "matrix"}
	if e, _ := p.Encode(colorArray); e.Path != ";color=blue,black,brown" {
		t.Errorf("matrix without explode: got %q, want it unexploded", e.Path)
	}
}

func TestPercentEncoding(t *testing.T) {
	const tricky = "a b/c?d#e&f=g+h%i,j;k.l~m_n-é"
	// Everything but unreserved characters is encoded; é is its UTF-8 bytes.
	const enc = "a%20b%2Fc%3Fd%23e%26f%3Dg%2Bh%25i%2Cj%3Bk.l~m_n-%C3%A9"
	tests := []encoding{
		{dispatch.Param{Name: "id", In: "path"}, tricky, enc},
		{dispatch.Param{Name: "id", In: "path", Style: "label"}, tricky, "." + enc},
		{dispatch.Param{Name: "id", In: "path", Style: "matrix"}, tricky, ";id=" + enc},
		{dispatch.Param{Name: "q", In: "query"}, tricky, "q=" + enc},
		{dispatch.Param{Name: "c", In: "cookie"}, tricky, "c=" + enc},
		// A delimiter inside a value is encoded; the style's own stays.
		{dispatch.Param{Name: "id", In: "path"}, []any{"a,b", "c"}, "a%2Cb,c"},
		{dispatch.Param{Name: "id", In: "path", Style: "matrix", Explode: ptr(true)}, map[string]any{"k;=": "v;="}, ";k%3B%3D=v%3B%3D"},
		{dispatch.Param{Name: "q", In: "query", Explode: ptr(false)}, []any{"a,b", "c"}, "q=a%2Cb,c"},
		{dispatch.Param{Name: "q", In: "query"}, map[string]any{"a b": "c&d"}, "a%20b=c%26d"},
		{dispatch.Param{Name: "q", In: "query", Style: "deepObject", Explode: ptr(true)}, map[string]any{"a]": "é"}, "q%5Ba%5D%5D=%C3%A9"},
		{dispatch.Param{Name: "q", In: "query", Style: "spaceDelimited", Explode: ptr(false)}, []any{"a b", "c"}, "q=a%20b%20c"},
		{dispatch.Param{Name: "q", In: "query", Style: "pipeDelimited", Explode: ptr(false)}, []any{"a|b", "c"}, "q=a%7Cb%7Cc"},
		// The name is encoded too.
		{dispatch.Param{Name: "a b&c", In: "query"}, "x", "a%20b%26c=x"},
		{dispatch.Param{Name: "a;b", In: "cookie"}, "x", "a%3Bb=x"},
		// Headers are not percent-encoded.
		{dispatch.Param{Name: "X-Id", In: "header"}, "a b/c?é,\t%", "a b/c?é,\t%"},
	}
	checkEncodings(t, tests)
}

func TestAllowReserved(t *testing.T) {
	const value = ":/?#[]@!$&'()*+,;=% é"
	p := dispatch.Param{Name: "q", In: "query", AllowReserved: true}
	e, err := p.Encode(value)
	if err != nil {
		t.Fatal(err)
	}
	// Reserved characters stay but for '#', '&', '+' and '='; '%', the
	// space and non-ASCII are encoded as always.
	if want := "q=:/?%23[]@!$%26'()*%2B,;%3D%25%20%C3%A9"; strings.Join(e.Pairs, "&") != want {
		t.Errorf("got %q, want %q", e.Pairs, want)
	}
	// The pairs still parse back to the value.
	got, err := url.ParseQuery(strings.ReplaceAll(e.Pairs[0], ";", "%3B"))
	if err != nil || got.Get("q") != value {
		t.Errorf("ParseQuery(%q) = %q, %v; want %q", e.Pairs[0], got.Get("q"), err, value)
	}
	// Without allowReserved the same value is all encoded, and elsewhere
	// allowReserved is ignored.
	for _, p := range []dispatch.Param{
		{Name: "q", In: "query"},
		{Name: "q", In: "cookie", AllowReserved: true},
		{Name: "q", In: "path", AllowReserved: true},
	} {
		e, err := p.Encode(value)
		if err != nil {
			t.Fatal(err)
		}
		if got := rendered(p, e); strings.ContainsAny(got, ":/?#[]@!$&'()*+,;") {
			t.Errorf("%s with allowReserved %t: %q keeps a reserved character", p.In, p.AllowReserved, got)
		}
	}
}

func TestHeaderControlCharacters(t *testing.T) {
	p := dispatch.Param{Name: "X-Note", In: "header"}
	for _, v := range []any{
		"a\r\nX-Admin: yes", "a\nb", "a\rb", "a\x00b", "a\x7fb",
		[]any{"ok", "a\r\nb"},
		map[string]any{"k\n": "v"},
	} {
		e, err := p.Encode(v)
		if err == nil {
			t.Errorf("Encode(%q) = %q, want an error", v, e.Header)
			continue
		}
		if !strings.Contains(err.Error(), `"X-Note"`) {
			t.Errorf("Encode(%q): error %q does not name the parameter", v, err)
		}
	}
	if e, err := p.Encode("tab\tis fine"); err != nil || e.Header != "tab\tis fine" {
		t.Errorf("Encode with a tab = %q, %v", e.Header, err)
	}
}

func TestScalars(t *testing.T) {
	tests := []struct {
		value any
		want  string
	}{
		{true, "true"},
		{false, "false"},
		{float64(100), "100"},
		{float64(1.5), "1.5"},
		{float64(-0.25), "-0.25"},
		{float64(0.000001), "0.000001"},
		{float64(1 << 53), "9007199254740992"},
		{float64(-(1 << 53)), "-9007199254740992"},
		{7, "7"},
		{int64(-1) << 62, "-4611686018427387904"},
		{jsonread.Number("12345678901234567890"), "12345678901234567890"},
		{jsonread.Number("1.50"), "1.50"},
		{jsontext.Value("1e3"), "1e3"},
		{[]any{true, float64(2), jsonread.Number("3"), "x"}, "true,2,3,x"},
		{map[string]any{"on": false, "n": float64(0.5)}, "n,0.5,on,false"},
	}
	p := dispatch.Param{Name: "v", In: "path"}
	for _, tt := range tests {
		e, err := p.Encode(tt.value)
		if err != nil {
			t.Errorf("Encode(%v): %v", tt.value, err)
			continue
		}
		if e.Path != tt.want {
			t.Errorf("Encode(%v) = %q, want %q", tt.value, e.Path, tt.want)
		}
	}
}

func TestEncodeRefuses(t *testing.T) {
	tests := []struct {
		name  string
		p     dispatch.Param
		value any
	}{
		{"nil", dispatch.Param{Name: "color", In: "query"}, nil},
		{"array in array", dispatch.Param{Name: "color", In: "query"}, []any{"a", []any{"b"}}},
		{"object in array", dispatch.Param{Name: "color", In: "path"}, []any{map[string]any{"a": "b"}}},
		{"array in object", dispatch.Param{Name: "color", In: "header"}, map[string]any{"a": []any{"b"}}},
		{"object in deepObject", dispatch.Param{Name: "color", In: "query", Style: "deepObject", Explode: ptr(true)}, map[string]any{"a": map[string]any{"b": "c"}}},
		{"NaN", dispatch.Param{Name: "color", In: "query"}, math.NaN()},
		{"infinity", dispatch.Param{Name: "color", In: "path"}, []any{math.Inf(1)}},
		{"jsontext string", dispatch.Param{Name: "color", In: "query"}, jsontext.Value(`"x"`)},
		{"other type", dispatch.Param{Name: "color", In: "query"}, struct{}{}},
		{"deepObject string", dispatch.Param{Name: "color", In: "query", Style: "deepObject", Explode: ptr(true)}, "x"},
		{"deepObject array", dispatch.Param{Name: "color", In: "query", Style: "deepObject", Explode: ptr(true)}, []any{"x"}},
		{"pipeDelimited string", dispatch.Param{Name: "color", In: "query", Style: "pipeDelimited", Explode: ptr(false)}, "x"},
		{"unchecked style", dispatch.Param{Name: "color", In: "header", Style: "form"}, "x"},
	}
	for _, tt := range tests {
		e, err := tt.p.Encode(tt.value)
		if err == nil {
			t.Errorf("%s: Encode = %+v, want an error", tt.name, e)
			continue
		}
		if !strings.Contains(err.Error(), `"color"`) {
			t.Errorf("%s: error %q does not name the parameter", tt.name, err)
		}
	}
}

// TestUndefined: nulls inside an array or object are left out, and an
// array or object with nothing left adds nothing, as RFC 6570 expands
// undefined values.
func TestUndefined(t *testing.T) {
	tests := []encoding{
		{dispatch.Param{Name: "q", In: "query"}, []any{"a", nil, "b"}, "q=a&q=b"},
		{dispatch.Param{Name: "q", In: "query"}, map[string]any{"a": nil, "b": "1"}, "b=1"},
		{dispatch.Param{Name: "q", In: "query"}, []any{}, ""},
		{dispatch.Param{Name: "q", In: "query", Explode: ptr(false)}, []any{nil}, ""},
		{dispatch.Param{Name: "q", In: "query", Style: "deepObject", Explode: ptr(true)}, map[string]any{}, ""},
		{dispatch.Param{Name: "q", In: "query", Style: "spaceDelimited", Explode: ptr(false)}, []any{}, ""},
		{dispatch.Param{Name: "c", In: "cookie"}, map[string]any{"a": nil}, ""},
		{dispatch.Param{Name: "id", In: "path", Style: "matrix"}, []any{}, ""},
		{dispatch.Param{Name: "id", In: "path", Style: "label", Explode: ptr(true)}, map[string]any{}, ""},
		{dispatch.Param{Name: "X-A", In: "header"}, []any{}, ""},
	}
	checkEncodings(t, tests)
}

func TestCheck(t *testing.T) {
	tests := []struct {
		in, style string
		explode   *bool
		ok        bool
	}{
		{"path", "", nil, true},
		{"path", "simple", ptr(true), true},
		{"path", "label", ptr(false), true},
		{"path", "label", ptr(true), true},
		{"path", "matrix", ptr(false), true},
		{"path", "matrix", ptr(true), true},
		{"path", "form", nil, false},
		{"path", "deepObject", ptr(true), false},
		{"query", "", nil, true},
		{"query", "form", ptr(false), true},
		{"query", "spaceDelimited", nil, true},
		{"query", "spaceDelimited", ptr(true), false},
		{"query", "pipeDelimited", nil, true},
		{"query", "pipeDelimited", ptr(true), false},
		{"query", "deepObject", ptr(true), true},
		{"query", "deepObject", nil, false},
		{"query", "deepObject", ptr(false), false},
		{"query", "simple", nil, false},
		{"query", "matrix", nil, false},
		{"query", "label", nil, false},
		{"header", "", nil, true},
		{"header", "simple", ptr(true), true},
		{"header", "form", nil, false},
		{"header", "matrix", nil, false},
		{"cookie", "", nil, true},
		{"cookie", "form", ptr(false), true},
		{"cookie", "simple", nil, false},
		{"cookie", "deepObject", ptr(true), false},
		{"query", "Form", nil, false}, // style names are case-sensitive
		{"body", "", nil, false},
		{"", "", nil, false},
	}
	for _, tt := range tests {
		p := dispatch.Param{Name: "color", In: tt.in, Style: tt.style, Explode: tt.explode}
		err := p.Check()
		if (err == nil) != tt.ok {
			t.Errorf("%s %q explode=%v: Check() = %v, want ok: %t", tt.in, tt.style, tt.explode, err, tt.ok)
		}
		if err != nil && !strings.Contains(err.Error(), `"color"`) {
			t.Errorf("%s %q: error %q does not name the parameter", tt.in, tt.style, err)
		}
	}
	if err := (dispatch.Param{In: "query"}).Check(); err == nil {
		t.Error("Check of a parameter without a name: no error")
	}
}

// TestEmptyItems: RFC 6570 writes an empty value in matrix style as the
// name alone, and in the other styles as "name=" or nothing.
func TestEmptyItems(t *testing.T) {
	tests := []encoding{
		{dispatch.Param{Name: "c", In: "path", Style: "matrix", Explode: ptr(true)}, []any{"", "x"}, ";c;c=x"},
		{dispatch.Param{Name: "c", In: "path", Style: "matrix", Explode: ptr(true)}, map[string]any{"a": "", "b": "x"}, ";a;b=x"},
		{dispatch.Param{Name: "c", In: "path", Style: "matrix"}, []any{"", "x"}, ";c=,x"},
		{dispatch.Param{Name: "c", In: "path", Style: "label", Explode: ptr(true)}, map[string]any{"a": "", "b": "x"}, ".a=.b=x"},
		{dispatch.Param{Name: "c", In: "path", Style: "label", Explode: ptr(true)}, []any{"", "x"}, "..x"},
		{dispatch.Param{Name: "c", In: "path", Explode: ptr(true)}, map[string]any{"a": "", "b": "x"}, "a=,b=x"},
		{dispatch.Param{Name: "c", In: "query"}, []any{"", "x"}, "c=&c=x"},
		{dispatch.Param{Name: "c", In: "query"}, map[string]any{"a": ""}, "a="},
		{dispatch.Param{Name: "c", In: "cookie", Explode: ptr(false)}, map[string]any{"a": ""}, "c=a,"},
	}
	checkEncodings(t, tests)
}

// encoding is a parameter, a value, and what Encode makes of it, as
// rendered writes it.
type encoding struct {
	p     dispatch.Param
	value any
	want  string
}

func checkEncodings(t *testing.T, tests []encoding) {
	t.Helper()
	for _, tt := range tests {
		e, err := tt.p.Encode(tt.value)
		if err != nil {
			t.Errorf("%+v %v: %v", tt.p, tt.value, err)
			continue
		}
		if got := rendered(tt.p, e); got != tt.want {
			t.Errorf("%+v %v: got %q, want %q", tt.p, tt.value, got, tt.want)
		}
	}
}
