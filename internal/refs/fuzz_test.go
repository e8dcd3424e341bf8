package refs_test

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/go-json-experiment/json"

	"github.com/toolgate/toolgate/internal/jsonread"
	"github.com/toolgate/toolgate/internal/refs"
)

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"", "plain", "${input}", "${input.a.b}", "${input.items.0}", "${env.NAME}",
		"$${input}", "$$${input}", "$${", "${", "${}", "${foo}", "${env}", "${env.A.B}",
		"a/${input.a}/b?q=${env.NAME}", "${input.a}${input.b}", "${input.items.-1}",
		"${input.${input}}", "}${", "$", "$$", "é${input.é}", "\x00${input.\xff}",
	} {
		f.Add(s)
	}
	scope := refs.Scope{
		Input: map[string]any{
			"a":     map[string]any{"b": "deep", "n": jsonread.Number("1.0")},
			"items": []any{"zero", map[string]any{"id": true}, nil},
			"s":     "${env.NAME}",
		},
		Env: map[string]string{"NAME": "gw", "A": "${input.a}"},
	}
	f.Fuzz(func(t *testing.T, src string) {
		tmpl, err := refs.Parse(src)
		if err != nil {
			if tmpl != nil {
				t.Fatalf("Parse(%q) returned a template and the error %v", src, err)
			}
			return
		}
		if tmpl.Source() != src {
			t.Fatalf("Source() = %q, want %q", tmpl.Source(), src)
		}
		for _, r := range tmpl.Refs() {
			if !strings.Contains(src, r.Text) || !strings.HasPrefix(r.Text, "${") || !strings.HasSuffix(r.Text, "}") {
				t.Fatalf("ref %q is not a ${...} of %q", r.Text, src)
			}
			if r.Root != refs.RootInput && r.Root != refs.RootEnv {
				t.Fatalf("ref %q has root %q", r.Text, r.Root)
			}
			if r.Root == refs.RootEnv && len(r.Path) != 1 {
				t.Fatalf("env ref %q has path %q", r.Text, r.Path)
			}
		}

		out, err := tmpl.Expand(scope, pathEscape)
		if err != nil {
			var me *refs.MissingError
			if !errors.As(err, &me) || !strings.Contains(err.Error(), me.Ref) {
				t.Fatalf("Expand(%q) error %v is not a MissingError naming its reference", src, err)
			}
			if out != "" {
				t.Fatalf("Expand(%q) returned %q with an error", src, out)
			}
		}
		if _, errEach := tmpl.ExpandEach(scope, []refs.Encoder{pathEscape, nil, queryEscape}); (errEach == nil) != (err == nil) {
			t.Fatalf("ExpandEach(%q) error %v, Expand error %v: they disagree", src, errEach, err)
		}
		for i := 0; i <= len(tmpl.Refs()); i++ {
			_ = tmpl.LiteralBefore(i)
		}
		skel := tmpl.Skeleton("")
		if tmpl.LiteralBefore(len(tmpl.Refs())) != skel {
			t.Fatalf("LiteralBefore(past the end) = %q, want Skeleton(\"\") = %q", tmpl.LiteralBefore(len(tmpl.Refs())), skel)
		}
		if !strings.HasPrefix(skel, tmpl.LiteralBefore(0)) {
			t.Fatalf("LiteralBefore(0) %q is not a prefix of %q", tmpl.LiteralBefore(0), skel)
		}

		if r, ok := tmpl.Single(); ok && (r.Text != src || len(tmpl.Refs()) != 1) {
			t.Fatalf("Single(%q) = %q with %d refs", src, r.Text, len(tmpl.Refs()))
		}

		lit, ok := tmpl.Literal()
		if ok != (len(tmpl.Refs()) == 0) {
			t.Fatalf("Literal(%q) ok = %v with %d refs", src, ok, len(tmpl.Refs()))
		}
		if !ok {
			return
		}
		want := strings.ReplaceAll(src, "$${", "${")
		if lit != want {
			t.Fatalf("Literal(%q) = %q, want %q", src, lit, want)
		}
		if out != want || skel != want {
			t.Fatalf("template %q without refs: Expand = %q, Skeleton = %q, want %q", src, out, skel, want)
		}
	})
}

func FuzzResolveOnePass(f *testing.F) {
	for _, x := range []string{
		"", "plain", "${env.SECRET}", "$${env.SECRET}", "${input.x}", "${input}", "${",
		"}", "a/../b", "\x00\r\n", "\xff", "${env.SECRET}${env.SECRET}", "é€😀",
	} {
		f.Add(x)
	}
	tmpl := refs.MustParse("a/${input.x}/b")
	body, err := refs.ParseJSON([]byte(`{"spliced":"a/${input.x}/b","single":"${input.x}","lit":"$${env.SECRET}"}`))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, x string) {
		s := refs.Scope{
			Input: map[string]any{"x": x},
			Env:   map[string]string{"SECRET": "leaked", "x": "leaked"},
		}
		got, err := tmpl.Expand(s, nil)
		if err != nil {
			t.Fatalf("Expand with x=%q: %v", x, err)
		}
		if want := "a/" + x + "/b"; got != want {
			t.Fatalf("Expand with x=%q = %q, want %q", x, got, want)
		}
		if got, _ := tmpl.Expand(s, pathEscape); strings.Count(got, "/") != 2 {
			t.Fatalf("path-escaped x=%q added a segment: %q", x, got)
		}

		v, err := body.Resolve(s)
		if err != nil {
			t.Fatalf("Resolve with x=%q: %v", x, err)
		}
		m := v.(map[string]any)
		if m["spliced"] != "a/"+x+"/b" || m["single"] != x || m["lit"] != "${env.SECRET}" {
			t.Fatalf("Resolve with x=%q = %#v", x, m)
		}
		if !utf8.ValidString(x) {
			return // the JSON encoder replaces invalid UTF-8; the decoded form above is what counts
		}
		raw, err := body.ResolveJSON(s)
		if err != nil {
			t.Fatalf("ResolveJSON with x=%q: %v", x, err)
		}
		var back map[string]string
		if err := json.Unmarshal(raw, &back); err != nil {
			t.Fatalf("ResolveJSON with x=%q gave invalid JSON %s: %v", x, raw, err)
		}
		if back["spliced"] != "a/"+x+"/b" || back["single"] != x || back["lit"] != "${env.SECRET}" {
			t.Fatalf("ResolveJSON with x=%q = %s", x, raw)
		}
	})
}
