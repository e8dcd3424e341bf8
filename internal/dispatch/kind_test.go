package dispatch_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/dispatch"
	"github.com/toolgate/toolgate/internal/result"
)

// recordingExecutor records which way a kind ran a target.
type recordingExecutor struct {
	sent   *dispatch.Sending
	inPage bool
	mcp    bool
}

func (x *recordingExecutor) CallMCP(*dispatch.Target) dispatch.Outcome {
	x.mcp = true
	return dispatch.Outcome{}
}

func (x *recordingExecutor) Send(_ *dispatch.Target, how dispatch.Sending) dispatch.Outcome {
	x.sent = &how
	return dispatch.Outcome{}
}

func (x *recordingExecutor) RunInPage(*dispatch.Target) dispatch.Outcome {
	x.inPage = true
	return dispatch.Outcome{}
}

// TestKinds holds each kind to what it says of its targets: what a call
// needs, where it runs, how it is sent, and how logs name it.
func TestKinds(t *testing.T) {
	comps := testComponents(t)
	for _, c := range []struct {
		spec                              dispatch.Spec
		needsUser, inPage, cards, showsUI bool
		sent                              *dispatch.Sending // nil: run in the page or called over MCP
		describe                          string
	}{
		{dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/x"}, true, false, true, true, &dispatch.Sending{Identity: true}, "api /x"},
		{dispatch.Spec{Type: "url", Method: "GET", URL: "https://example.com/x"}, false, false, false, false, &dispatch.Sending{CheckEmbeds: true}, "https://example.com/x"},
		{dispatch.Spec{Type: "kazzle", Name: "where"}, false, true, false, false, nil, "client tool where"},
		{dispatch.Spec{Type: "mcp", Server: "crm", Tool: "search"}, false, false, true, false, nil, "mcp server crm tool search"},
	} {
		t.Run(c.spec.Type, func(t *testing.T) {
			tgt, err := dispatch.Compile(c.spec, dispatch.Env{Components: comps, Servers: testServers()})
			if err != nil {
				t.Fatal(err)
			}
			k := tgt.Kind()
			if k.Name() != c.spec.Type {
				t.Errorf("Name = %q", k.Name())
			}
			if k.NeedsUser() != c.needsUser || k.InPage() != c.inPage || k.AnswersCards() != c.cards || k.ShowsUI() != c.showsUI {
				t.Errorf("NeedsUser %v, InPage %v, AnswersCards %v, ShowsUI %v; want %v, %v, %v, %v",
					k.NeedsUser(), k.InPage(), k.AnswersCards(), k.ShowsUI(), c.needsUser, c.inPage, c.cards, c.showsUI)
			}
			var x recordingExecutor
			k.Execute(tgt, &x)
			switch {
			case c.sent == nil && c.spec.Type == "mcp" && (x.sent != nil || x.inPage || !x.mcp):
				t.Errorf("Execute sent %+v, ran in the page %v, called over MCP %v; want it called over MCP", x.sent, x.inPage, x.mcp)
			case c.sent == nil && c.spec.Type != "mcp" && (x.sent != nil || !x.inPage):
				t.Errorf("Execute sent %+v, ran in the page %v; want it run in the page", x.sent, x.inPage)
			case c.sent != nil && (x.sent == nil || *x.sent != *c.sent || x.inPage):
				t.Errorf("Execute sent %+v, ran in the page %v; want it sent %+v", x.sent, x.inPage, *c.sent)
			}
			if got := tgt.Describe(); got != c.describe {
				t.Errorf("Describe = %q, want %q", got, c.describe)
			}
		})
	}
}

// TestKindTable: one kind for each wire name, and messages list them all.
func TestKindTable(t *testing.T) {
	seen := map[string]bool{}
	for _, k := range dispatch.Kinds() {
		if seen[k.Name()] {
			t.Errorf("two kinds named %q", k.Name())
		}
		seen[k.Name()] = true
		if got, ok := dispatch.KindOf(k.Name()); !ok || got.Name() != k.Name() {
			t.Errorf("KindOf(%q) = %v, %v", k.Name(), got, ok)
		}
	}
	if _, ok := dispatch.KindOf("ftp"); ok {
		t.Error(`KindOf("ftp") found a kind`)
	}
	if got := dispatch.KindNames(); got != "app, url, kazzle or mcp" {
		t.Errorf("KindNames = %q", got)
	}
	for _, c := range []struct{ typ, want string }{
		{"", "target type is required (app, url, kazzle or mcp)"},
		{"ftp", `unknown target type "ftp" (want app, url, kazzle or mcp)`},
	} {
		if _, err := dispatch.Compile(dispatch.Spec{Type: c.typ}, dispatch.Env{}); err == nil || err.Error() != c.want {
			t.Errorf("Compile of type %q: %v, want %q", c.typ, err, c.want)
		}
	}
}

// TestClientTargetIsNotSent: a target that runs in the page builds no
// HTTP request.
func TestClientTargetIsNotSent(t *testing.T) {
	tgt, err := dispatch.Compile(dispatch.Spec{Type: "kazzle", Name: "where"}, dispatch.Env{})
	if err != nil {
		t.Fatal(err)
	}
	if req, err := tgt.Request(t.Context(), map[string]any{}, nil); err == nil {
		t.Fatalf("Request = %v, want an error", req.URL)
	}
}

// TestResultNeedsACompiler: a url target's result expression is compiled
// by the Env's Results; without one the target is refused, never kept
// with its expression unread (its answers would pass unmapped).
func TestResultNeedsACompiler(t *testing.T) {
	spec := dispatch.Spec{Type: "url", Method: "GET", URL: "https://api.example/x", Result: "body.title"}
	if _, err := dispatch.Compile(spec, dispatch.Env{}); err == nil || !strings.Contains(err.Error(), "cannot be compiled here") {
		t.Errorf("Compile without Results: %v", err)
	}
	var got string
	tgt, err := dispatch.Compile(spec, dispatch.Env{Results: func(src string) (*result.Mapping, error) {
		got = src
		return result.NewMapping(src, func(result.Answer) (any, error) { return "mapped", nil }), nil
	}})
	if err != nil || got != "body.title" || tgt.Mapping == nil {
		t.Fatalf("Compile with Results: %v, compiled %q, mapping %v", err, got, tgt.Mapping)
	}
	if res := tgt.Mapping.Apply(200, nil, []byte(`{}`)); res.Content != "mapped" {
		t.Errorf("the mapping's result = %+v", res)
	}
	if _, err := dispatch.Compile(spec, dispatch.Env{Results: func(string) (*result.Mapping, error) { return nil, errors.New("bad expression") }}); err == nil || !strings.Contains(err.Error(), "url target: bad expression") {
		t.Errorf("Compile with a failing Results: %v", err)
	}
}
