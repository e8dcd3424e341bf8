package manifest_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/toolgate/toolgate/internal/dispatch"
	"github.com/toolgate/toolgate/internal/manifest"
)

type stubServer string

func (s stubServer) Name() string        { return string(s) }
func (s stubServer) SendsIdentity() bool { return false }
func (s stubServer) Connection() string  { return "" }
func (s stubServer) Call(context.Context, dispatch.MCPCall) dispatch.Outcome {
	return dispatch.Outcome{}
}

func serverTool(server, name, schema string) manifest.Tool {
	return manifest.Tool{Name: name, Description: "d", InputSchema: jsontext.Value(schema),
		Target: dispatch.Spec{Type: "mcp", Server: server, Tool: name}}
}

func names(s *manifest.Set) []string {
	var out []string
	for _, t := range s.List() {
		out = append(out, t.Name)
	}
	return out
}

// TestWithServer: a server's tools replace its earlier list and leave the
// others; a clash is a ClashError naming both, a tool that does not
// compile is left out with its reason.
func TestWithServer(t *testing.T) {
	env := dispatch.Env{Servers: map[string]dispatch.MCPServer{"crm": stubServer("crm"), "mail": stubServer("mail")}}
	base, err := manifest.CompileIn([]manifest.Source{{Name: "inline tools", Tools: []manifest.Tool{serverTool("mail", "send", `{"type":"object"}`)}}}, env)
	if err != nil {
		t.Fatal(err)
	}
	one, errs := base.WithServer("crm", []manifest.Tool{serverTool("crm", "a", `{"type":"object"}`), serverTool("crm", "b", `{"type":"object"}`)}, env)
	if len(errs) > 0 || !slices.Equal(names(one), []string{"a", "b", "send"}) {
		t.Fatalf("first list: %v %v", names(one), errs)
	}
	if c, _ := one.Lookup("a"); c.Source != "mcp server crm" {
		t.Errorf("source = %q", c.Source)
	}
	two, errs := one.WithServer("crm", []manifest.Tool{
		serverTool("crm", "c", `{"type":"object"}`),
		serverTool("crm", "send", `{"type":"object"}`),
		serverTool("crm", "bad", `{"type":"array"}`),
		serverTool("crm", manifest.CardAnswerTool, `{"type":"object"}`),
	}, env)
	if !slices.Equal(names(two), []string{"c", "send"}) {
		t.Errorf("second list: %v", names(two))
	}
	if c, _ := two.Lookup("send"); c.Target.Spec.Server != "mail" {
		t.Error("the clashing tool replaced the declared one")
	}
	var clashes, invalid int
	for _, err := range errs {
		if ce, ok := errors.AsType[*manifest.ClashError](err); ok {
			clashes++
			if ce.Tool != "send" || !strings.Contains(err.Error(), `mcp server crm: tool "send": the name is taken by a tool of inline tools`) {
				t.Errorf("clash: %v", err)
			}
		} else {
			invalid++
		}
	}
	if clashes != 1 || invalid != 2 {
		t.Errorf("errors: %v", errs)
	}
	if !slices.Equal(names(one), []string{"a", "b", "send"}) {
		t.Error("WithServer changed the set it started from")
	}
}

// TestOutputSchema: only a tool whose answers carry structured content
// declares an output schema, and it must be an object schema.
func TestOutputSchema(t *testing.T) {
	api, err := dispatch.NewComponent("api", "http://127.0.0.1:1", nil)
	if err != nil {
		t.Fatal(err)
	}
	env := dispatch.Env{Components: map[string]*dispatch.Component{"api": api}, Servers: map[string]dispatch.MCPServer{"crm": stubServer("crm")}}
	obj := jsontext.Value(`{"type":"object","properties":{"id":{"type":"string"}}}`)
	withOutput := &dispatch.Operation{Output: "object"}
	for _, c := range []struct {
		name   string
		target dispatch.Spec
		output jsontext.Value
		err    string
	}{
		{"mcp", dispatch.Spec{Type: "mcp", Server: "crm", Tool: "x"}, obj, ""},
		{"operation with output", dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/x", Operation: withOutput}, obj, ""},
		{"operation without output", dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/x", Operation: &dispatch.Operation{}}, obj, "only a tool whose answers carry structured content"},
		{"plain app", dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/x"}, obj, "only a tool whose answers carry structured content"},
		{"not an object", dispatch.Spec{Type: "mcp", Server: "crm", Tool: "x"}, jsontext.Value(`{"type":"array"}`), `output_schema: the top level must be "type": "object"`},
		{"does not compile", dispatch.Spec{Type: "mcp", Server: "crm", Tool: "x"}, jsontext.Value(`{"type":"object","properties":{"a":{"type":"nonsense"}}}`), "output_schema does not compile"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tool := manifest.Tool{Name: "t", Description: "d", InputSchema: jsontext.Value(`{"type":"object"}`), OutputSchema: c.output, Target: c.target}
			_, err := manifest.CompileToolIn(tool, env)
			if c.err == "" && err != nil || c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
				t.Errorf("CompileToolIn: %v, want %q", err, c.err)
			}
		})
	}
}
