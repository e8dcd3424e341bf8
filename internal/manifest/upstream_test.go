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
