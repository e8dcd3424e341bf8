package manifest_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/toolgate/toolgate/internal/dispatch"
	"github.com/toolgate/toolgate/internal/manifest"
)

func testComponents(t *testing.T) map[string]*dispatch.Component {
	t.Helper()
	c, err := dispatch.NewComponent("notes", "http://notes.internal:3000", map[string]string{"API_KEY": "k"})
	if err != nil {
		t.Fatal(err)
	}
	return map[string]*dispatch.Component{"notes": c}
}

const closedSchema = `{"type":"object","properties":{"q":{"type":"string"},"limit":{"type":"integer"}},"required":["q"],"additionalProperties":false}`

// validTool returns a tool that compiles; cases change one thing in it.
func validTool(name string) manifest.Tool {
	return manifest.Tool{
		Name:        name,
		Description: "Search the user's notes.",
		InputSchema: jsontext.Value(closedSchema),
		Target: dispatch.Spec{
			Type: "app", Component: "notes", Method: "GET", Path: "/notes/search",
			Query: map[string]string{"q": "${input.q}"},
		},
	}
}

func TestParse(t *testing.T) {
	tests := []struct {
		name      string
		doc       string
		wantErr   string
		wantTools int
	}{
		{name: "empty tools", doc: `{"tools":[]}`},
		{name: "trailing whitespace", doc: "{\"tools\":[]}\n\t \n"},
		{name: "one tool", doc: `{"tools":[{"name":"a","description":"d","input_schema":{"type":"object"},"target":{"type":"kazzle","name":"a"}}]}`, wantTools: 1},
		{name: "annotations", doc: `{"tools":[{"name":"a","description":"d","input_schema":{"type":"object"},"target":{"type":"kazzle","name":"a"},"annotations":{"readOnlyHint":true,"destructiveHint":false,"idempotentHint":true,"openWorldHint":false}}]}`, wantTools: 1},
		{name: "ui", doc: `{"tools":[{"name":"a","description":"d","input_schema":{"type":"object"},"target":{"type":"kazzle","name":"a"},"ui":false}]}`, wantTools: 1},
		{name: "ui not a boolean", doc: `{"tools":[{"name":"a","ui":"off"}]}`, wantErr: "invalid JSON"},
		{name: "unknown top-level field", doc: `{"tools":[],"version":2}`, wantErr: "unknown field"},
		{name: "unknown tool field", doc: `{"tools":[{"name":"a","descripton":"d"}]}`, wantErr: "unknown field"},
		{name: "unknown target field", doc: `{"tools":[{"name":"a","target":{"type":"url","metod":"GET"}}]}`, wantErr: "unknown field"},
		{name: "unknown annotation", doc: `{"tools":[{"name":"a","annotations":{"readOnly":true}}]}`, wantErr: "unknown field"},
		{name: "snake case schema only", doc: `{"tools":[{"name":"a","inputSchema":{"type":"object"}}]}`, wantErr: `tool "a" (tools[0]): unknown field "inputSchema": a manifest spells it "input_schema"`},
		{name: "MCP's spelling in the second tool", doc: `{"tools":[{"name":"a"},{"name":"b","title":"B"}]}`, wantErr: `tool "b" (tools[1]): unknown field "title": a manifest spells it "displayName"`},
		{name: "unknown member named with the tool", doc: `{"tools":[{"name":"a","descripton":"d"}]}`, wantErr: `tool "a" (tools[0]): unknown field "descripton" (known: name, displayName, description,`},
		{name: "unknown target member named with the tool", doc: `{"tools":[{"name":"a","target":{"type":"url","metod":"GET"}}]}`, wantErr: `tool "a" (tools[0]): target: unknown field "metod"`},
		{name: "trailing document", doc: `{"tools":[]} {"tools":[]}`, wantErr: "trailing data"},
		{name: "trailing garbage", doc: `{"tools":[]} x`, wantErr: "trailing data"},
		{name: "trailing brace", doc: `{"tools":[]}}`, wantErr: "trailing data"},
		{name: "trailing bracket", doc: `{"tools":[]}]`, wantErr: "trailing data"},
		{name: "trailing string", doc: `{"tools":[]} "x"`, wantErr: "trailing data"},
		{name: "missing tools", doc: `{}`, wantErr: `no "tools"`},
		{name: "null tools", doc: `{"tools":null}`, wantErr: `no "tools"`},
		{name: "tools not an array", doc: `{"tools":{}}`, wantErr: "invalid JSON"},
		{name: "top level array", doc: `[]`, wantErr: "invalid JSON"},
		{name: "empty", doc: ``, wantErr: "invalid JSON"},
		{name: "truncated", doc: `{"tools":[`, wantErr: "invalid JSON"},
		{name: "wrong field type", doc: `{"tools":[{"name":1}]}`, wantErr: "invalid JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := manifest.Parse([]byte(tt.doc))
			if tt.wantErr != "" {
				if err == nil {
					t.Fatalf("Parse(%s) succeeded, want an error containing %q", tt.doc, tt.wantErr)
				}
				if !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Parse error %q, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if f.Tools == nil || len(f.Tools) != tt.wantTools {
				t.Fatalf("Tools = %v, want %d tools", f.Tools, tt.wantTools)
			}
		})
	}
}

