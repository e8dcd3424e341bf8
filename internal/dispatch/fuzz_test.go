package dispatch_test

import (
	"bytes"
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/toolgate/toolgate/internal/dispatch"
	"github.com/toolgate/toolgate/internal/jsonread"
	"github.com/toolgate/toolgate/internal/mapping"
	"github.com/toolgate/toolgate/internal/refs"
)

// FuzzCompile compiles a target spec from arbitrary JSON and builds its
// request with an arbitrary input. Whatever compiles must never send
// anywhere but where its author wrote: an app target to its component's base
// URL (and a socket component's to its socket alone), a url target to its
// literal origin over TCP; and a spec that compiles as a card's button must
// be an app target on the owner, with no env reference.
func FuzzCompile(f *testing.F) {
	for _, s := range []struct{ spec, input string }{
		{`{"type":"app","component":"api","method":"POST","path":"/items/${input.id}","body":"${input}"}`, `{"id":"a/../b"}`},
		{`{"type":"app","component":"api","method":"GET","path":"/${input.id}","query":{"q":"${input.q}"},"headers":{"X-Key":"${env.TOKEN}"}}`, `{"id":"..","q":"a&b=c"}`},
		{`{"type":"app","component":"bare","method":"DELETE","path":"/x/${input.id}"}`, `{"id":"%2e%2e"}`},
		{`{"type":"url","method":"GET","url":"https://ext.example/v1/${input.city}?u=${input.u}","result":"body.title"}`, `{"city":"@evil.example","u":"#x"}`},
		{`{"type":"url","component":"api","method":"POST","url":"http://ext.example:81/${input.a}","headers":{"X":"${input.h}"},"body":{"k":"${env.TOKEN}"}}`, `{"a":"//evil.example/","h":"a\r\nb"}`},
		{`{"type":"url","method":"GET","url":"http://${input.host}/"}`, `{"host":"localhost:2019"}`},
		{`{"type":"kazzle","name":"where"}`, `{}`},
		{`{"type":"app","component":"api","method":"GET","path":"/x","result":"body"}`, `{}`},
		{`{"type":"app","component":"api","method":"GET","path":"/x","headers":{"Authorization":"x"}}`, `{}`},
		{`{"type":"app","component":"sock","method":"GET","path":"/items/${input.id}"}`, `{"id":"@evil.example"}`},
		{`{"type":"url","component":"sock","method":"GET","url":"http://localhost/${input.id}"}`, `{"id":"x"}`},
	} {
		f.Add([]byte(s.spec), []byte(s.input))
	}
	comps := map[string]*dispatch.Component{}
	for _, d := range []struct{ name, base string }{{"api", "http://api.internal:8080/base"}, {"bare", "http://bare.internal"}, {"sock", "unix//run/api.sock"}} {
		c, err := dispatch.NewComponent(d.name, d.base, map[string]string{"TOKEN": "s3cret"})
		if err != nil {
			f.Fatal(err)
		}
		comps[d.name] = c
	}
	f.Fuzz(func(t *testing.T, specJSON, inputJSON []byte) {
		var s dispatch.Spec
		if jsonread.UnmarshalAnyCase(specJSON, &s, json.RejectUnknownMembers(true)) != nil {
			return
		}

		if b, err := dispatch.CompileButton(specJSON, comps["api"]); err == nil {
			if b.Spec.Type != dispatch.TypeApp || b.Component != comps["api"] || b.Mapping != nil {
				t.Fatalf("button %s compiled as %+v", specJSON, b.Spec)
			}
			for _, r := range b.Refs() {
				if r.Root == refs.RootEnv {
					t.Fatalf("button %s compiled with %s", specJSON, r)
				}
			}
		} else if b != nil {
			t.Fatalf("CompileButton returned a target and the error %v", err)
		}

		tgt, err := dispatch.Compile(s, dispatch.Env{Components: comps, Results: mapping.Compile})
		if err != nil {
			if tgt != nil {
				t.Fatalf("Compile returned a target and the error %v", err)
			}
			return
		}
		if tgt.Spec.Type == dispatch.TypeClient {
			return
		}
		input, err := jsonread.Value(jsontext.NewDecoder(bytes.NewReader(inputJSON), jsonread.Lenient))
		if err != nil {
			input = nil
		}
		req, err := tgt.Request(context.Background(), input, nil)
		if err != nil {
			if req != nil {
				t.Fatalf("Request returned a request and the error %v", err)
			}
			return
		}
		var wantHost, wantPrefix string
		switch tgt.Spec.Type {
		case dispatch.TypeApp:
			wantHost, wantPrefix = tgt.Component.BaseURL.Host, tgt.Component.BaseURL.EscapedPath()+"/"
		case dispatch.TypeURL:
			tmpl, err := refs.Parse(s.URL)
			if err != nil {
				t.Fatalf("url %q compiled but does not parse: %v", s.URL, err)
			}
			u, err := url.Parse(tmpl.Skeleton("x"))
			if err != nil {
				t.Fatalf("url %q compiled but its skeleton does not parse: %v", s.URL, err)
			}
			wantHost, wantPrefix = u.Host, "/"
		}
		// An empty path is sent as "/" (a url target of http://host).
		path := req.URL.EscapedPath()
		if path == "" {
			path = "/"
		}
		if req.URL.Host != wantHost || req.URL.User != nil || !strings.HasPrefix(path, wantPrefix) {
			t.Fatalf("%s with input %s sends to %s: want host %q, path under %q", specJSON, inputJSON, req.URL, wantHost, wantPrefix)
		}
		if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
			t.Fatalf("%s sends to %s", specJSON, req.URL)
		}
		wantSocket := ""
		if tgt.Spec.Type == dispatch.TypeApp {
			wantSocket = tgt.Component.Socket
		}
		if got := dispatch.SocketOf(req.Context()); got != wantSocket {
			t.Fatalf("%s with input %s goes to socket %q, want %q", specJSON, inputJSON, got, wantSocket)
		}
		for k, vs := range req.Header {
			for _, v := range vs {
				if strings.ContainsAny(v, "\r\n\x00") {
					t.Fatalf("header %s: %q", k, v)
				}
			}
		}
		if tgt.Spec.Type == dispatch.TypeApp && req.Header.Get("Authorization") != "" {
			t.Fatalf("an app target's request carries an Authorization of its own: %s", specJSON)
		}
	})
}
