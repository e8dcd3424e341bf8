package dispatch_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/dispatch"
)

// fuzzParams are the combinations Check accepts, and allowReserved.
var fuzzParams = []dispatch.Param{
	{Name: "p", In: "path", Style: "simple", Explode: ptr(false)},
	{Name: "p", In: "path", Style: "simple", Explode: ptr(true)},
	{Name: "p", In: "path", Style: "label", Explode: ptr(false)},
	{Name: "p", In: "path", Style: "label", Explode: ptr(true)},
	{Name: "p", In: "path", Style: "matrix", Explode: ptr(false)},
	{Name: "p", In: "path", Style: "matrix", Explode: ptr(true)},
	{Name: "q", In: "query", Style: "form", Explode: ptr(false)},
	{Name: "q", In: "query", Style: "form", Explode: ptr(true)},
	{Name: "q", In: "query", Style: "form", Explode: ptr(true), AllowReserved: true},
	{Name: "q", In: "query", Style: "spaceDelimited", Explode: ptr(false)},
	{Name: "q", In: "query", Style: "pipeDelimited", Explode: ptr(false), AllowReserved: true},
	{Name: "q", In: "query", Style: "deepObject", Explode: ptr(true)},
	{Name: "q", In: "query", Style: "deepObject", Explode: ptr(true), AllowReserved: true},
	{Name: "h", In: "header", Style: "simple", Explode: ptr(false)},
	{Name: "h", In: "header", Style: "simple", Explode: ptr(true)},
	{Name: "c", In: "cookie", Style: "form", Explode: ptr(false)},
	{Name: "c", In: "cookie", Style: "form", Explode: ptr(true)},
}

func FuzzEncode(f *testing.F) {
	for i, s := range []string{"", "blue", "a/b?c#d", "a&b=c+d", "é", "%2F", "\r\nX: y", "\x00", ";,.=[]|"} {
		f.Add(s, uint8(i))
	}
	f.Fuzz(func(t *testing.T, s string, style uint8) {
		p := fuzzParams[int(style)%len(fuzzParams)]
		if err := p.Check(); err != nil {
			t.Fatalf("%+v: %v", p, err)
		}
		for _, v := range []any{s, []any{s, "x"}, map[string]any{s: s, "k": "v"}} {
			e, err := p.Encode(v)
			_, isString := v.(string)
			_, isArray := v.([]any)
			undefined := isString && (p.Style == "deepObject" || strings.HasSuffix(p.Style, "Delimited")) ||
				isArray && p.Style == "deepObject"
			control := p.In == "header" && strings.ContainsFunc(s, func(r rune) bool { return r < ' ' && r != '\t' || r == 0x7f })
			if (err != nil) != (undefined || control) {
				t.Fatalf("%+v Encode(%q) = %+v, %v; want an error: %t", p, v, e, err, undefined || control)
			}
			if err != nil {
				continue
			}
			switch p.In {
			case "path":
				if strings.ContainsAny(e.Path, "/?#") {
					t.Fatalf("%+v Encode(%q): path %q leaves its segment", p, v, e.Path)
				}
			case "query":
				for _, pair := range e.Pairs {
					if strings.ContainsAny(pair, "&#") {
						t.Fatalf("%+v Encode(%q): pair %q splits the query", p, v, pair)
					}
				}
			case "cookie":
				for _, pair := range e.Pairs {
					if strings.ContainsAny(pair, "; ") {
						t.Fatalf("%+v Encode(%q): pair %q splits the cookie", p, v, pair)
					}
				}
			case "header":
				if strings.ContainsAny(e.Header, "\r\n\x00") {
					t.Fatalf("%+v Encode(%q): header %q", p, v, e.Header)
				}
			}
			// A plain value decodes back to itself.
			if !isString {
				continue
			}
			switch {
			case p.In == "path" && p.Style == "simple":
				if got, err := url.PathUnescape(e.Path); err != nil || got != s {
					t.Fatalf("%+v: PathUnescape(%q) = %q, %v; want %q", p, e.Path, got, err, s)
				}
			case p.In == "query" && p.Style == "form" && !p.AllowReserved:
				if q, err := url.ParseQuery(e.Pairs[0]); err != nil || q.Get("q") != s {
					t.Fatalf("%+v: ParseQuery(%q) = %q, %v; want %q", p, e.Pairs[0], q.Get("q"), err, s)
				}
			}
		}
	})
}