func TestReadFile(t *testing.T) {
	tests := []struct {
		name      string
		path      string
		wantErr   []string
		wantTools []string
	}{
		{name: "valid", path: "testdata/valid.json", wantTools: []string{"get_weather", "create_note", "pick_color"}},
		{name: "unknown field", path: "testdata/unknown_field.json", wantErr: []string{"testdata/unknown_field.json", "unknown field", "metod"}},
		{name: "trailing data", path: "testdata/trailing.json", wantErr: []string{"testdata/trailing.json", "trailing data"}},
		{name: "no tools", path: "testdata/no_tools.json", wantErr: []string{"testdata/no_tools.json", `no "tools"`}},
		{name: "missing file", path: "testdata/does_not_exist.json", wantErr: []string{"testdata/does_not_exist.json"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src, err := manifest.ReadFile(tt.path)
			if tt.wantErr != nil {
				if err == nil {
					t.Fatalf("ReadFile(%s) succeeded, want an error", tt.path)
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("ReadFile error %q, want it to contain %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("ReadFile: %v", err)
			}
			if !strings.Contains(src.Name, tt.path) {
				t.Errorf("Source.Name = %q, want it to name %s", src.Name, tt.path)
			}
			var names []string
			for _, tl := range src.Tools {
				names = append(names, tl.Name)
			}
			if strings.Join(names, ",") != strings.Join(tt.wantTools, ",") {
				t.Errorf("tools = %v, want %v", names, tt.wantTools)
			}
		})
	}
	if _, err := os.Stat("testdata/does_not_exist.json"); err == nil {
		t.Fatal("testdata/does_not_exist.json exists; the missing file case tests nothing")
	}
}

func TestReadFileCompile(t *testing.T) {
	tests := []struct {
		name    string
		paths   []string
		inline  []manifest.Tool
		wantErr []string
	}{
		{name: "valid", paths: []string{"testdata/valid.json"}},
		{name: "duplicate across files", paths: []string{"testdata/valid.json", "testdata/dup.json"}, wantErr: []string{"testdata/valid.json", "testdata/dup.json", `"get_weather"`, "duplicate"}},
		{name: "broken target", paths: []string{"testdata/bad_target.json"}, wantErr: []string{"testdata/bad_target.json", `"steal_token"`, "authorization", "belongs to the gateway"}},
		{name: "inline beside a file", paths: []string{"testdata/valid.json"}, inline: []manifest.Tool{{Name: "inline_one", Description: "x",
			InputSchema: []byte(`{"type":"object"}`), Target: dispatch.Spec{Type: "url", Method: "GET", URL: "https://example.com/x"}}}},
		{name: "inline duplicates a file's tool", paths: []string{"testdata/valid.json"}, inline: []manifest.Tool{{Name: "get_weather", Description: "x",
			InputSchema: []byte(`{"type":"object"}`), Target: dispatch.Spec{Type: "url", Method: "GET", URL: "https://example.com/x"}}},
			wantErr: []string{"inline tools", `"get_weather"`, "duplicate", "testdata/valid.json"}},
		{name: "missing file", paths: []string{"testdata/nope.json"}, wantErr: []string{"testdata/nope.json"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set, err := manifest.Load(tt.paths, tt.inline, testComponents(t))
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("Compile: %v", err)
				}
				if len(set.List()) == 0 {
					t.Fatal("Compile gave no tools")
				}
				return
			}
			if err == nil {
				t.Fatalf("Compile succeeded, want an error")
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Compile error %q, want it to contain %q", err, w)
				}
			}
		})
	}
}

