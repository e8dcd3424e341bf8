package openapi

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

func load(t testing.TB, path string) []Operation {
	t.Helper()
	doc, err := Load(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	ops, _, err := Operations(doc, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return ops
}

func byTool(ops []Operation, name string) *Operation {
	for i := range ops {
		if ops[i].Tool == name {
			return &ops[i]
		}
	}
	return nil
}

// compile compiles a schema as the gateway does, and validates inputs.
func compile(t *testing.T, raw jsontext.Value) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	if err := c.AddResource("x.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("x.json")
	if err != nil {
		t.Fatalf("%v\n%s", err, raw)
	}
	return s
}

func valid(t *testing.T, s *jsonschema.Schema, input string) bool {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(input))
	if err != nil {
		t.Fatal(err)
	}
	return s.Validate(v) == nil
}

// TestPetstore: the OpenAPI 3.0 Petstore's three operations, their
// schemas written as JSON Schema 2020-12 with the components in $defs.
func TestPetstore(t *testing.T) {
	ops := load(t, "testdata/petstore.yaml")
	var names []string
	for _, o := range ops {
		names = append(names, o.Method+" "+o.Tool)
	}
	if !slices.Equal(names, []string{"GET listPets", "POST createPets", "GET showPetById"}) {
		t.Fatalf("tools = %v", names)
	}
	list := byTool(ops, "listPets")
	if !list.ReadOnly || !list.Idempotent || list.Summary != "List all pets" || len(list.Inputs) != 1 || list.Inputs[0].In != "query" || list.Inputs[0].Required {
		t.Errorf("listPets = %+v", list)
	}
	ls := compile(t, list.InputSchema)
	for in, want := range map[string]bool{`{}`: true, `{"limit":5}`: true, `{"limit":101}`: false, `{"limit":"5"}`: false, `{"other":1}`: false} {
		if valid(t, ls, in) != want {
			t.Errorf("listPets %s valid = %v", in, !want)
		}
	}
	// The answer is an array: the output is an object holding it.
	if !strings.Contains(string(list.OutputSchema), `"result"`) || !strings.Contains(string(list.OutputSchema), `"$defs"`) {
		t.Errorf("listPets output = %s", list.OutputSchema)
	}
	compile(t, list.OutputSchema)

	create := byTool(ops, "createPets")
	if create.ReadOnly || create.Idempotent || create.Body == nil || !create.Body.Required || create.Body.MediaType != "application/json" {
		t.Errorf("createPets = %+v", create)
	}
	cs := compile(t, create.InputSchema)
	for in, want := range map[string]bool{
		`{"body":{"id":1,"name":"rex"}}`:            true,
		`{"body":{"id":1,"name":"rex","tag":null}}`: true, // nullable
		`{"body":{"id":1}}`:                         false,
		`{}`:                                        false, // the body is required
		`{"body":{"id":"1","name":"rex"}}`:          false,
	} {
		if valid(t, cs, in) != want {
			t.Errorf("createPets %s valid = %v", in, !want)
		}
	}
	show := byTool(ops, "showPetById")
	if len(show.Inputs) != 1 || show.Inputs[0].In != "path" || !show.Inputs[0].Required || show.Inputs[0].Property != "petId" || show.Inputs[0].Group != "" {
		t.Errorf("showPetById inputs = %+v", show.Inputs)
	}
	if !strings.Contains(string(show.OutputSchema), `"$ref":"#/$defs/Pet"`) {
		t.Errorf("showPetById output = %s", show.OutputSchema)
	}
}

// TestEveryParameter: a 3.1 document with a parameter of every location
// and clashing names (grouped), a shared $ref file, a recursive schema,
// a body beside path parameters, and the operations that make no tool.
func TestEveryParameter(t *testing.T) {
	doc, err := Load(context.Background(), "testdata/v31/api.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ops, skipped, err := Operations(doc, Options{Prefix: "x_"})
	if err != nil {
		t.Fatal(err)
	}
	put := byTool(ops, "x_put_item")
	if put == nil {
		t.Fatalf("no x_put_item in %v", ops)
	}
	// id is in the path and in the query: every location is a group.
	var where []string
	for _, in := range put.Inputs {
		where = append(where, fmt.Sprintf("%s.%s", in.Group, in.Property))
	}
	slices.Sort(where)
	if !slices.Equal(where, []string{"cookie.session", "header.X-Trace", "path.id", "query.filter", "query.id", "query.tags"}) {
		t.Errorf("inputs = %v (Accept is the specification's to ignore)", where)
	}
	s := compile(t, put.InputSchema)
	good := `{"path":{"id":"a1"},"query":{"id":3,"tags":["red"],"filter":{"min":1}},"header":{"X-Trace":"t"},"cookie":{"session":"s"},"body":{"name":null,"tree":{"name":"n","children":[{"name":"c"}]}}}`
	if !valid(t, s, good) {
		t.Errorf("a good input is refused: %s", put.InputSchema)
	}
	for _, bad := range []string{
		`{"path":{"id":"123456789"},"cookie":{"session":"s"},"body":{"name":"n"}}`,
		`{"path":{"id":"a"},"query":{"tags":["pink"]},"cookie":{"session":"s"},"body":{"name":"n"}}`,
		`{"path":{"id":"a"},"body":{"name":"n"}}`,
		`{"path":{"id":"a"},"cookie":{"session":"s"},"body":{"tree":{"children":[{"name":1}]}}}`,
	} {
		if valid(t, s, bad) {
			t.Errorf("a bad input passes: %s", bad)
		}
	}
	if put.Body == nil || !put.Body.Required || put.ReadOnly || !put.Idempotent {
		t.Errorf("put = %+v", put)
	}
	search := byTool(ops, "x_search")
	if search == nil || !search.ReadOnly || search.Destructive == nil || *search.Destructive || search.Inputs[0].Group != "" {
		t.Errorf("search = %+v", search)
	}
	if form := byTool(ops, "x_form"); form == nil || form.Body.MediaType != "application/x-www-form-urlencoded" {
		t.Errorf("form = %+v", form)
	}
	var why []string
	for _, s := range skipped {
		why = append(why, s.Method+" "+s.Path+": "+s.Why)
	}
	slices.Sort(why)
	want := []string{
		"GET /anonymous: no operationId",
		"GET /old: deprecated (list it in operations to take it)",
		"POST /upload: the request body is multipart/form-data, not JSON or a form",
	}
	if !slices.Equal(why, want) {
		t.Errorf("skipped:\n%s\nwant\n%s", strings.Join(why, "\n"), strings.Join(want, "\n"))
	}

	// Listed, a deprecated operation is taken; a name not in the
	// document is an error.
	ops, _, err = Operations(doc, Options{Operations: []string{"old", "search"}})
	if err != nil || len(ops) != 2 {
		t.Errorf("listed: %v %v", ops, err)
	}
	if _, _, err := Operations(doc, Options{Operations: []string{"nope"}}); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("an unknown operation: %v", err)
	}
}

// TestToolNameClash: two operationIds that make the same tool name are an
// error naming both operations.
func TestToolNameClash(t *testing.T) {
	dir := t.TempDir()
	doc := `openapi: "3.0.0"
info: {title: t, version: "1"}
paths:
  /a:
    get: {operationId: "a.b", responses: {"200": {description: ok}}}
  /b:
    get: {operationId: "a/b", responses: {"200": {description: ok}}}
`
	path := filepath.Join(dir, "api.yaml")
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	d, err := Load(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := Operations(d, Options{}); err == nil || !strings.Contains(err.Error(), "GET /a and GET /b") {
		t.Errorf("clash: %v", err)
	}
	if got := ToolName("p_", strings.Repeat("x", 80)); len(got) != 64 {
		t.Errorf("a long name: %d characters", len(got))
	}
}

// TestLoadStaysInFolder: a document's $ref may not reach a file outside
// its folder, nor a URL.
func TestLoadStaysInFolder(t *testing.T) {
	dir := t.TempDir()
	outside := filepath.Join(t.TempDir(), "secret.yaml")
	if err := os.WriteFile(outside, []byte("components: {schemas: {S: {type: string}}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, ref := range map[string]string{
		"absolute": outside + "#/components/schemas/S",
		"climbing": "../" + filepath.Base(filepath.Dir(outside)) + "/secret.yaml#/components/schemas/S",
		"url":      "http://127.0.0.1:1/x.yaml#/components/schemas/S",
	} {
		doc := `openapi: "3.0.0"
info: {title: t, version: "1"}
paths:
  /a:
    get:
      operationId: a
      parameters: [{name: q, in: query, schema: {$ref: "` + ref + `"}}]
      responses: {"200": {description: ok}}
`
		path := filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(context.Background(), path); err == nil {
			t.Errorf("%s: a $ref to %s loaded", name, ref)
		}
	}
}

func TestOutputIsJSON(t *testing.T) {
	for _, o := range load(t, "testdata/v31/api.yaml") {
		if o.OutputSchema != nil && !o.OutputSchema.IsValid() {
			t.Errorf("%s: %s", o.Tool, o.OutputSchema)
		}
	}
}

// TestLoopbackOnly: plain http only to this machine's loopback, never to a
// name that merely starts like an address of it.
func TestLoopbackOnly(t *testing.T) {
	for _, server := range []string{"http://127.evil.example", "http://127.0.0.1.evil.example/v1", "http://localhost.evil.example"} {
		if err := (Target{Server: server}).Check(); err == nil {
			t.Errorf("server %s accepted", server)
		}
		if _, err := Load(context.Background(), server+"/api.yaml"); err == nil || !strings.Contains(err.Error(), "https") {
			t.Errorf("document at %s: %v", server, err)
		}
	}
	for _, server := range []string{"http://127.0.0.1:9", "http://localhost:9/v1", "http://[::1]:9", "https://api.example/v1"} {
		if err := (Target{Server: server}).Check(); err != nil {
			t.Errorf("server %s: %v", server, err)
		}
	}
}

// TestURLDocumentRefersToNothing: a document read from a URL may not make
// the gateway read another, on its host or elsewhere, or a local file.
func TestURLDocumentRefersToNothing(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret.yaml")
	if err := os.WriteFile(secret, []byte("components: {schemas: {S: {type: string}}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var served atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		ref := r.URL.Query().Get("ref")
		fmt.Fprintf(w, `openapi: "3.0.0"
info: {title: t, version: "1"}
paths:
  /a:
    get:
      operationId: a
      parameters: [{name: q, in: query, schema: {$ref: %q}}]
      responses: {"200": {description: ok}}
`, ref)
	}))
	defer srv.Close()
	for _, ref := range []string{"common.yaml#/components/schemas/S", secret + "#/components/schemas/S", srv.URL + "/other.yaml#/components/schemas/S"} {
		served.Store(0)
		if _, err := Load(context.Background(), srv.URL+"/api.yaml?ref="+url.QueryEscape(ref)); err == nil {
			t.Errorf("a $ref to %s loaded", ref)
		}
		if n := served.Load(); n != 1 {
			t.Errorf("$ref %s: the server was asked %d times, want once (the document alone)", ref, n)
		}
	}
}

// TestConnectionTarget: a server's operations send the user's token of
// the connection as Authorization, compiled as a reference; a header
// line's ${ stays literal; a component or a static Authorization beside
// a connection is refused.
func TestConnectionTarget(t *testing.T) {
	ops := load(t, "testdata/v31/api.yaml")
	to := Target{Server: "https://api.example/v1", Connection: "gmail", Headers: map[string]string{"X-Note": "${input.x}"}}
	if err := to.Check(); err != nil {
		t.Fatal(err)
	}
	spec := ops[0].ManifestTool(to).Target
	if spec.Headers["Authorization"] != "Bearer ${connection.gmail}" || spec.Headers["X-Note"] != "$${input.x}" {
		t.Fatalf("headers %v", spec.Headers)
	}
	for _, bad := range []Target{
		{Component: "api", Connection: "gmail"},
		{Server: "https://api.example", Connection: "gmail", Headers: map[string]string{"authorization": "Bearer k"}},
	} {
		if err := bad.Check(); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}
