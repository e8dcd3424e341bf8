package caddymodule

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/caddyserver/caddy/v2/caddytest"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/apitest"
)

// seen is one request an OpenAPI test upstream got.
type seen struct {
	method, path, query, cookie, trace, ctype, auth, body string
}

// TestOpenAPI imports a 3.1 document with a parameter of every location
// onto a component: every call reaches the right method, path, query,
// headers, cookies and body; a bad input sends nothing; answers keep
// their structure, and a problem is an error result.
func TestOpenAPI(t *testing.T) {
	t.Setenv("TOOLGATE_TEST_PETS_KEY", "pk-1")
	var mu sync.Mutex
	var got []seen
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, seen{r.Method, r.URL.EscapedPath(), r.URL.RawQuery, r.Header.Get("Cookie"), r.Header.Get("X-Trace") + r.Header.Get("X-Api-Key"),
			r.Header.Get("Content-Type"), r.Header.Get("Authorization"), string(b)})
		mu.Unlock()
		switch {
		case strings.HasSuffix(r.URL.Path, "/missing"):
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(404)
			fmt.Fprint(w, `{"title":"Not Found","detail":"no item missing","status":404}`)
		case r.URL.Path == "/search":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `["a","b"]`)
		default:
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"id":"a1"}`)
		}
	}))
	t.Cleanup(up.Close)
	last := func() seen {
		mu.Lock()
		defer mu.Unlock()
		if len(got) == 0 {
			return seen{}
		}
		return got[len(got)-1]
	}
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(got)
	}
	doc, _ := filepath.Abs("../internal/openapi/testdata/v31/api.yaml")
	petstore, _ := filepath.Abs("../internal/openapi/testdata/petstore.yaml")
	dir := dataDir(t)
	tc := caddytest.NewTester(t)
	initServer(tc, testGlobals(dir)+fmt.Sprintf(`http://127.0.0.1:9080 {
	bind 127.0.0.1
	handle_path /toolgate/* {
		toolgate {
			ledger bolt %[1]s/ledger.db
			component api %[2]s
			openapi %[3]s {
				component api
				prefix it_
			}
			openapi %[4]s {
				server %[2]s/v1
				header X-Api-Key {env.TOOLGATE_TEST_PETS_KEY}
				prefix pet_
			}
		}
	}
}`, dir, up.URL, doc, petstore))

	tools := listedTools(t, tc)
	for _, name := range []string{"it_put_item", "it_search", "it_form"} {
		if _, ok := tools[name]; !ok {
			t.Errorf("%s not listed: %v", name, tools)
		}
	}
	if _, ok := tools["it_old"]; ok {
		t.Error("a deprecated operation was imported")
	}

	a := upstreamCall(t, tc, "it_put_item", `{"path":{"id":"a b"},"query":{"id":3,"tags":["red","blue"],"filter":{"min":1,"max":9}},"header":{"X-Trace":"t-1"},"cookie":{"session":"s1"},"body":{"name":"n","tree":{"name":"root"}}}`, "", false)
	s := last()
	want := seen{"PUT", "/items/a%20b", "id=3&tags=red,blue&filter%5Bmax%5D=9&filter%5Bmin%5D=1", "session=s1", "t-1", "application/json", s.auth, `{"name":"n","tree":{"name":"root"}}`}
	if s != want || !strings.HasPrefix(s.auth, "Bearer ") {
		t.Errorf("sent\n%+v\nwant\n%+v", s, want)
	}
	if a.IsError || a.Content != `{"id":"a1"}` {
		t.Errorf("answer %+v", a)
	}

	// A bad input is refused before anything is sent.
	before := count()
	for _, bad := range []string{
		`{"path":{"id":"123456789"},"cookie":{"session":"s"},"body":{"name":"n"}}`,
		`{"path":{"id":"a"},"query":{"tags":["pink"]},"cookie":{"session":"s"},"body":{"name":"n"}}`,
		`{"path":{"id":"a"},"body":{"name":"n"}}`,
	} {
		if a := upstreamCall(t, tc, "it_put_item", bad, "", false); !a.IsError {
			t.Errorf("%s: %+v", bad, a)
		}
	}
	if n := count() - before; n != 0 {
		t.Errorf("%d bad inputs were sent", n)
	}

	// A problem answer is an error result of its title and detail.
	if a := upstreamCall(t, tc, "it_put_item", `{"path":{"id":"missing"},"cookie":{"session":"s"},"body":{"name":"n"}}`, "", false); !a.IsError || !strings.Contains(a.Content, "Not Found: no item missing") {
		t.Errorf("problem: %+v", a)
	}

	// MCP clients see the output schemas and the structured content.
	cs := apitest.MCPClient{Endpoint: base + "/mcp"}.Session(t)
	listed := apitest.ListTools(t, cs)
	if listed["it_search"] == nil || !strings.Contains(apitest.Dump(listed["it_search"].OutputSchema), `"result"`) {
		t.Fatalf("it_search over MCP: %s", apitest.Dump(listed["it_search"]))
	}
	res := apitest.CallTool(t, cs, &sdk.CallToolParams{Name: "it_search", Arguments: map[string]any{"q": "x y", "colors": []any{"r", "g"}}, Meta: apitest.U1()})
	if res.IsError || !strings.Contains(apitest.Dump(res.StructuredContent), `"result":["a","b"]`) {
		t.Errorf("it_search over MCP: %s", apitest.Dump(res))
	}
	if s := last(); s.method != "GET" || s.path != "/search" || s.query != "q=x%20y&colors=r%7Cg" {
		t.Errorf("search sent %+v", s)
	}

	// The Petstore (3.0) on a server: url targets, its header line, no
	// identity token.
	for _, c := range []struct {
		tool, input string
		want        seen
	}{
		{"pet_listPets", `{"limit":5}`, seen{"GET", "/v1/pets", "limit=5", "", "pk-1", "", "", ""}},
		{"pet_createPets", `{"body":{"id":1,"name":"rex","tag":null}}`, seen{"POST", "/v1/pets", "", "", "pk-1", "application/json", "", `{"id":1,"name":"rex","tag":null}`}},
		{"pet_showPetById", `{"petId":"p/1"}`, seen{"GET", "/v1/pets/p%2F1", "", "", "pk-1", "", "", ""}},
	} {
		if a := upstreamCall(t, tc, c.tool, c.input, "", false); a.IsError {
			t.Errorf("%s: %+v", c.tool, a)
		}
		if s := last(); s != c.want {
			t.Errorf("%s sent\n%+v\nwant\n%+v", c.tool, s, c.want)
		}
	}
	if a := upstreamCall(t, tc, "pet_listPets", `{"limit":500}`, "", false); !a.IsError {
		t.Errorf("limit 500: %+v", a)
	}

	// A form body.
	upstreamCall(t, tc, "it_form", `{"body":{"a":"x&y"}}`, "", false)
	if s := last(); s.method != "POST" || s.ctype != "application/x-www-form-urlencoded" || s.body != "a=x%26y" {
		t.Errorf("form sent %+v", s)
	}
}

// TestOpenAPILoadErrors: a document that cannot serve is a config error
// naming it.
func TestOpenAPILoadErrors(t *testing.T) {
	doc, _ := filepath.Abs("../internal/openapi/testdata/petstore.yaml")
	cfg := func(inner string) string { return loadErrorConfig(t, inner) }
	for _, c := range []struct{ name, inner, want string }{
		{"missing", "openapi /nonexistent/api.yaml {\ncomponent api\n}", `openapi /nonexistent/api.yaml`},
		{"neither", "openapi " + doc, `give a component (app targets) or a server (url targets)`},
		{"http elsewhere", "openapi " + doc + " {\nserver http://api.example.com\n}", `must be an https URL`},
		{"undeclared component", "openapi " + doc + " {\ncomponent nope\n}", `component "nope" is not declared`},
		{"unknown operation", "openapi " + doc + " {\ncomponent api\noperations nope\n}", `operation "nope" is not in the document`},
		{"clash", "openapi " + doc + " {\ncomponent api\n}\ntool listPets {\ndescription d\ninput_schema `{\"type\":\"object\"}`\ntarget app api GET /\n}", `tool "listPets": duplicate name, already declared in openapi ` + doc},
	} {
		t.Run(c.name, func(t *testing.T) {
			caddytest.AssertLoadError(t, cfg(c.inner), "caddyfile", strings.ReplaceAll(c.want, `"`, `\"`))
		})
	}
}