func TestCompileErrors(t *testing.T) {
	// A server that must never be asked for a schema.
	var fetched atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetched.Add(1)
		w.Header().Set("Content-Type", "application/schema+json")
		_, _ = w.Write([]byte(`{"type":"string"}`))
	}))
	defer srv.Close()
	dir := t.TempDir()
	schemaFile := filepath.Join(dir, "ext.json")
	if err := os.WriteFile(schemaFile, []byte(`{"type":"string"}`), 0o600); err != nil {
		t.Fatal(err)
	}

	schema := func(s string) func(*manifest.Tool) {
		return func(tl *manifest.Tool) { tl.InputSchema = jsontext.Value(s) }
	}
	target := func(s dispatch.Spec) func(*manifest.Tool) {
		return func(tl *manifest.Tool) { tl.Target = s }
	}
	const src = "manifest tools/notes.json"
	tests := []struct {
		name      string
		toolName  string // "" keeps the valid name
		change    func(*manifest.Tool)
		wantLabel string // how the error names the tool
		wantErr   string
	}{
		{name: "empty name", toolName: "-", change: func(tl *manifest.Tool) { tl.Name = "" }, wantLabel: "tools[1]", wantErr: "name"},
		{name: "65 chars", toolName: strings.Repeat("a", 65), wantErr: "must match"},
		{name: "spaces", toolName: "search notes", wantErr: "must match"},
		{name: "leading space", toolName: " search", wantErr: "must match"},
		{name: "unicode", toolName: "notları_ara", wantErr: "must match"},
		{name: "dot", toolName: "notes.search", wantErr: "must match"},
		{name: "slash", toolName: "notes/search", wantErr: "must match"},
		{name: "newline", toolName: "search\n", wantErr: "must match"},
		{name: "missing description", change: func(tl *manifest.Tool) { tl.Description = "" }, wantErr: "description is required"},
		{name: "blank description", change: func(tl *manifest.Tool) { tl.Description = " \n\t" }, wantErr: "description is required"},
		{name: "missing input_schema", change: func(tl *manifest.Tool) { tl.InputSchema = nil }, wantErr: "input_schema is required"},
		{name: "input_schema not JSON", change: schema(`{"type":`), wantErr: "input_schema"},
		{name: "input_schema null", change: schema(`null`), wantErr: `"type": "object"`},
		{name: "input_schema array", change: schema(`[]`), wantErr: `"type": "object"`},
		{name: "input_schema true", change: schema(`true`), wantErr: `"type": "object"`},
		{name: "no type", change: schema(`{"properties":{"q":{"type":"string"}}}`), wantErr: `"type": "object"`},
		{name: "type string", change: schema(`{"type":"string"}`), wantErr: `"type": "object"`},
		{name: "type array of object", change: schema(`{"type":["object"]}`), wantErr: `"type": "object"`},
		{name: "type object or null", change: schema(`{"type":["object","null"]}`), wantErr: `"type": "object"`},
		{name: "unknown type", change: schema(`{"type":"object","properties":{"a":{"type":"nope"}}}`), wantErr: "does not compile"},
		{name: "required not an array", change: schema(`{"type":"object","required":"a"}`), wantErr: "does not compile"},
		{name: "properties not an object", change: schema(`{"type":"object","properties":[]}`), wantErr: "does not compile"},
		{name: "bad pattern", change: schema(`{"type":"object","properties":{"a":{"type":"string","pattern":"("}}}`), wantErr: "does not compile"},
		{name: "dangling local ref", change: schema(`{"type":"object","properties":{"a":{"$ref":"#/$defs/nope"}}}`), wantErr: "does not compile"},
		{name: "ref to http URL", change: schema(`{"type":"object","properties":{"a":{"$ref":"` + srv.URL + `/ext.json"}}}`), wantErr: "does not compile"},
		{name: "ref to https URL", change: schema(`{"type":"object","properties":{"a":{"$ref":"https://json.schemastore.org/package.json"}}}`), wantErr: "does not compile"},
		{name: "ref to file URL", change: schema(`{"type":"object","properties":{"a":{"$ref":"file://` + filepath.ToSlash(schemaFile) + `"}}}`), wantErr: "does not compile"},
		{name: "ref to relative file", change: schema(`{"type":"object","properties":{"a":{"$ref":"ext.json"}}}`), wantErr: "does not compile"},
		{name: "ref to absolute path", change: schema(`{"type":"object","properties":{"a":{"$ref":"` + filepath.ToSlash(schemaFile) + `"}}}`), wantErr: "does not compile"},
		{name: "ref relative to an http id", change: schema(`{"$id":"` + srv.URL + `/root.json","type":"object","properties":{"a":{"$ref":"ext.json"}}}`), wantErr: "does not compile"},
		{name: "remote metaschema", change: schema(`{"$schema":"` + srv.URL + `/meta.json","type":"object"}`), wantErr: "input_schema"},
		{name: "bad method", change: target(dispatch.Spec{Type: "app", Component: "notes", Method: "FETCH", Path: "/x"}), wantErr: "method"},
		{name: "Authorization header", change: target(dispatch.Spec{Type: "app", Component: "notes", Method: "GET", Path: "/x", Headers: map[string]string{"Authorization": "Bearer x"}}), wantErr: "belongs to the gateway"},
		{name: "undeclared component", change: target(dispatch.Spec{Type: "app", Component: "billing", Method: "GET", Path: "/x"}), wantErr: `"billing"`},
		{name: "undeclared env", change: target(dispatch.Spec{Type: "app", Component: "notes", Method: "GET", Path: "/x", Headers: map[string]string{"X-Key": "${env.SECRET}"}}), wantErr: "SECRET"},
		{name: "host from input", change: target(dispatch.Spec{Type: "url", Method: "GET", URL: "https://${input.q}/x"}), wantErr: "target"},
		{name: "no target", change: target(dispatch.Spec{}), wantErr: "target"},
		{name: "undeclared property in path", change: target(dispatch.Spec{Type: "app", Component: "notes", Method: "GET", Path: "/notes/${input.id}"}), wantErr: "${input.id} can never resolve"},
		{name: "undeclared property in query", change: target(dispatch.Spec{Type: "app", Component: "notes", Method: "GET", Path: "/notes", Query: map[string]string{"p": "${input.page}"}}), wantErr: "${input.page}"},
		{name: "undeclared property in header", change: target(dispatch.Spec{Type: "url", Method: "GET", URL: "https://api.example.com/", Headers: map[string]string{"X-Lang": "${input.lang}"}}), wantErr: "${input.lang}"},
		{name: "undeclared property in body", change: target(dispatch.Spec{Type: "app", Component: "notes", Method: "POST", Path: "/notes", Body: jsontext.Value(`{"q":"${input.q}","owner":{"id":"${input.owner.id}"}}`)}), wantErr: "${input.owner.id}"},
		{name: "property no pattern admits", change: func(tl *manifest.Tool) {
			tl.InputSchema = jsontext.Value(`{"type":"object","patternProperties":{"^q_[a-z]+$":{"type":"string"}},"additionalProperties":false}`)
			tl.Target.Query = map[string]string{"q": "${input.other}"}
		}, wantErr: "${input.other} can never resolve"},
		{name: "undeclared property in url", change: target(dispatch.Spec{Type: "url", Method: "GET", URL: "https://api.example.com/s?q=${input.query}"}), wantErr: "${input.query}"},
		{name: "the card answer tool's name", toolName: manifest.CardAnswerTool, wantErr: "reserved"},
		{name: "ui on a url target", change: func(tl *manifest.Tool) {
			tl.Target = dispatch.Spec{Type: "url", Method: "GET", URL: "https://api.example.com/s"}
			tl.UI = ptr(true)
		}, wantErr: `ui: only an app target`},
		{name: "ui on a client tool", change: func(tl *manifest.Tool) {
			tl.Target = dispatch.Spec{Type: "kazzle", Name: "pick"}
			tl.UI = ptr(true)
		}, wantErr: `ui: only an app target`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tl := validTool("search_notes")
			if tt.toolName != "" {
				tl.Name = tt.toolName
			}
			if tt.change != nil {
				tt.change(&tl)
			}
			label := tt.wantLabel
			if label == "" {
				label = "tool " + strconvQuote(tl.Name)
			}
			sources := []manifest.Source{
				{Name: "inline", Tools: []manifest.Tool{validTool("other_tool")}},
				{Name: src, Tools: []manifest.Tool{validTool("first_tool"), tl}},
			}
			set, err := manifest.Compile(sources, testComponents(t))
			if err == nil {
				t.Fatalf("Compile succeeded with %d tools, want an error containing %q", len(set.List()), tt.wantErr)
			}
			msg := err.Error()
			t.Logf("error: %s", msg)
			for _, w := range []string{src, label, tt.wantErr} {
				if !strings.Contains(msg, w) {
					t.Errorf("Compile error %q, want it to contain %q", msg, w)
				}
			}
			if set != nil {
				t.Errorf("Compile returned a set with its error")
			}
		})
	}
	if n := fetched.Load(); n != 0 {
		t.Errorf("compiling schemas fetched %d documents from a server; schemas must be self-contained", n)
	}
}

func strconvQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func TestCompileDuplicates(t *testing.T) {
	tests := []struct {
		name    string
		sources []manifest.Source
		wantErr []string
	}{
		{
			name: "across two sources",
			sources: []manifest.Source{
				{Name: "manifest a.json", Tools: []manifest.Tool{validTool("search_notes")}},
				{Name: "manifest b.json", Tools: []manifest.Tool{validTool("other"), validTool("search_notes")}},
			},
			wantErr: []string{"manifest a.json", "manifest b.json", `"search_notes"`, "duplicate"},
		},
		{
			name: "inline and manifest",
			sources: []manifest.Source{
				{Name: "manifest a.json", Tools: []manifest.Tool{validTool("search_notes")}},
				{Name: "Caddyfile", Tools: []manifest.Tool{validTool("search_notes")}},
			},
			wantErr: []string{"manifest a.json", "Caddyfile", `"search_notes"`, "duplicate"},
		},
		{
			name: "in one source",
			sources: []manifest.Source{
				{Name: "manifest a.json", Tools: []manifest.Tool{validTool("x"), validTool("search_notes"), validTool("search_notes")}},
			},
			wantErr: []string{"manifest a.json", `"search_notes"`, "duplicate"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := manifest.Compile(tt.sources, testComponents(t))
			if err == nil {
				t.Fatal("Compile succeeded, want a duplicate name error")
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Compile error %q, want it to contain %q", err, w)
				}
			}
		})
	}
}

