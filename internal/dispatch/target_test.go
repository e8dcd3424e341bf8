package dispatch_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/toolgate/toolgate/internal/dispatch"
	"github.com/toolgate/toolgate/internal/jsonread"
	"github.com/toolgate/toolgate/internal/refs"
)

// testComponents declares the components the tests compile against.
func testComponents(t testing.TB) map[string]*dispatch.Component {
	t.Helper()
	decl := []struct {
		name, base string
		env        map[string]string
	}{
		{"api", "http://api.internal:8080/base", map[string]string{"TOKEN": "s3cret", "REGION": "eu/west"}},
		{"slash", "http://slash.internal/base/", nil},
		{"bare", "http://bare.internal", nil},
	}
	out := map[string]*dispatch.Component{}
	for _, d := range decl {
		c, err := dispatch.NewComponent(d.name, d.base, d.env)
		if err != nil {
			t.Fatalf("NewComponent(%q, %q): %v", d.name, d.base, err)
		}
		out[d.name] = c
	}
	return out
}

// decode decodes JSON the way the gateway decodes a call's input: numbers
// stay jsonread.Number.
func decode(t testing.TB, s string) any {
	t.Helper()
	v, err := jsonread.Value(jsontext.NewDecoder(strings.NewReader(s)))
	if err != nil {
		t.Fatalf("decoding %s: %v", s, err)
	}
	return v
}

func TestNewComponent(t *testing.T) {
	tests := []struct {
		name     string
		base     string
		wantErr  string
		wantBase string
	}{
		{name: "http", base: "http://h:8080", wantBase: "http://h:8080"},
		{name: "https with path", base: "https://h/base", wantBase: "https://h/base"},
		{name: "trailing slash trimmed", base: "http://h/base/", wantBase: "http://h/base"},
		{name: "relative", base: "/base", wantErr: "absolute http(s)"},
		{name: "no host", base: "http:///x", wantErr: "absolute http(s)"},
		{name: "other scheme", base: "ftp://h/", wantErr: "absolute http(s)"},
		{name: "query", base: "http://h/?a=1", wantErr: "query, fragment or user info"},
		{name: "fragment", base: "http://h/#f", wantErr: "query, fragment or user info"},
		{name: "user info", base: "http://u:p@h/", wantErr: "query, fragment or user info"},
		{name: "unparsable", base: "http://h:port/", wantErr: "base URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := dispatch.NewComponent("c", tt.base, nil)
			if tt.wantErr != "" {
				if err == nil {
					t.Fatalf("NewComponent(%q) = nil error, want one containing %q", tt.base, tt.wantErr)
				}
				if !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("NewComponent(%q) error %q, want it to contain %q", tt.base, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("NewComponent(%q): %v", tt.base, err)
			}
			if got := c.BaseURL.String(); got != tt.wantBase {
				t.Errorf("base URL = %q, want %q", got, tt.wantBase)
			}
			if c.Env == nil {
				t.Errorf("Env is nil, want an empty map")
			}
		})
	}
}