func TestCompileValid(t *testing.T) {
	tests := []struct {
		name   string
		change func(*manifest.Tool)
	}{
		{name: "64 char name", change: func(tl *manifest.Tool) { tl.Name = strings.Repeat("a", 64) }},
		{name: "name with digits, dash, underscore", change: func(tl *manifest.Tool) { tl.Name = "Get-Notes_v2" }},
		{name: "one char name", change: func(tl *manifest.Tool) { tl.Name = "x" }},
		{name: "open schema allows any property", change: func(tl *manifest.Tool) {
			tl.InputSchema = jsontext.Value(`{"type":"object","properties":{"q":{"type":"string"}}}`)
			tl.Target.Path = "/notes/${input.anything}"
		}},
		{name: "additionalProperties true", change: func(tl *manifest.Tool) {
			tl.InputSchema = jsontext.Value(`{"type":"object","additionalProperties":true}`)
			tl.Target.Path = "/notes/${input.anything}"
		}},
		{name: "whole input in a closed schema", change: func(tl *manifest.Tool) {
			tl.Target = dispatch.Spec{Type: "app", Component: "notes", Method: "POST", Path: "/notes", Body: jsontext.Value(`"${input}"`)}
		}},
		{name: "nested reference to a declared property", change: func(tl *manifest.Tool) {
			tl.InputSchema = jsontext.Value(`{"type":"object","properties":{"owner":{"type":"object","properties":{"id":{"type":"string"}}}},"additionalProperties":false}`)
			tl.Target.Query = map[string]string{"owner": "${input.owner.id}"}
		}},
		{name: "patternProperties admits the reference", change: func(tl *manifest.Tool) {
			tl.InputSchema = jsontext.Value(`{"type":"object","patternProperties":{"^q_[a-z]+$":{"type":"string"}},"additionalProperties":false}`)
			tl.Target.Query = map[string]string{"q": "${input.q_main}"}
		}},
		{name: "local ref", change: func(tl *manifest.Tool) {
			tl.InputSchema = jsontext.Value(`{"type":"object","$defs":{"q":{"type":"string"}},"properties":{"q":{"$ref":"#/$defs/q"}},"additionalProperties":false}`)
		}},
		{name: "2020-12 $schema", change: func(tl *manifest.Tool) {
			tl.InputSchema = jsontext.Value(`{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","properties":{"q":{"type":"string"}},"additionalProperties":false}`)
		}},
		{name: "env declared", change: func(tl *manifest.Tool) { tl.Target.Headers = map[string]string{"X-Key": "${env.API_KEY}"} }},
		{name: "url target", change: func(tl *manifest.Tool) {
			tl.Target = dispatch.Spec{Type: "url", Method: "GET", URL: "https://api.example.com/s/${input.q}?n=${input.limit}"}
		}},
		{name: "kazzle target", change: func(tl *manifest.Tool) { tl.Target = dispatch.Spec{Type: "kazzle", Name: "pick"} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tl := validTool("search_notes")
			tt.change(&tl)
			set, err := manifest.Compile([]manifest.Source{{Name: "inline", Tools: []manifest.Tool{tl}}}, testComponents(t))
			if err != nil {
				t.Fatalf("Compile: %v", err)
			}
			c, ok := set.Lookup(tl.Name)
			if !ok {
				t.Fatalf("Lookup(%q) found nothing", tl.Name)
			}
			if c.Schema == nil || c.Target == nil {
				t.Fatalf("compiled tool lacks its schema or target: %+v", c)
			}
			if c.Source != "inline" {
				t.Errorf("Source = %q, want inline", c.Source)
			}
		})
	}
}

func TestCompiledFields(t *testing.T) {
	yes := true
	named := validTool("named")
	named.DisplayName = "Named Tool"
	named.Annotations = &manifest.Annotations{ReadOnlyHint: &yes}
	plain := validTool("plain")

	set, err := manifest.Compile([]manifest.Source{{Name: "s", Tools: []manifest.Tool{named, plain}}}, testComponents(t))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name            string
		tool            string
		wantDisplayName string
		wantReadOnly    bool
	}{
		{name: "display name kept", tool: "named", wantDisplayName: "Named Tool", wantReadOnly: true},
		{name: "display name defaults to name", tool: "plain", wantDisplayName: "plain"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, ok := set.Lookup(tt.tool)
			if !ok {
				t.Fatalf("Lookup(%q) found nothing", tt.tool)
			}
			if c.DisplayName != tt.wantDisplayName {
				t.Errorf("DisplayName = %q, want %q", c.DisplayName, tt.wantDisplayName)
			}
			gotRO := c.Annotations != nil && c.Annotations.ReadOnlyHint != nil && *c.Annotations.ReadOnlyHint
			if gotRO != tt.wantReadOnly {
				t.Errorf("readOnlyHint = %v, want %v", gotRO, tt.wantReadOnly)
			}
		})
	}
	if _, ok := set.Lookup("absent"); ok {
		t.Errorf("Lookup(absent) found a tool")
	}
	if plain.DisplayName != "" {
		t.Errorf("Compile changed the caller's Tool: DisplayName = %q", plain.DisplayName)
	}
}

func TestCompileToolDisplayName(t *testing.T) {
	c, err := manifest.CompileTool(validTool("plain"), testComponents(t))
	if err != nil {
		t.Fatal(err)
	}
	if c.DisplayName != "plain" {
		t.Errorf("DisplayName = %q, want the name", c.DisplayName)
	}
}