func TestCompile(t *testing.T) {
	body := func(s string) jsontext.Value { return jsontext.Value(s) }
	tests := []struct {
		name    string
		spec    dispatch.Spec
		wantErr string // "" means the spec compiles
	}{
		// Methods.
		{name: "app GET", spec: dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/x"}},
		{name: "app POST", spec: dispatch.Spec{Type: "app", Component: "api", Method: "POST", Path: "/x"}},
		{name: "app PUT", spec: dispatch.Spec{Type: "app", Component: "api", Method: "PUT", Path: "/x"}},
		{name: "app PATCH", spec: dispatch.Spec{Type: "app", Component: "api", Method: "PATCH", Path: "/x"}},
		{name: "app DELETE", spec: dispatch.Spec{Type: "app", Component: "api", Method: "DELETE", Path: "/x"}},
		{name: "method missing", spec: dispatch.Spec{Type: "app", Component: "api", Path: "/x"}, wantErr: "method"},
		{name: "method HEAD", spec: dispatch.Spec{Type: "app", Component: "api", Method: "HEAD", Path: "/x"}, wantErr: "method"},
		{name: "method OPTIONS", spec: dispatch.Spec{Type: "url", Method: "OPTIONS", URL: "https://api.example.com/"}, wantErr: "method"},
		{name: "method CONNECT", spec: dispatch.Spec{Type: "url", Method: "CONNECT", URL: "https://api.example.com/"}, wantErr: "method"},
		{name: "method TRACE", spec: dispatch.Spec{Type: "url", Method: "TRACE", URL: "https://api.example.com/"}, wantErr: "method"},
		{name: "method lower case", spec: dispatch.Spec{Type: "app", Component: "api", Method: "get", Path: "/x"}, wantErr: "method"},

		// App targets.
		{name: "app path with references", spec: dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/users/${input.id}/orders/${input.order}"}},
		{name: "app path root", spec: dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/"}},
		{name: "app path escape", spec: dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/lit/$${input.x}"}},
		{name: "app no component", spec: dispatch.Spec{Type: "app", Method: "GET", Path: "/x"}, wantErr: "component is required"},
		{name: "app undeclared component", spec: dispatch.Spec{Type: "app", Component: "nope", Method: "GET", Path: "/x"}, wantErr: `component "nope" is not declared`},
		{name: "app empty path", spec: dispatch.Spec{Type: "app", Component: "api", Method: "GET"}, wantErr: "must start with /"},
		{name: "app relative path", spec: dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "x/y"}, wantErr: "must start with /"},
		{name: "app path starts with reference", spec: dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "${input.p}/x"}, wantErr: "must start with /"},
		{name: "app path absolute URL", spec: dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "http://evil.example/x"}, wantErr: "must start with /"},
		{name: "app path with query", spec: dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/x?a=1"}, wantErr: "? or #"},
		{name: "app path with fragment", spec: dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/x#f"}, wantErr: "? or #"},
		{name: "app path query after reference", spec: dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/${input.a}?b=${input.b}"}, wantErr: "? or #"},
		{name: "app path dot dot segment", spec: dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/a/../b"}, wantErr: "dot segments"},
		{name: "app path dot segment", spec: dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/a/./b"}, wantErr: "dot segments"},
		{name: "app path stray percent", spec: dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/100%"}, wantErr: "invalid URL escape"},
		{name: "app path bad escape", spec: dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/a%zz/${input.x}"}, wantErr: "invalid URL escape"},
		{name: "app path percent after reference", spec: dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/${input.x}%"}, wantErr: "invalid URL escape"},
		{name: "app path control character", spec: dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/a\nb"}, wantErr: "control character"},
		{name: "app path encoded literal", spec: dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/a%2Fb/${input.x}"}},
		{name: "url stray percent", spec: dispatch.Spec{Type: "url", Method: "GET", URL: "https://api.example.com/100%"}, wantErr: "invalid URL escape"},
		{name: "app with url", spec: dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/x", URL: "https://api.example.com/"}, wantErr: "url is for url targets"},
		{name: "app with name", spec: dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/x", Name: "n"}, wantErr: "only for kazzle"},
		{name: "app bad reference", spec: dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/${input.}"}, wantErr: "reference"},
		{name: "app unknown root", spec: dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/${secret.x}"}, wantErr: "reference"},
		{name: "app unterminated reference", spec: dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/${input.x"}, wantErr: "unterminated"},

		// URL targets.
		{name: "url https", spec: dispatch.Spec{Type: "url", Method: "GET", URL: "https://api.example.com/v1/x"}},
		{name: "url http with port", spec: dispatch.Spec{Type: "url", Method: "GET", URL: "http://api.example.com:8080/x"}},
		{name: "url no path", spec: dispatch.Spec{Type: "url", Method: "GET", URL: "https://api.example.com"}},
		{name: "url reference in path segment", spec: dispatch.Spec{Type: "url", Method: "GET", URL: "https://api.example.com/users/${input.id}"}},
		{name: "url reference in part of segment", spec: dispatch.Spec{Type: "url", Method: "GET", URL: "https://api.example.com/users/u-${input.id}.json"}},
		{name: "url reference in query value", spec: dispatch.Spec{Type: "url", Method: "GET", URL: "https://api.example.com/search?q=${input.q}&n=${input.n}"}},
		{name: "url reference in query without path", spec: dispatch.Spec{Type: "url", Method: "GET", URL: "https://api.example.com?q=${input.q}"}},
		{name: "url reference after port", spec: dispatch.Spec{Type: "url", Method: "GET", URL: "https://api.example.com:8443/${input.p}"}},
		{name: "url relative", spec: dispatch.Spec{Type: "url", Method: "GET", URL: "/x"}, wantErr: "absolute http(s)"},
		{name: "url empty", spec: dispatch.Spec{Type: "url", Method: "GET"}, wantErr: "absolute http(s)"},
		{name: "url no scheme", spec: dispatch.Spec{Type: "url", Method: "GET", URL: "api.example.com/x"}, wantErr: "absolute http(s)"},
		{name: "url ftp", spec: dispatch.Spec{Type: "url", Method: "GET", URL: "ftp://api.example.com/x"}, wantErr: "absolute http(s)"},
		{name: "url file", spec: dispatch.Spec{Type: "url", Method: "GET", URL: "file:///etc/passwd"}, wantErr: "absolute http(s)"},
		{name: "url no host", spec: dispatch.Spec{Type: "url", Method: "GET", URL: "https:///x"}, wantErr: "absolute http(s)"},
		{name: "url user info", spec: dispatch.Spec{Type: "url", Method: "GET", URL: "https://user:pw@api.example.com/x"}, wantErr: "user info"},
		{name: "url user only", spec: dispatch.Spec{Type: "url", Method: "GET", URL: "https://user@api.example.com/x"}, wantErr: "user info"},
		{name: "url fragment", spec: dispatch.Spec{Type: "url", Method: "GET", URL: "https://api.example.com/x#frag"}, wantErr: "fragment"},
		{name: "url empty fragment", spec: dispatch.Spec{Type: "url", Method: "GET", URL: "https://api.example.com/x#"}, wantErr: "fragment"},
		{name: "url reference in fragment", spec: dispatch.Spec{Type: "url", Method: "GET", URL: "https://api.example.com/x#${input.f}"}, wantErr: "fragment"},
		{name: "url dot segment", spec: dispatch.Spec{Type: "url", Method: "GET", URL: "https://api.example.com/a/../b"}, wantErr: "dot segments"},
		{name: "url reference fills host", spec: dispatch.Spec{Type: "url", Method: "GET", URL: "https://${input.host}/x"}, wantErr: "scheme, host or port"},
		{name: "url reference ends host", spec: dispatch.Spec{Type: "url", Method: "GET", URL: "https://api.example.com${input.p}"}, wantErr: "scheme, host or port"},
		{name: "url reference in host label", spec: dispatch.Spec{Type: "url", Method: "GET", URL: "https://api.${input.d}.example.com/x"}, wantErr: "scheme, host or port"},
		{name: "url reference fills port", spec: dispatch.Spec{Type: "url", Method: "GET", URL: "http://a.example:${input.port}/"}, wantErr: "port"},
		{name: "url reference fills scheme", spec: dispatch.Spec{Type: "url", Method: "GET", URL: "${input.scheme}://api.example.com/x"}, wantErr: "url"},
		{name: "url reference is whole url", spec: dispatch.Spec{Type: "url", Method: "GET", URL: "${input.url}"}, wantErr: "url"},
		{name: "url reference fills user info", spec: dispatch.Spec{Type: "url", Method: "GET", URL: "https://${input.u}@api.example.com/x"}, wantErr: "url"},
		{name: "url with path", spec: dispatch.Spec{Type: "url", Method: "GET", URL: "https://api.example.com/", Path: "/x"}, wantErr: "path is for app targets"},
		{name: "url with name", spec: dispatch.Spec{Type: "url", Method: "GET", URL: "https://api.example.com/", Name: "n"}, wantErr: "only for kazzle"},
		{name: "url undeclared component", spec: dispatch.Spec{Type: "url", Component: "nope", Method: "GET", URL: "https://api.example.com/"}, wantErr: `component "nope" is not declared`},

		// Headers.
		{name: "app header", spec: dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/x", Headers: map[string]string{"X-Request-Kind": "tool", "x-lower": "${input.a}"}}},
		{name: "app Authorization", spec: dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/x", Headers: map[string]string{"Authorization": "Bearer x"}}, wantErr: "belongs to the gateway"},
		{name: "app authorization lower case", spec: dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/x", Headers: map[string]string{"authorization": "Bearer x"}}, wantErr: "belongs to the gateway"},
		{name: "app AUTHORIZATION upper case", spec: dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/x", Headers: map[string]string{"AUTHORIZATION": "Bearer x"}}, wantErr: "belongs to the gateway"},
		{name: "app aUtHoRiZaTiOn mixed case", spec: dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/x", Headers: map[string]string{"aUtHoRiZaTiOn": "${env.TOKEN}"}}, wantErr: "belongs to the gateway"},
		{name: "app Kazzle-Tool-Context", spec: dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/x", Headers: map[string]string{"Kazzle-Tool-Context": `{"source":"api"}`}}, wantErr: "belongs to the gateway"},
		{name: "app kazzle-tool-context lower case", spec: dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/x", Headers: map[string]string{"kazzle-tool-context": `{"source":"api"}`}}, wantErr: "belongs to the gateway"},
		{name: "url Authorization allowed", spec: dispatch.Spec{Type: "url", Method: "GET", URL: "https://api.example.com/", Headers: map[string]string{"Authorization": "Bearer ${env.TOKEN}"}, Component: "api"}},
		{name: "url Kazzle-Tool-Context allowed", spec: dispatch.Spec{Type: "url", Method: "GET", URL: "https://api.example.com/", Headers: map[string]string{"Kazzle-Tool-Context": "x"}}},
		{name: "app Host", spec: dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/x", Headers: map[string]string{"Host": "evil.example"}}, wantErr: "set by the transport"},
		{name: "url host lower case", spec: dispatch.Spec{Type: "url", Method: "GET", URL: "https://api.example.com/", Headers: map[string]string{"host": "evil.example"}}, wantErr: "set by the transport"},
		{name: "url Content-Length", spec: dispatch.Spec{Type: "url", Method: "POST", URL: "https://api.example.com/", Headers: map[string]string{"Content-Length": "5"}}, wantErr: "set by the transport"},
		{name: "app Transfer-Encoding", spec: dispatch.Spec{Type: "app", Component: "api", Method: "POST", Path: "/x", Headers: map[string]string{"transfer-encoding": "chunked"}}, wantErr: "set by the transport"},
		{name: "app Connection", spec: dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/x", Headers: map[string]string{"Connection": "close"}}, wantErr: "set by the transport"},
		{name: "url Upgrade", spec: dispatch.Spec{Type: "url", Method: "GET", URL: "https://api.example.com/", Headers: map[string]string{"Upgrade": "websocket"}}, wantErr: "set by the transport"},
		{name: "url TE", spec: dispatch.Spec{Type: "url", Method: "GET", URL: "https://api.example.com/", Headers: map[string]string{"TE": "trailers"}}, wantErr: "set by the transport"},
		{name: "header name with space", spec: dispatch.Spec{Type: "url", Method: "GET", URL: "https://api.example.com/", Headers: map[string]string{"X Bad": "v"}}, wantErr: "not a valid header name"},
		{name: "header name with colon", spec: dispatch.Spec{Type: "url", Method: "GET", URL: "https://api.example.com/", Headers: map[string]string{"X:Bad": "v"}}, wantErr: "not a valid header name"},
		{name: "header name with newline", spec: dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/x", Headers: map[string]string{"X-A\r\nX-B": "v"}}, wantErr: "not a valid header name"},
		{name: "header name empty", spec: dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/x", Headers: map[string]string{"": "v"}}, wantErr: "not a valid header name"},
		{name: "header name unicode", spec: dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/x", Headers: map[string]string{"X-Grüße": "v"}}, wantErr: "not a valid header name"},
		{name: "header literal value with CRLF", spec: dispatch.Spec{Type: "url", Method: "GET", URL: "https://api.example.com/", Headers: map[string]string{"X-A": "v\r\nX-B: w"}}, wantErr: "invalid value"},
		{name: "header bad reference", spec: dispatch.Spec{Type: "url", Method: "GET", URL: "https://api.example.com/", Headers: map[string]string{"X-A": "${nope}"}}, wantErr: "header"},

		// Query.
		{name: "query with references", spec: dispatch.Spec{Type: "url", Method: "GET", URL: "https://api.example.com/", Query: map[string]string{"q": "${input.q}", "lit": "1"}}},
		{name: "query bad reference", spec: dispatch.Spec{Type: "url", Method: "GET", URL: "https://api.example.com/", Query: map[string]string{"q": "${input..q}"}}, wantErr: `query "q"`},

		// Env.
		{name: "app env declared", spec: dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/${env.TOKEN}", Headers: map[string]string{"X-Region": "${env.REGION}"}}},
		{name: "app env undeclared in path", spec: dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/${env.HOME}"}, wantErr: "declares no env HOME"},
		{name: "app env undeclared in header", spec: dispatch.Spec{Type: "app", Component: "bare", Method: "GET", Path: "/x", Headers: map[string]string{"X-Token": "${env.TOKEN}"}}, wantErr: "declares no env TOKEN"},
		{name: "app env undeclared in query", spec: dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/x", Query: map[string]string{"k": "${env.PATH}"}}, wantErr: "declares no env PATH"},
		{name: "app env undeclared in body", spec: dispatch.Spec{Type: "app", Component: "api", Method: "POST", Path: "/x", Body: body(`{"a":["${env.AWS_SECRET}"]}`)}, wantErr: "declares no env AWS_SECRET"},
		{name: "url env with component", spec: dispatch.Spec{Type: "url", Component: "api", Method: "GET", URL: "https://api.example.com/x?key=${env.TOKEN}"}},
		{name: "url env without component", spec: dispatch.Spec{Type: "url", Method: "GET", URL: "https://api.example.com/x?key=${env.TOKEN}"}, wantErr: "needs a component"},
		{name: "url env without component in header", spec: dispatch.Spec{Type: "url", Method: "GET", URL: "https://api.example.com/x", Headers: map[string]string{"Authorization": "Bearer ${env.TOKEN}"}}, wantErr: "needs a component"},
		{name: "url env undeclared on component", spec: dispatch.Spec{Type: "url", Component: "api", Method: "GET", URL: "https://api.example.com/x?key=${env.OTHER}"}, wantErr: "declares no env OTHER"},
		{name: "env with nested path", spec: dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/${env.TOKEN.x}"}, wantErr: "env.NAME"},

		// Body.
		{name: "body whole input", spec: dispatch.Spec{Type: "app", Component: "api", Method: "POST", Path: "/x", Body: body(`"${input}"`)}},
		{name: "body object", spec: dispatch.Spec{Type: "url", Method: "PUT", URL: "https://api.example.com/x", Body: body(`{"id":"${input.id}","tags":["a","${input.tag}"],"n":1}`)}},
		{name: "body invalid JSON", spec: dispatch.Spec{Type: "app", Component: "api", Method: "POST", Path: "/x", Body: body(`{"a":`)}, wantErr: "body"},
		{name: "body bad reference", spec: dispatch.Spec{Type: "app", Component: "api", Method: "POST", Path: "/x", Body: body(`{"a":"${input.a.}"}`)}, wantErr: "body"},

		// Kazzle targets.
		{name: "kazzle name", spec: dispatch.Spec{Type: "kazzle", Name: "pickColor"}},
		{name: "kazzle no name", spec: dispatch.Spec{Type: "kazzle"}, wantErr: "name is required"},
		{name: "kazzle with method", spec: dispatch.Spec{Type: "kazzle", Name: "n", Method: "GET"}, wantErr: "only name"},
		{name: "kazzle with component", spec: dispatch.Spec{Type: "kazzle", Name: "n", Component: "api"}, wantErr: "only name"},
		{name: "kazzle with path", spec: dispatch.Spec{Type: "kazzle", Name: "n", Path: "/x"}, wantErr: "only name"},
		{name: "kazzle with url", spec: dispatch.Spec{Type: "kazzle", Name: "n", URL: "https://api.example.com/"}, wantErr: "only name"},
		{name: "kazzle with query", spec: dispatch.Spec{Type: "kazzle", Name: "n", Query: map[string]string{}}, wantErr: "only name"},
		{name: "kazzle with headers", spec: dispatch.Spec{Type: "kazzle", Name: "n", Headers: map[string]string{"X": "y"}}, wantErr: "only name"},
		{name: "kazzle with body", spec: dispatch.Spec{Type: "kazzle", Name: "n", Body: body(`{}`)}, wantErr: "only name"},

		// Types.
		{name: "type missing", spec: dispatch.Spec{Method: "GET", URL: "https://api.example.com/"}, wantErr: "type is required"},
		{name: "type unknown", spec: dispatch.Spec{Type: "grpc", Method: "GET", URL: "https://api.example.com/"}, wantErr: `unknown target type "grpc"`},
		{name: "type wrong case", spec: dispatch.Spec{Type: "URL", Method: "GET", URL: "https://api.example.com/"}, wantErr: "unknown target type"},
	}
	comps := testComponents(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tgt, err := dispatch.Compile(tt.spec, dispatch.Env{Components: comps})
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Compile: %v", err)
				}
				if tgt == nil {
					t.Fatalf("Compile returned a nil target and no error")
				}
				return
			}
			if err == nil {
				t.Fatalf("Compile succeeded, want an error containing %q", tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Compile error %q, want it to contain %q", err, tt.wantErr)
			}
			if tgt != nil {
				t.Errorf("Compile returned a target with its error")
			}
		})
	}
}

func TestCompileComponentAndRefs(t *testing.T) {
	comps := testComponents(t)
	tests := []struct {
		name     string
		spec     dispatch.Spec
		wantComp string
		wantRefs []string
	}{
		{
			name:     "app",
			spec:     dispatch.Spec{Type: "app", Component: "api", Method: "POST", Path: "/u/${input.id}", Query: map[string]string{"r": "${env.REGION}"}, Headers: map[string]string{"X-A": "${input.a}"}, Body: jsontext.Value(`"${input}"`)},
			wantComp: "api",
			wantRefs: []string{"${input.id}", "${env.REGION}", "${input.a}", "${input}"},
		},
		{
			name:     "url with env owner",
			spec:     dispatch.Spec{Type: "url", Component: "api", Method: "GET", URL: "https://api.example.com/${input.p}?k=${env.TOKEN}"},
			wantComp: "api",
			wantRefs: []string{"${input.p}", "${env.TOKEN}"},
		},
		{
			name: "url without component",
			spec: dispatch.Spec{Type: "url", Method: "GET", URL: "https://api.example.com/x"},
		},
		{
			name: "kazzle",
			spec: dispatch.Spec{Type: "kazzle", Name: "n"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tgt, err := dispatch.Compile(tt.spec, dispatch.Env{Components: comps})
			if err != nil {
				t.Fatalf("Compile: %v", err)
			}
			var gotComp string
			if tgt.Component != nil {
				gotComp = tgt.Component.Name
			}
			if gotComp != tt.wantComp {
				t.Errorf("Component = %q, want %q", gotComp, tt.wantComp)
			}
			var gotRefs []string
			for _, r := range tgt.Refs() {
				gotRefs = append(gotRefs, r.Text)
			}
			if !reflect.DeepEqual(gotRefs, tt.wantRefs) {
				t.Errorf("Refs = %q, want %q", gotRefs, tt.wantRefs)
			}
			if tt.wantComp == "" && tgt.Env() != nil {
				t.Errorf("Env = %v, want nil without a component", tgt.Env())
			}
			if tt.wantComp != "" && !reflect.DeepEqual(tgt.Env(), comps[tt.wantComp].Env) {
				t.Errorf("Env = %v, want the component's %v", tgt.Env(), comps[tt.wantComp].Env)
			}
		})
	}
}

func mustCompile(t *testing.T, s dispatch.Spec) *dispatch.Target {
	t.Helper()
	tgt, err := dispatch.Compile(s, dispatch.Env{Components: testComponents(t)})
	if err != nil {
		t.Fatalf("Compile(%+v): %v", s, err)
	}
	return tgt
}

// TestRequestURL checks how references are encoded into the URL and that
// the component's base path is kept.
func TestRequestURL(t *testing.T) {
	tests := []struct {
		name  string
		spec  dispatch.Spec
		input string
		want  string // the whole request URL as sent
	}{
		{name: "app base path kept", spec: dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/x"}, input: `{}`, want: "http://api.internal:8080/base/x"},
		{name: "app base trailing slash", spec: dispatch.Spec{Type: "app", Component: "slash", Method: "GET", Path: "/x"}, input: `{}`, want: "http://slash.internal/base/x"},
		{name: "app bare base", spec: dispatch.Spec{Type: "app", Component: "bare", Method: "GET", Path: "/x/y"}, input: `{}`, want: "http://bare.internal/x/y"},
		{name: "app root path", spec: dispatch.Spec{Type: "app", Component: "bare", Method: "GET", Path: "/"}, input: `{}`, want: "http://bare.internal/"},
		{name: "segment plain", spec: dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/f/${input.v}"}, input: `{"v":"abc"}`, want: "http://api.internal:8080/base/f/abc"},
		{name: "dots inside a name stay", spec: dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/f/${input.v}"}, input: `{"v":"a..b"}`, want: "http://api.internal:8080/base/f/a..b"},
		{name: "space and query chars", spec: dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/f/${input.v}"}, input: `{"v":"a b?c#d"}`, want: "http://api.internal:8080/base/f/a%20b%3Fc%23d"},
		{name: "unicode", spec: dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/f/${input.v}"}, input: `{"v":"grüße"}`, want: "http://api.internal:8080/base/f/gr%C3%BC%C3%9Fe"},
		{name: "number", spec: dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/f/${input.v}"}, input: `{"v":12345678901234567890}`, want: "http://api.internal:8080/base/f/12345678901234567890"},
		{name: "array item", spec: dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/f/${input.items.1}"}, input: `{"items":["a","b c"]}`, want: "http://api.internal:8080/base/f/b%20c"},
		{name: "nested value", spec: dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/f/${input.a.b}"}, input: `{"a":{"b":"x"}}`, want: "http://api.internal:8080/base/f/x"},
		{name: "one pass", spec: dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/f/${input.v}"}, input: `{"v":"${env.TOKEN}"}`, want: "http://api.internal:8080/base/f/$%7Benv.TOKEN%7D"},
		{name: "app query map", spec: dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/s", Query: map[string]string{"q": "${input.q}", "page": "2"}}, input: `{"q":"a b&c=d"}`, want: "http://api.internal:8080/base/s?page=2&q=a+b%26c%3Dd"},
		{name: "query env", spec: dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/s", Query: map[string]string{"k": "${env.TOKEN}"}}, input: `{}`, want: "http://api.internal:8080/base/s?k=s3cret"},
		{name: "url path segment", spec: dispatch.Spec{Type: "url", Method: "GET", URL: "https://api.example.com/users/${input.id}"}, input: `{"id":"a?b"}`, want: "https://api.example.com/users/a%3Fb"},
		{name: "url part of segment", spec: dispatch.Spec{Type: "url", Method: "GET", URL: "https://api.example.com/users/u-${input.id}.json"}, input: `{"id":"a..b"}`, want: "https://api.example.com/users/u-a..b.json"},
		{name: "url part of segment may hold a dot", spec: dispatch.Spec{Type: "url", Method: "GET", URL: "https://api.example.com/users/u${input.id}"}, input: `{"id":".x"}`, want: "https://api.example.com/users/u.x"},
		{name: "url own query value", spec: dispatch.Spec{Type: "url", Method: "GET", URL: "https://api.example.com/s?q=${input.q}&lang=en"}, input: `{"q":"a b&admin=1#f"}`, want: "https://api.example.com/s?q=a+b%26admin%3D1%23f&lang=en"},
		{name: "url query without path", spec: dispatch.Spec{Type: "url", Method: "GET", URL: "https://api.example.com?q=${input.q}"}, input: `{"q":"/x"}`, want: "https://api.example.com?q=%2Fx"},
		{name: "url path and query", spec: dispatch.Spec{Type: "url", Method: "GET", URL: "https://api.example.com/${input.p}?q=${input.p}"}, input: `{"p":"a b;c"}`, want: "https://api.example.com/a%20b%3Bc?q=a+b%3Bc"},
		{name: "url own query and query map", spec: dispatch.Spec{Type: "url", Method: "GET", URL: "https://api.example.com/s?a=1", Query: map[string]string{"b": "${input.b}"}}, input: `{"b":"x&y"}`, want: "https://api.example.com/s?a=1&b=x%26y"},
		{name: "url query map only", spec: dispatch.Spec{Type: "url", Method: "GET", URL: "https://api.example.com/s", Query: map[string]string{"b": "${input.b}"}}, input: `{"b":"?#"}`, want: "https://api.example.com/s?b=%3F%23"},
		{name: "url env in query", spec: dispatch.Spec{Type: "url", Component: "api", Method: "GET", URL: "https://api.example.com/s?key=${env.TOKEN}"}, input: `{}`, want: "https://api.example.com/s?key=s3cret"},
		{name: "url escape literal", spec: dispatch.Spec{Type: "url", Method: "GET", URL: "https://api.example.com/s?t=$${input.x}"}, input: `{}`, want: "https://api.example.com/s?t=${input.x}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tgt := mustCompile(t, tt.spec)
			req, err := tgt.Request(context.Background(), decode(t, tt.input), nil)
			if err != nil {
				t.Fatalf("Request: %v", err)
			}
			if got := req.URL.String(); got != tt.want {
				t.Errorf("URL = %q, want %q", got, tt.want)
			}
			if req.Method != tt.spec.Method {
				t.Errorf("Method = %q, want %q", req.Method, tt.spec.Method)
			}
		})
	}
}

// TestRequestOriginFixed sends hostile values through every place a
// reference may stand and checks that the request still goes to the
// author's origin, with the whole value in one path segment or one query
// value.
func TestRequestOriginFixed(t *testing.T) {
	// inSegment: the path segment rule (TestRequestPathSegmentRule) lets
	// the value stand in a path; otherwise a path place must refuse it.
	hostile := []struct {
		v         string
		inSegment bool
	}{
		{"@evil.com", true},
		{"//evil.com", false},
		{"http://evil.com", false},
		{"https://evil.com/x", false},
		{"%2F%2Fevil", false},
		{"\\evil", false},
		{"\\\\evil.com\\x", false},
		{"?x=", true},
		{"#frag", true},
		{"evil.com:80", true},
		{":443", true},
		{"user:pw@evil.com", true},
		{"/../../evil", false},
		{"a\r\nHost: evil.com", false},
		{"a b", true},
		{"${env.TOKEN}", true},
		{"", false},
	}
	type place struct {
		name       string
		spec       dispatch.Spec
		origin     string // scheme://host[:port]
		pathPrefix string // the decoded path before the value, "" for query places
		pathSuffix string
		queryKey   string // the query key holding the value, "" for path places
	}
	places := []place{
		{name: "app path", spec: dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/files/${input.v}"}, origin: "http://api.internal:8080", pathPrefix: "/base/files/"},
		{name: "app path mid", spec: dispatch.Spec{Type: "app", Component: "bare", Method: "DELETE", Path: "/${input.v}/x"}, origin: "http://bare.internal", pathPrefix: "/", pathSuffix: "/x"},
		{name: "app query", spec: dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/s", Query: map[string]string{"q": "${input.v}"}}, origin: "http://api.internal:8080", queryKey: "q"},
		{name: "url path", spec: dispatch.Spec{Type: "url", Method: "GET", URL: "https://api.example.com/files/${input.v}"}, origin: "https://api.example.com", pathPrefix: "/files/"},
		{name: "url path after port", spec: dispatch.Spec{Type: "url", Method: "POST", URL: "http://api.example.com:8443/${input.v}"}, origin: "http://api.example.com:8443", pathPrefix: "/"},
		{name: "url own query", spec: dispatch.Spec{Type: "url", Method: "GET", URL: "https://api.example.com/s?q=${input.v}"}, origin: "https://api.example.com", queryKey: "q"},
		{name: "url query no path", spec: dispatch.Spec{Type: "url", Method: "GET", URL: "https://api.example.com?q=${input.v}"}, origin: "https://api.example.com", queryKey: "q"},
		{name: "url query map", spec: dispatch.Spec{Type: "url", Method: "GET", URL: "https://api.example.com/s", Query: map[string]string{"q": "${input.v}"}}, origin: "https://api.example.com", queryKey: "q"},
	}
	for _, p := range places {
		tgt := mustCompile(t, p.spec)
		for _, h := range hostile {
			v := h.v
			t.Run(p.name+"/"+v, func(t *testing.T) {
				req, err := tgt.Request(context.Background(), map[string]any{"v": v}, nil)
				if p.queryKey == "" && !h.inSegment {
					if err == nil || !strings.Contains(err.Error(), "must stay in its segment") {
						t.Fatalf("Request = %v, %v; want the path segment rule to refuse %q", req, err, v)
					}
					return
				}
				if err != nil {
					t.Fatalf("Request: %v", err)
				}
				u := req.URL
				if got := u.Scheme + "://" + u.Host; got != p.origin {
					t.Errorf("origin = %q, want %q (URL %s)", got, p.origin, u)
				}
				if req.Host != "" && req.Host != u.Host {
					t.Errorf("req.Host = %q, want %q", req.Host, u.Host)
				}
				if u.User != nil {
					t.Errorf("URL has user info %q (URL %s)", u.User, u)
				}
				if u.Fragment != "" || u.RawFragment != "" {
					t.Errorf("URL has fragment %q (URL %s)", u.Fragment, u)
				}
				if u.Opaque != "" {
					t.Errorf("URL is opaque %q", u.Opaque)
				}
				if p.queryKey != "" {
					q := u.Query()
					if got := q[p.queryKey]; len(got) != 1 || got[0] != v {
						t.Errorf("query %q = %q, want [%q] (URL %s)", p.queryKey, got, v, u)
					}
					if len(q) != 1 {
						t.Errorf("query has %d keys, want 1: %v (URL %s)", len(q), q, u)
					}
					return
				}
				if want := p.pathPrefix + v + p.pathSuffix; u.Path != want {
					t.Errorf("decoded path = %q, want %q (URL %s)", u.Path, want, u)
				}
				wantSegs := strings.Count(p.pathPrefix+"x"+p.pathSuffix, "/")
				if got := strings.Count(u.EscapedPath(), "/"); got != wantSegs {
					t.Errorf("escaped path %q has %d slashes, want %d: the value added segments", u.EscapedPath(), got, wantSegs)
				}
				if u.RawQuery != "" {
					t.Errorf("value reached the query: %q (URL %s)", u.RawQuery, u)
				}
			})
		}
	}
}

func TestRequestHeaders(t *testing.T) {
	tests := []struct {
		name    string
		headers map[string]string
		input   string
		want    map[string]string
		wantErr string
	}{
		{name: "literal", headers: map[string]string{"x-kind": "tool"}, input: `{}`, want: map[string]string{"X-Kind": "tool"}},
		{name: "input", headers: map[string]string{"X-User-Lang": "${input.lang}"}, input: `{"lang":"tr"}`, want: map[string]string{"X-User-Lang": "tr"}},
		{name: "spliced number", headers: map[string]string{"X-Page": "p=${input.n}"}, input: `{"n":3}`, want: map[string]string{"X-Page": "p=3"}},
		{name: "env", headers: map[string]string{"X-Token": "Token ${env.TOKEN}"}, input: `{}`, want: map[string]string{"X-Token": "Token s3cret"}},
		{name: "one pass", headers: map[string]string{"X-Echo": "${input.v}"}, input: `{"v":"${env.TOKEN}"}`, want: map[string]string{"X-Echo": "${env.TOKEN}"}},
		{name: "tab allowed", headers: map[string]string{"X-A": "${input.v}"}, input: `{"v":"a\tb"}`, want: map[string]string{"X-A": "a\tb"}},
		{name: "CR", headers: map[string]string{"X-A": "${input.v}"}, input: `{"v":"a\rb"}`, wantErr: "CR, LF or NUL"},
		{name: "LF", headers: map[string]string{"X-A": "${input.v}"}, input: `{"v":"a\nb"}`, wantErr: "CR, LF or NUL"},
		{name: "CRLF injection", headers: map[string]string{"X-A": "${input.v}"}, input: `{"v":"a\r\nAuthorization: Bearer forged"}`, wantErr: "CR, LF or NUL"},
		{name: "NUL", headers: map[string]string{"X-A": "${input.v}"}, input: `{"v":"a\u0000b"}`, wantErr: "CR, LF or NUL"},
		{name: "LF spliced", headers: map[string]string{"X-A": "pre-${input.v}-post"}, input: `{"v":"\n"}`, wantErr: "CR, LF or NUL"},
		{name: "LF inside object value", headers: map[string]string{"X-A": "${input.v}"}, input: `{"v":{"k":"a\nb"}}`, want: map[string]string{"X-A": `{"k":"a\nb"}`}},
		{name: "other control", headers: map[string]string{"X-A": "${input.v}"}, input: `{"v":"a\u0001b"}`, wantErr: "not a valid header value"},
		{name: "DEL", headers: map[string]string{"X-A": "${input.v}"}, input: `{"v":"a\u007fb"}`, wantErr: "not a valid header value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tgt := mustCompile(t, dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/x", Headers: tt.headers})
			req, err := tgt.Request(context.Background(), decode(t, tt.input), nil)
			if tt.wantErr != "" {
				if err == nil {
					t.Fatalf("Request succeeded with headers %q, want an error containing %q", req.Header, tt.wantErr)
				}
				if !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Request error %q, want it to contain %q", err, tt.wantErr)
				}
				var me *refs.MissingError
				if errors.As(err, &me) {
					t.Errorf("error is a *refs.MissingError, want a rule error")
				}
				return
			}
			if err != nil {
				t.Fatalf("Request: %v", err)
			}
			for k, v := range tt.want {
				if got := req.Header.Values(k); len(got) != 1 || got[0] != v {
					t.Errorf("header %s = %q, want [%q]", k, got, v)
				}
			}
			for _, h := range []string{"Authorization", "Kazzle-Tool-Context", "Content-Type"} {
				if got := req.Header.Get(h); got != "" {
					t.Errorf("Request set %s = %q; the gateway adds it, not the target", h, got)
				}
			}
		})
	}
}

func TestRequestBody(t *testing.T) {
	tests := []struct {
		name     string
		method   string
		body     string // the target's body; "" for none
		input    string
		wantBody string // JSON; "" means no body at all
	}{
		{name: "GET without body", method: "GET", input: `{"a":1}`},
		{name: "POST without body", method: "POST", input: `{"a":1}`},
		{name: "PUT without body", method: "PUT", input: `{"a":1}`},
		{name: "PATCH without body", method: "PATCH", input: `{"a":1}`},
		{name: "DELETE without body", method: "DELETE", input: `{"a":1}`},
		{name: "whole input", method: "POST", body: `"${input}"`, input: `{"a":1,"b":[true,null,"x"],"c":{"d":1.50}}`, wantBody: `{"a":1,"b":[true,null,"x"],"c":{"d":1.50}}`},
		{name: "whole input keeps big numbers", method: "POST", body: `"${input}"`, input: `{"n":12345678901234567890123}`, wantBody: `{"n":12345678901234567890123}`},
		{name: "empty input", method: "POST", body: `"${input}"`, input: `{}`, wantBody: `{}`},
		{name: "typed values", method: "PATCH", body: `{"id":"${input.id}","n":"${input.n}","on":"${input.on}","obj":"${input.obj}","none":"${input.none}","label":"n=${input.n} obj=${input.obj}"}`, input: `{"id":"u1","n":5,"on":false,"obj":{"k":["v"]},"none":null}`, wantBody: `{"id":"u1","n":5,"on":false,"obj":{"k":["v"]},"none":null,"label":"n=5 obj={\"k\":[\"v\"]}"}`},
		{name: "literal body", method: "POST", body: `{"a":1,"b":"lit"}`, input: `{}`, wantBody: `{"a":1,"b":"lit"}`},
		{name: "array item", method: "POST", body: `["${input.items.0}","${input.items.1}"]`, input: `{"items":[{"a":1},2]}`, wantBody: `[{"a":1},2]`},
		{name: "one pass", method: "POST", body: `{"q":"${input.q}"}`, input: `{"q":"${env.TOKEN}"}`, wantBody: `{"q":"${env.TOKEN}"}`},
		{name: "env", method: "POST", body: `{"region":"${env.REGION}"}`, input: `{}`, wantBody: `{"region":"eu/west"}`},
		{name: "escape", method: "POST", body: `{"t":"$${input.q}"}`, input: `{"q":"x"}`, wantBody: `{"t":"${input.q}"}`},
		{name: "DELETE with body", method: "DELETE", body: `{"id":"${input.id}"}`, input: `{"id":"7"}`, wantBody: `{"id":"7"}`},
		{name: "GET with body", method: "GET", body: `{"id":"${input.id}"}`, input: `{"id":"7"}`, wantBody: `{"id":"7"}`},
		{name: "html not escaped", method: "POST", body: `"${input}"`, input: `{"h":"<b>&</b>"}`, wantBody: `{"h":"<b>&</b>"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := dispatch.Spec{Type: "app", Component: "api", Method: tt.method, Path: "/x"}
			if tt.body != "" {
				spec.Body = jsontext.Value(tt.body)
			}
			req, err := mustCompile(t, spec).Request(context.Background(), decode(t, tt.input), nil)
			if err != nil {
				t.Fatalf("Request: %v", err)
			}
			if tt.wantBody == "" {
				if req.Body != nil && req.Body != http.NoBody {
					b, _ := io.ReadAll(req.Body)
					t.Errorf("request has a body %q, want none", b)
				}
				if req.ContentLength != 0 {
					t.Errorf("ContentLength = %d, want 0", req.ContentLength)
				}
				if ct := req.Header.Get("Content-Type"); ct != "" {
					t.Errorf("Content-Type = %q, want none without a body", ct)
				}
				return
			}
			if req.Body == nil {
				t.Fatalf("request has no body, want %s", tt.wantBody)
			}
			got, err := io.ReadAll(req.Body)
			if err != nil {
				t.Fatal(err)
			}
			if req.ContentLength != int64(len(got)) {
				t.Errorf("ContentLength = %d, want %d", req.ContentLength, len(got))
			}
			if ct := req.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type = %q, want application/json", ct)
			}
			if !jsonEqual(t, got, []byte(tt.wantBody)) {
				t.Errorf("body = %s, want %s", got, tt.wantBody)
			}
			if req.GetBody == nil {
				t.Errorf("GetBody is nil: the body cannot be replayed")
			}
		})
	}
}

// jsonEqual compares two JSON documents, numbers by their exact text.
func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	dec := func(b []byte) any {
		v, err := jsonread.Value(jsontext.NewDecoder(bytes.NewReader(b)))
		if err != nil {
			t.Fatalf("decoding %s: %v", b, err)
		}
		return v
	}
	return reflect.DeepEqual(dec(a), dec(b))
}

func TestRequestMissing(t *testing.T) {
	tests := []struct {
		name    string
		spec    dispatch.Spec
		input   any
		wantRef string
	}{
		{name: "path", spec: dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/u/${input.id}"}, input: map[string]any{}, wantRef: "${input.id}"},
		{name: "nested", spec: dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/u/${input.a.b}"}, input: map[string]any{"a": map[string]any{}}, wantRef: "${input.a.b}"},
		{name: "through a string", spec: dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/u/${input.a.b}"}, input: map[string]any{"a": "text"}, wantRef: "${input.a.b}"},
		{name: "array out of range", spec: dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/u/${input.items.2}"}, input: map[string]any{"items": []any{"a", "b"}}, wantRef: "${input.items.2}"},
		{name: "array not an index", spec: dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/u/${input.items.x}"}, input: map[string]any{"items": []any{"a"}}, wantRef: "${input.items.x}"},
		{name: "nil input", spec: dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/u/${input.id}"}, input: nil, wantRef: "${input.id}"},
		{name: "url path", spec: dispatch.Spec{Type: "url", Method: "GET", URL: "https://api.example.com/u/${input.id}"}, input: map[string]any{}, wantRef: "${input.id}"},
		{name: "url query", spec: dispatch.Spec{Type: "url", Method: "GET", URL: "https://api.example.com/u?q=${input.q}"}, input: map[string]any{}, wantRef: "${input.q}"},
		{name: "query map", spec: dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/u", Query: map[string]string{"q": "${input.q}"}}, input: map[string]any{}, wantRef: "${input.q}"},
		{name: "header", spec: dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/u", Headers: map[string]string{"X-A": "${input.h}"}}, input: map[string]any{}, wantRef: "${input.h}"},
		{name: "body single", spec: dispatch.Spec{Type: "app", Component: "api", Method: "POST", Path: "/u", Body: jsontext.Value(`{"a":"${input.a}"}`)}, input: map[string]any{}, wantRef: "${input.a}"},
		{name: "body spliced", spec: dispatch.Spec{Type: "app", Component: "api", Method: "POST", Path: "/u", Body: jsontext.Value(`{"a":"x-${input.a}"}`)}, input: map[string]any{}, wantRef: "${input.a}"},
		{name: "body in array", spec: dispatch.Spec{Type: "app", Component: "api", Method: "POST", Path: "/u", Body: jsontext.Value(`[1,["${input.a}"]]`)}, input: map[string]any{}, wantRef: "${input.a}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := mustCompile(t, tt.spec).Request(context.Background(), tt.input, nil)
			if err == nil {
				t.Fatalf("Request succeeded (URL %s), want a *refs.MissingError", req.URL)
			}
			var me *refs.MissingError
			if !errors.As(err, &me) {
				t.Fatalf("error %v (%T), want a *refs.MissingError", err, err)
			}
			if me.Ref != tt.wantRef {
				t.Errorf("MissingError.Ref = %q, want %q", me.Ref, tt.wantRef)
			}
			if !strings.Contains(err.Error(), tt.wantRef) {
				t.Errorf("error %q does not name %s", err, tt.wantRef)
			}
		})
	}
}

func TestRequestEnvRemovedAfterCompile(t *testing.T) {
	comps := testComponents(t)
	tgt, err := dispatch.Compile(dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/x", Headers: map[string]string{"X-T": "${env.TOKEN}"}}, dispatch.Env{Components: comps})
	if err != nil {
		t.Fatal(err)
	}
	delete(comps["api"].Env, "TOKEN")
	_, err = tgt.Request(context.Background(), map[string]any{}, nil)
	var me *refs.MissingError
	if !errors.As(err, &me) || me.Ref != "${env.TOKEN}" {
		t.Fatalf("Request error %v, want a *refs.MissingError for ${env.TOKEN}: an absent env is never an empty value", err)
	}
}

func TestRequestKazzle(t *testing.T) {
	tgt := mustCompile(t, dispatch.Spec{Type: "kazzle", Name: "pickColor"})
	req, err := tgt.Request(context.Background(), map[string]any{}, nil)
	if err == nil {
		t.Fatalf("Request for a kazzle target = %v, want an error", req.URL)
	}
}

func TestRequestContext(t *testing.T) {
	type key struct{}
	ctx := context.WithValue(context.Background(), key{}, "v")
	req, err := mustCompile(t, dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/x"}).Request(ctx, map[string]any{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if req.Context().Value(key{}) != "v" {
		t.Errorf("the request does not carry the caller's context")
	}
}

// TestRequestPathSegmentRule checks the path segment rule of
// docs/configuration.md, "References": a value resolved
// into a path segment, of an app path or a url's path, that a server could
// read as a separator or a dot segment fails the call, naming the rule and
// the reference but not the value. Values that are plain text, numbers,
// booleans or JSON text without such characters stand in one segment.
func TestRequestPathSegmentRule(t *testing.T) {
	places := []struct {
		name string
		spec dispatch.Spec
	}{
		{"app", dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/f/${input.v}/x"}},
		{"app part of segment", dispatch.Spec{Type: "app", Component: "bare", Method: "POST", Path: "/f/v-${input.v}"}},
		{"url", dispatch.Spec{Type: "url", Method: "GET", URL: "https://api.example.com/users/${input.v}?q=1"}},
		{"url part of segment", dispatch.Spec{Type: "url", Method: "DELETE", URL: "https://api.example.com/users/${input.v}.json"}},
	}
	refused := []struct {
		name string
		v    any
	}{
		{"empty", ""},
		{"blank", "  "},
		{"dot", "."},
		{"dot dot", ".."},
		{"three dots (Windows drops trailing dots)", "..."},
		{"dots and spaces", ". ."},
		{"dot dot space", ".. "},
		{"dot dot with a path parameter (Tomcat)", "..;x"},
		{"path parameter alone", ";jsessionid=1"},
		{"slash", "/"},
		{"slash inside", "a/b"},
		{"climb", "../admin"},
		{"backslash", "\\"},
		{"backslash climb", "..\\x"},
		{"NUL", "a\x00b"},
		{"LF", "a\nb"},
		{"CR", "\r"},
		{"tab", "a\tb"},
		{"DEL", "a\x7fb"},
		{"C1 next line", "a\u0085b"},
		{"%2f", "%2f"},
		{"%2F", "a%2Fb"},
		{"%5c", "%5c"},
		{"%5C", "a%5Cb"},
		{"%2e", "%2e"},
		{"%2E", "%2E"},
		{"%2e%2e", "%2e%2e"},
		{"mixed case %2E%2e", "%2E%2e"},
		{"dot then %2e", ".%2e"},
		{"%2E then dot", "%2E."},
		{"%00", "a%00"},
		{"%0a", "x%0a"},
		{"%0D%0A", "%0D%0A"},
		{"%7f", "%7f"},
		{"%20 alone", "%20"},
		{"double encoded slash", "%252f"},
		{"double encoded dots", "%252e%252E"},
		{"triple encoded slash", "%25252F"},
		{"IIS %u slash", "%u002f"},
		{"IIS %u dots", "%U002E%u002e"},
		{"overlong slash", "%c0%af"},
		{"overlong dot", "%c0%ae%c0%ae"},
		{"raw invalid UTF-8", "a\xc0\xafb"},
		{"fullwidth solidus", "a\uff0fb"},
		{"fullwidth reverse solidus", "\uff3c"},
		{"encoded fullwidth solidus", "%EF%BC%8F"},
		{"two dot leader", "\u2025"},
		{"fullwidth dots", "\uff0e\uff0e"},
		{"object holding a slash", map[string]any{"a": "b/c"}},
		{"array holding a climb", []any{"../x"}},
	}
	allowed := []struct {
		name string
		v    any
		want string // the escaped text in the segment
	}{
		{"name", "abc", "abc"},
		{"dots inside", "a..b", "a..b"},
		{"leading dot", ".well-known", ".well-known"},
		{"dots then a letter", "..a", "..a"},
		{"path parameter", "a;b", "a%3Bb"},
		{"stray percent", "100%", "100%25"},
		{"percent that escapes nothing", "%zz%2", "%25zz%252"},
		{"percent-encoded letter", "%41", "%2541"},
		{"encoded percent", "50%25off", "50%2525off"},
		{"query and fragment characters", "a b?c#d", "a%20b%3Fc%23d"},
		{"unicode", "grüße", "gr%C3%BC%C3%9Fe"},
		{"one pass", "${env.TOKEN}", "$%7Benv.TOKEN%7D"},
		{"big integer", jsonread.Number("12345678901234567890"), "12345678901234567890"},
		{"negative decimal", jsonread.Number("-1.5e3"), "-1.5e3"},
		{"bool", true, "true"},
		{"null", nil, "null"},
		{"object without a slash", map[string]any{"a": 1}, "%7B%22a%22:1%7D"},
	}
	for _, p := range places {
		tgt := mustCompile(t, p.spec)
		plain, err := tgt.Request(context.Background(), map[string]any{"v": "x"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		segments := strings.Count(plain.URL.EscapedPath(), "/")
		for _, tc := range refused {
			t.Run(p.name+"/refused/"+tc.name, func(t *testing.T) {
				req, err := tgt.Request(context.Background(), map[string]any{"v": tc.v}, nil)
				if err == nil {
					t.Fatalf("Request sent %s; want the path segment rule to refuse %q", req.URL, tc.v)
				}
				for _, want := range []string{"reference ${input.v}", "a path reference must stay in its segment"} {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q does not say %q", err, want)
					}
				}
			})
		}
		for _, tc := range allowed {
			t.Run(p.name+"/allowed/"+tc.name, func(t *testing.T) {
				req, err := tgt.Request(context.Background(), map[string]any{"v": tc.v}, nil)
				if err != nil {
					t.Fatalf("Request: %v", err)
				}
				if !strings.Contains(req.URL.EscapedPath(), tc.want) {
					t.Errorf("escaped path %q does not hold %q", req.URL.EscapedPath(), tc.want)
				}
				if strings.Count(req.URL.EscapedPath(), "/") != segments {
					t.Errorf("escaped path %q: the value added or removed a segment", req.URL.EscapedPath())
				}
			})
		}
	}
}

// TestCompileEnvInPath checks that an env value that breaks the path
// segment rule is a config error at load, naming the reference and not the
// value, which may be secret; in a query it is fine.
func TestCompileEnvInPath(t *testing.T) {
	for _, spec := range []dispatch.Spec{
		{Type: "app", Component: "api", Method: "GET", Path: "/r/${env.REGION}/x"},
		{Type: "url", Component: "api", Method: "GET", URL: "https://api.example.com/r/${env.REGION}?q=1"},
	} {
		_, err := dispatch.Compile(spec, dispatch.Env{Components: testComponents(t)})
		if err == nil || !strings.Contains(err.Error(), "reference ${env.REGION}") || !strings.Contains(err.Error(), "must stay in its segment") {
			t.Errorf("Compile(%s %s%s) = %v; want REGION (eu/west) refused in a path segment", spec.Type, spec.Path, spec.URL, err)
		}
		if err != nil && (strings.Contains(err.Error(), "eu") || strings.Contains(err.Error(), "west")) {
			t.Errorf("error %q shows the env value", err)
		}
	}
	mustCompile(t, dispatch.Spec{Type: "url", Component: "api", Method: "GET", URL: "https://api.example.com/r?region=${env.REGION}"})
	mustCompile(t, dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/r/${env.TOKEN}/${input}"})
}

// TestCompileDotSegments checks that an author's literal path is held to
// the same dot rule at load as resolved paths are per call.
func TestCompileDotSegments(t *testing.T) {
	for _, path := range []string{"/a/../b", "/a/./b", "/a/%2e%2E/b", "/a/...", "/a/..;x/b", "/a/%252e/b"} {
		for _, spec := range []dispatch.Spec{
			{Type: "app", Component: "api", Method: "GET", Path: path},
			{Type: "url", Method: "GET", URL: "https://api.example.com" + path},
		} {
			if _, err := dispatch.Compile(spec, dispatch.Env{Components: testComponents(t)}); err == nil || !strings.Contains(err.Error(), "dot segments") {
				t.Errorf("Compile(%s %s%s) = %v; want a dot segment error", spec.Type, spec.Path, spec.URL, err)
			}
		}
	}
	for _, path := range []string{"/a//b", "/items/", "/.well-known/x", "/a/..b"} {
		if _, err := dispatch.Compile(dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: path}, dispatch.Env{Components: testComponents(t)}); err != nil {
			t.Errorf("Compile(%s): %v", path, err)
		}
	}
}