func TestList(t *testing.T) {
	tests := []struct {
		name    string
		sources [][]string
		want    []string
	}{
		{name: "none", sources: nil, want: nil},
		{name: "one source", sources: [][]string{{"zeta", "alpha", "mid"}}, want: []string{"alpha", "mid", "zeta"}},
		{name: "across sources", sources: [][]string{{"b_tool", "Z"}, {"a_tool", "c_tool"}, {"_x", "-y"}}, want: []string{"-y", "Z", "_x", "a_tool", "b_tool", "c_tool"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var sources []manifest.Source
			for i, names := range tt.sources {
				src := manifest.Source{Name: "s" + string(rune('0'+i))}
				for _, n := range names {
					src.Tools = append(src.Tools, validTool(n))
				}
				sources = append(sources, src)
			}
			set, err := manifest.Compile(sources, testComponents(t))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, c := range set.List() {
				got = append(got, c.Name)
			}
			if strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Errorf("List = %v, want %v", got, tt.want)
			}
		})
	}
}

const personSchema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "properties": {
    "name": {"type": "string", "minLength": 1},
    "age": {"type": "integer", "minimum": 0},
    "address": {
      "type": "object",
      "properties": {"zip": {"type": "string", "pattern": "^[0-9]{5}$"}},
      "required": ["zip"],
      "additionalProperties": false
    },
    "tags": {"type": "array", "items": {"type": "string"}}
  },
  "required": ["name"],
  "additionalProperties": false
}`

func TestValidateInput(t *testing.T) {
	tl := validTool("person")
	tl.InputSchema = jsontext.Value(personSchema)
	tl.Target = dispatch.Spec{Type: "app", Component: "notes", Method: "POST", Path: "/people", Body: jsontext.Value(`"${input}"`)}
	c, err := manifest.CompileTool(tl, testComponents(t))
	if err != nil {
		t.Fatal(err)
	}
	type problem struct {
		path    string   // "(root)" or a JSON pointer
		reasons []string // words the reason holds
	}
	tests := []struct {
		name  string
		input string
		want  []problem // nil means valid
	}{
		{name: "minimal", input: `{"name":"Ada"}`},
		{name: "full", input: `{"name":"Ada","age":36,"address":{"zip":"12345"},"tags":["a","b"]}`},
		{name: "integer written as float", input: `{"name":"Ada","age":36.0}`},
		{name: "missing required", input: `{}`, want: []problem{{"(root)", []string{"missing", "name"}}}},
		{name: "wrong type", input: `{"name":"Ada","age":"36"}`, want: []problem{{"/age", []string{"string", "integer"}}}},
		{name: "not an integer", input: `{"name":"Ada","age":3.5}`, want: []problem{{"/age", []string{"integer"}}}},
		{name: "additional property", input: `{"name":"Ada","admin":true}`, want: []problem{{"(root)", []string{"admin"}}}},
		{name: "nested missing", input: `{"name":"Ada","address":{}}`, want: []problem{{"/address", []string{"missing", "zip"}}}},
		{name: "nested pattern", input: `{"name":"Ada","address":{"zip":"12"}}`, want: []problem{{"/address/zip", []string{"12"}}}},
		{name: "nested additional", input: `{"name":"Ada","address":{"zip":"12345","city":"X"}}`, want: []problem{{"/address", []string{"city"}}}},
		{name: "array item", input: `{"name":"Ada","tags":["a",1]}`, want: []problem{{"/tags/1", []string{"number", "string"}}}},
		{name: "minLength", input: `{"name":""}`, want: []problem{{"/name", []string{"minLength"}}}},
		{name: "every problem listed", input: `{"age":-1,"admin":true,"tags":"x"}`, want: []problem{
			{"(root)", []string{"missing", "name"}},
			{"(root)", []string{"admin"}},
			{"/age", []string{"minimum"}},
			{"/tags", []string{"string", "array"}},
		}},
		{name: "not an object", input: `["name"]`, want: []problem{{"(root)", []string{"array", "object"}}}},
		{name: "null", input: `null`, want: []problem{{"(root)", []string{"null", "object"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			input, err := jsonschema.UnmarshalJSON(strings.NewReader(tt.input))
			if err != nil {
				t.Fatal(err)
			}
			err = c.ValidateInput(input)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("ValidateInput(%s): %v", tt.input, err)
				}
				return
			}
			var ie *manifest.InputError
			if !errors.As(err, &ie) {
				t.Fatalf("ValidateInput(%s) = %v (%T), want a *manifest.InputError", tt.input, err, err)
			}
			if len(ie.Problems) != len(tt.want) {
				t.Errorf("got %d problems, want %d: %q", len(ie.Problems), len(tt.want), ie.Problems)
			}
			for _, w := range tt.want {
				if !hasProblem(ie.Problems, w.path, w.reasons) {
					t.Errorf("no problem at %s naming %q in %q", w.path, w.reasons, ie.Problems)
				}
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "invalid input") {
				t.Errorf("message %q does not start with \"invalid input\"", msg)
			}
			for _, p := range ie.Problems {
				if !strings.Contains(msg, p) {
					t.Errorf("message %q leaves out %q", msg, p)
				}
			}
		})
	}
}

func hasProblem(problems []string, path string, reasons []string) bool {
	for _, p := range problems {
		rest, ok := strings.CutPrefix(p, path+": ")
		if !ok {
			continue
		}
		all := true
		for _, r := range reasons {
			all = all && strings.Contains(rest, r)
		}
		if all {
			return true
		}
	}
	return false
}

// TestValidateInputFormat checks that "format" is asserted, as Zod's
// z.string().email() and .url() export it.
func TestValidateInputFormat(t *testing.T) {
	tl := validTool("contact")
	tl.InputSchema = jsontext.Value(`{"type":"object","properties":{"email":{"type":"string","format":"email"},"site":{"type":"string","format":"uri"}},"additionalProperties":false}`)
	tl.Target = dispatch.Spec{Type: "kazzle", Name: "contact"}
	c, err := manifest.CompileTool(tl, testComponents(t))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		input    string
		wantPath string // "" means valid
		reason   string
	}{
		{name: "valid", input: `{"email":"ada@example.com","site":"https://example.com/x"}`},
		{name: "bad email", input: `{"email":"not an address"}`, wantPath: "/email", reason: "not valid email"},
		{name: "bad uri", input: `{"site":"no scheme here"}`, wantPath: "/site", reason: "not valid uri"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			input, err := jsonschema.UnmarshalJSON(strings.NewReader(tt.input))
			if err != nil {
				t.Fatal(err)
			}
			err = c.ValidateInput(input)
			if tt.wantPath == "" {
				if err != nil {
					t.Fatalf("ValidateInput(%s): %v", tt.input, err)
				}
				return
			}
			var ie *manifest.InputError
			if !errors.As(err, &ie) {
				t.Fatalf("ValidateInput(%s) = %v, want a *manifest.InputError", tt.input, err)
			}
			if !hasProblem(ie.Problems, tt.wantPath, []string{tt.reason}) {
				t.Errorf("no problem at %s naming %q in %q", tt.wantPath, tt.reason, ie.Problems)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// TestShowsUI: an app target shows in the MCP Apps view unless it says
// "ui": false; no other target does, and "ui": false on one compiles.
func TestShowsUI(t *testing.T) {
	url := dispatch.Spec{Type: "url", Method: "GET", URL: "https://api.example.com/s"}
	for _, c := range []struct {
		name   string
		target *dispatch.Spec // nil keeps validTool's app target
		ui     *bool
		want   bool
	}{
		{"app", nil, nil, true},
		{"app ui true", nil, ptr(true), true},
		{"app ui false", nil, ptr(false), false},
		{"url", &url, nil, false},
		{"url ui false", &url, ptr(false), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			tl := validTool("t")
			if c.target != nil {
				tl.Target = *c.target
			}
			tl.UI = c.ui
			compiled, err := manifest.CompileTool(tl, testComponents(t))
			if err != nil {
				t.Fatal(err)
			}
			if got := compiled.ShowsUI(); got != c.want {
				t.Errorf("ShowsUI = %v, want %v", got, c.want)
			}
		})
	}
	// A manifest's "ui": false reaches the tool.
	f, err := manifest.Parse([]byte(`{"tools":[{"name":"a","description":"d","input_schema":{"type":"object"},"target":{"type":"app","component":"notes","method":"GET","path":"/"},"ui":false}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if ui := f.Tools[0].UI; ui == nil || *ui {
		t.Errorf(`"ui": false parsed as %v`, ui)
	}
}
