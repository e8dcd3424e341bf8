package mcp

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/clock"
	"github.com/toolgate/toolgate/internal/dispatch"
	"github.com/toolgate/toolgate/internal/gateway"
	"github.com/toolgate/toolgate/internal/identity"
	"github.com/toolgate/toolgate/internal/jsonread"
	"github.com/toolgate/toolgate/internal/ledger"
	"github.com/toolgate/toolgate/internal/manifest"
	"github.com/toolgate/toolgate/internal/outbound"
	"github.com/toolgate/toolgate/internal/web"
)

// appsCard is the card the upstream answers on /card: a button that
// answers itself and one whose target is /run.
const appsCard = `{"type":"action_required","title":"Run the job?","elements":[
	{"type":"button","id":"approve","label":"Approve","input":{"content":"approved"}},
	{"type":"button","id":"run","label":"Run","input":{"id":"j1"},"target":{"type":"app","component":"api","method":"POST","path":"/run"}}]}`

// upstream is the app's component: it answers by path and counts what it
// was sent, so that a refusal can be shown to have sent nothing.
type upstream struct {
	*httptest.Server
	mu      sync.Mutex
	counts  map[string]int
	context map[string]string // the last Kazzle-Tool-Context by path
}

func newUpstream(t testing.TB) *upstream {
	u := &upstream{counts: map[string]int{}, context: map[string]string{}}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.counts[r.URL.Path]++
		u.context[r.URL.Path] = r.Header.Get("Kazzle-Tool-Context")
		u.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/md":
			fmt.Fprint(w, `{"content":"saved","markdown":"**saved**"}`)
		case "/embed":
			fmt.Fprintf(w, `{"content":"c","embedUrl":"%s/page/1"}`, u.URL)
		case "/card":
			fmt.Fprint(w, appsCard)
		case "/run":
			fmt.Fprint(w, `{"content":"ran"}`)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *upstream) count(path string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.counts[path]
}

// appsRig is a Server over the upstream's tools, a bolt ledger and a
// manual clock:
//   - show, embed and card, app tools on api, shown in the view;
//   - quiet, an app tool with "ui": false, and ext, a url tool: not shown;
//   - other, an app tool on a second component, and sock, one on a unix
//     socket (no origin).
type appsRig struct {
	s     *Server
	up    *upstream
	gw    *gateway.Gateway
	clock *clock.Manual
}

func newAppsRig(t testing.TB) *appsRig {
	t.Helper()
	up := newUpstream(t)
	comps := map[string]*dispatch.Component{}
	for name, base := range map[string]string{"api": up.URL, "other": "http://Other.example:8443", "sock": "unix/" + filepath.Join(t.TempDir(), "s.sock")} {
		c, err := dispatch.NewComponent(name, base, nil)
		if err != nil {
			t.Fatal(err)
		}
		comps[name] = c
	}
	off := false
	app := func(name, comp, path string) manifest.Tool {
		return manifest.Tool{Name: name, Description: name + ".", InputSchema: jsontext.Value(`{"type":"object"}`),
			Target: dispatch.Spec{Type: "app", Component: comp, Method: "GET", Path: path}}
	}
	quiet := app("quiet", "api", "/embed")
	quiet.UI = &off
	tools, err := manifest.Compile([]manifest.Source{{Name: "test", Tools: []manifest.Tool{
		app("show", "api", "/md"), app("embed", "api", "/embed"), app("card", "api", "/card"), quiet,
		app("other", "other", "/x"), app("sock", "sock", "/x"),
		{Name: "ext", Description: "ext.", InputSchema: jsontext.Value(`{"type":"object"}`),
			Target: dispatch.Spec{Type: "url", Method: "GET", URL: up.URL + "/embed"}},
	}}}, comps)
	if err != nil {
		t.Fatal(err)
	}
	key, err := identity.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	l, err := ledger.OpenBolt(filepath.Join(t.TempDir(), "ledger.db"), ledger.BoltOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	clk := clock.NewManual(time.Now())
	gw := gateway.New(gateway.Config{
		Tools: tools, Issuer: identity.NewIssuer("toolgate", time.Minute, key),
		Client: outbound.NewClient(2*time.Second, 1<<20), Ledger: l, Clock: clk,
		EmbedOrigins: []string{up.URL}, // the url tool's embeds are on the upstream
	})
	return &appsRig{s: New(gw, Options{Clock: clk}), up: up, gw: gw, clock: clk}
}

// appsCaps declares the MCP Apps extension as a host does.
func appsCaps() *sdk.ClientCapabilities {
	caps := &sdk.ClientCapabilities{}
	caps.AddExtension(AppsExtension, map[string]any{"mimeTypes": []string{web.MCPAppMIMEType}})
	return caps
}

// connect opens an in-memory session with caps (nil: the SDK's defaults,
// no extension) and elicit as the elicitation handler, if any.
func (r *appsRig) connect(t testing.TB, caps *sdk.ClientCapabilities, elicit func(context.Context, *sdk.ElicitRequest) (*sdk.ElicitResult, error)) *sdk.ClientSession {
	t.Helper()
	ctx := context.Background()
	st, ct := sdk.NewInMemoryTransports()
	ss, err := r.s.server.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	c := sdk.NewClient(&sdk.Implementation{Name: "apps-test", Version: "1"}, &sdk.ClientOptions{Capabilities: caps, ElicitationHandler: elicit})
	cs, err := c.Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func as(user string) sdk.Meta {
	return sdk.Meta{MetaIdentity: map[string]any{"user": user, "install": "in_1"}}
}

func callTool(t testing.TB, cs *sdk.ClientSession, name string, args any, meta sdk.Meta) *sdk.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args, Meta: meta})
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	return res
}

func dump(v any) string {
	b, _ := json.Marshal(v, jsonread.Legacy)
	return string(b)
}

// structured is a result's structuredContent as a map.
func structured(t *testing.T, res *sdk.CallToolResult) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(dump(res.StructuredContent)), &m); err != nil || m == nil {
		t.Fatalf("structuredContent of %s: %v", dump(res), err)
	}
	return m
}

// sameJSON reports whether two JSON texts hold the same value, whatever
// the order of their members.
func sameJSON(t *testing.T, a, b string) bool {
	t.Helper()
	var va, vb any
	if err := json.Unmarshal([]byte(a), &va); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := json.Unmarshal([]byte(b), &vb); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return reflect.DeepEqual(va, vb)
}

func listTools(t *testing.T, cs *sdk.ClientSession) map[string]*sdk.Tool {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*sdk.Tool{}
	for _, tool := range res.Tools {
		out[tool.Name] = tool
	}
	return out
}

func TestAppsToolsList(t *testing.T) {
	r := newAppsRig(t)
	tools := listTools(t, r.connect(t, appsCaps(), nil))
	for _, name := range []string{"show", "embed", "card", "other", "sock"} {
		m := dump(tools[name].Meta)
		if m != `{"ui":{"resourceUri":"ui://toolgate/card"},"ui/resourceUri":"ui://toolgate/card"}` {
			t.Errorf("%s: _meta %s", name, m)
		}
	}
	for _, name := range []string{"quiet", "ext"} {
		if tools[name] == nil || tools[name].Meta != nil {
			t.Errorf("%s is not in the view, yet listed as %s", name, dump(tools[name]))
		}
	}
	answer := tools[manifest.CardAnswerTool]
	if answer == nil {
		t.Fatalf("%s not listed to an Apps client", manifest.CardAnswerTool)
	}
	if m := dump(answer.Meta); m != `{"ui":{"resourceUri":"ui://toolgate/card","visibility":["app"]}}` {
		t.Errorf("%s _meta %s", manifest.CardAnswerTool, m)
	}
	if !sameJSON(t, dump(answer.InputSchema), `{"type":"object","properties":{"state":{"type":"string"},"button":{"type":"string"},"action":{"enum":["skip","cancel"]},"input":{"type":"object"}},"required":["state"],"additionalProperties":false}`) {
		t.Errorf("%s input schema %s", manifest.CardAnswerTool, dump(answer.InputSchema))
	}

	// Without the extension, or with one that is not the view's, a client
	// sees today's list: no _meta, no card answer tool.
	malformed := func(ext any) *sdk.ClientCapabilities {
		return &sdk.ClientCapabilities{Extensions: map[string]any{AppsExtension: ext}}
	}
	for name, caps := range map[string]*sdk.ClientCapabilities{
		"defaults":          nil,
		"no mimeTypes":      malformed(map[string]any{}),
		"another type":      malformed(map[string]any{"mimeTypes": []string{"text/html"}}),
		"mimeTypes a text":  malformed(map[string]any{"mimeTypes": web.MCPAppMIMEType}),
		"extension a list":  malformed([]string{web.MCPAppMIMEType}),
		"another extension": {Extensions: map[string]any{"io.modelcontextprotocol/uix": map[string]any{"mimeTypes": []string{web.MCPAppMIMEType}}}},
	} {
		plain := listTools(t, r.connect(t, caps, nil))
		if len(plain) != len(tools)-1 || plain[manifest.CardAnswerTool] != nil {
			t.Errorf("%s: listed %d tools (the Apps client %d, with %s): %v", name, len(plain), len(tools), manifest.CardAnswerTool, slices.Collect(func(yield func(string) bool) {
				for n := range plain {
					if !yield(n) {
						return
					}
				}
			}))
		}
		for n, tool := range plain {
			if tool.Meta != nil {
				t.Errorf("%s: %s has _meta %s", name, n, dump(tool.Meta))
			}
		}
	}
}

func TestAppsResource(t *testing.T) {
	r := newAppsRig(t)
	for name, caps := range map[string]*sdk.ClientCapabilities{"apps": appsCaps(), "plain": nil} {
		cs := r.connect(t, caps, nil)
		list, err := cs.ListResources(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Resources) != 1 || list.Resources[0].URI != web.MCPAppURI || list.Resources[0].Name != "toolgate-card" || list.Resources[0].MIMEType != web.MCPAppMIMEType {
			t.Errorf("%s: resources/list %s", name, dump(list))
		}
		res, err := cs.ReadResource(context.Background(), &sdk.ReadResourceParams{URI: web.MCPAppURI})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Contents) != 1 {
			t.Fatalf("%s: resources/read %s", name, dump(res))
		}
		c := res.Contents[0]
		if c.URI != web.MCPAppURI || c.MIMEType != "text/html;profile=mcp-app" || c.Text != string(web.MCPApp()) {
			t.Errorf("%s: read %s %s, %d bytes", name, c.URI, c.MIMEType, len(c.Text))
		}
		// The api component's origin and other's, lower-cased, sorted;
		// quiet's is api's too, and sock has none.
		want := fmt.Sprintf(`{"ui":{"csp":{"connectDomains":[],"frameDomains":["%s","http://other.example:8443"],"resourceDomains":[]},"prefersBorder":true}}`, r.up.URL)
		if got := dump(c.Meta); got != want {
			t.Errorf("%s: _meta\n got %s\nwant %s", name, got, want)
		}
	}
}

// TestFrameDomains: only the components of tools shown in the view, once.
func TestFrameDomains(t *testing.T) {
	comp := func(name, base string) *dispatch.Component {
		c, err := dispatch.NewComponent(name, base, nil)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	off := false
	tool := func(typ string, c *dispatch.Component, ui *bool) *manifest.Compiled {
		return &manifest.Compiled{Tool: manifest.Tool{Target: dispatch.Spec{Type: typ}, UI: ui}, Target: &dispatch.Target{Component: c}}
	}
	b := comp("b", "https://B.example/app")
	got := frameDomains([]*manifest.Compiled{
		tool("app", b, nil),
		tool("app", comp("a", "http://a.example:8080/"), nil),
		tool("app", comp("b2", "https://b.example/other"), nil),
		tool("app", comp("quiet", "https://quiet.example"), &off),
		tool("url", comp("env", "https://env.example"), nil),
		tool("app", comp("s", "unix//run/s.sock"), nil),
	}, []string{"https://site.example", "https://b.example"})
	if want := []string{"http://a.example:8080", "https://b.example", "https://site.example"}; !slices.Equal(got, want) {
		t.Errorf("frameDomains %q, want %q", got, want)
	}
	if got := frameDomains(nil, nil); got == nil || len(got) != 0 {
		t.Errorf("no tools: %#v, want an empty list (JSON [])", got)
	}
}

func TestAppsResults(t *testing.T) {
	r := newAppsRig(t)
	apps := r.connect(t, appsCaps(), nil)
	plain := r.connect(t, nil, nil)

	res := callTool(t, apps, "embed", map[string]any{}, as("u_1"))
	sc := structured(t, res)
	embedURL := r.up.URL + "/page/1"
	if sc["status"] != "done" || sc["tool"] != "embed" || sc["content"] != "c" || sc["embedUrl"] != embedURL || sc["card"] != "embed" || !strings.HasPrefix(fmt.Sprint(sc["callId"]), "call_") {
		t.Errorf("embed's structuredContent %s", dump(sc))
	}
	if res.IsError || len(res.Content) != 1 || res.Content[0].(*sdk.TextContent).Text != "c" {
		t.Errorf("embed for the view: want the model's text and no resource link, got %s", dump(res.Content))
	}
	// The answer as GET /calls/{id} gives it.
	ans, err := r.gw.Status(context.Background(), gateway.Identity{User: "u_1", Install: "in_1"}, sc["callId"].(string))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := dump(res.StructuredContent), string(ans.AppendJSON(nil)); !sameJSON(t, got, want) {
		t.Errorf("structuredContent %s, the call's answer %s", got, want)
	}

	res = callTool(t, apps, "show", map[string]any{}, as("u_1"))
	if sc := structured(t, res); sc["markdown"] != "**saved**" || sc["card"] != "markdown" || len(res.Content) != 2 {
		t.Errorf("show: %s", dump(res))
	}

	// Not in the view: "ui": false, a url tool, any tool to a plain client.
	for _, c := range []struct {
		cs   *sdk.ClientSession
		tool string
	}{{apps, "quiet"}, {apps, "ext"}, {plain, "embed"}} {
		res := callTool(t, c.cs, c.tool, map[string]any{}, as("u_1"))
		if res.StructuredContent != nil || res.IsError || len(res.Content) != 2 {
			t.Fatalf("%s: %s", c.tool, dump(res))
		}
		if link, ok := res.Content[1].(*sdk.ResourceLink); !ok || link.URI != embedURL {
			t.Errorf("%s: want the embed as a resource link, got %s", c.tool, dump(res.Content[1]))
		}
	}
}

// viewCard calls card as user from cs and returns the view's state and
// the call's id.
func (r *appsRig) viewCard(t *testing.T, cs *sdk.ClientSession, user string) (state, callID string) {
	t.Helper()
	res := callTool(t, cs, "card", map[string]any{}, as(user))
	sc := structured(t, res)
	card, _ := sc["card"].(map[string]any)
	if res.IsError || sc["status"] != "action_required" || card["title"] != "Run the job?" {
		t.Fatalf("card for the view: %s", dump(res))
	}
	if len(res.Content) != 1 || !strings.Contains(res.Content[0].(*sdk.TextContent).Text, `waits for a person to answer the card "Run the job?"`) {
		t.Errorf("the model's text %s", dump(res.Content))
	}
	state, _ = res.Meta[MetaState].(string)
	if state == "" {
		t.Fatalf("no state in _meta: %s", dump(res))
	}
	// Hosts may give the model the content and structuredContent: the
	// state is in neither.
	if strings.Contains(dump(res.Content), state) || strings.Contains(dump(res.StructuredContent), state) {
		t.Errorf("the state is in what the model may read: %s", dump(res))
	}
	return state, sc["callId"].(string)
}

func TestAppsCardAnswer(t *testing.T) {
	r := newAppsRig(t)
	apps := r.connect(t, appsCaps(), nil)
	state, _ := r.viewCard(t, apps, "u_1")
	// Without elicitation and without a thread in _meta, the call is in a
	// thread of its own: a card may be answered in one.
	if ctx := r.up.context["/card"]; !strings.Contains(ctx, `"source":"thread"`) {
		t.Errorf("the card's call went out with context %s", ctx)
	}

	res := callTool(t, apps, manifest.CardAnswerTool, map[string]any{"state": state, "button": "run"}, as("u_1"))
	if sc := structured(t, res); res.IsError || sc["status"] != "done" || sc["content"] != "ran" || sc["tool"] != "card" {
		t.Fatalf("pressing run: %s", dump(res))
	}
	if n := r.up.count("/run"); n != 1 {
		t.Fatalf("the button's target was sent %d requests, want 1", n)
	}
	// Once: the same state again is refused, and nothing more is sent.
	res = callTool(t, apps, manifest.CardAnswerTool, map[string]any{"state": state, "button": "run"}, as("u_1"))
	if !res.IsError || !strings.Contains(res.Content[0].(*sdk.TextContent).Text, "already used") {
		t.Errorf("reused: %s", dump(res))
	}
	if n := r.up.count("/run"); n != 1 {
		t.Errorf("the button's target was sent %d requests, want 1", n)
	}

	for action, want := range map[string]string{"skip": "skipped", "cancel": "cancelled"} {
		state, _ := r.viewCard(t, apps, "u_1")
		res := callTool(t, apps, manifest.CardAnswerTool, map[string]any{"state": state, "action": action}, as("u_1"))
		if sc := structured(t, res); sc["status"] != "done" || !strings.Contains(fmt.Sprint(sc["content"]), want) || res.IsError != (action == "cancel") {
			t.Errorf("%s: %s", action, dump(res))
		}
	}
}

// TestAppsCardAnswerRefused: every refusal is an error result that names
// why, and nothing reaches the button's target.
func TestAppsCardAnswerRefused(t *testing.T) {
	r := newAppsRig(t)
	apps := r.connect(t, appsCaps(), nil)
	answer := func(user string, args map[string]any) *sdk.CallToolResult {
		t.Helper()
		return callTool(t, apps, manifest.CardAnswerTool, args, as(user))
	}
	refused := func(name string, res *sdk.CallToolResult, want string) {
		t.Helper()
		if !res.IsError || res.StructuredContent != nil || len(res.Content) != 1 || !strings.Contains(res.Content[0].(*sdk.TextContent).Text, want) {
			t.Errorf("%s: %s, want an error saying %q", name, dump(res), want)
		}
	}

	// Another caller's state; its owner can still use it after.
	state, _ := r.viewCard(t, apps, "u_1")
	refused("another caller", answer("u_2", map[string]any{"state": state, "button": "run"}), "another caller")

	// Malformed arguments spend nothing.
	refused("both", answer("u_1", map[string]any{"state": state, "button": "run", "action": "skip"}), `either "button" or "action"`)
	refused("neither", answer("u_1", map[string]any{"state": state}), `either "button" or "action"`)
	refused("another action", answer("u_1", map[string]any{"state": state, "action": "approve"}), `action "approve" is not skip or cancel`)
	refused("unknown argument", answer("u_1", map[string]any{"state": state, "button": "run", "device": "pc-7"}), "unknown field")
	refused("no state", answer("u_1", map[string]any{"button": "run"}), "state is required")
	refused("tampered", answer("u_1", map[string]any{"state": state[:len(state)-3] + "AAA", "button": "run"}), "request state")

	// A button not on the card: refused by the one resume path. The state
	// was spent as it opened; the card still waits, so the refusal brings
	// a fresh state (for the view only, in _meta), and with it the person
	// can press again.
	res := answer("u_1", map[string]any{"state": state, "button": "delete"})
	refused("unknown button", res, `the card has no button "delete"`)
	fresh, _ := res.Meta[MetaState].(string)
	if fresh == "" || fresh == state || strings.Contains(dump(res.Content), fresh) {
		t.Fatalf("a refused press of a waiting card: _meta %s, want a fresh state outside the content", dump(res.Meta))
	}
	if n := r.up.count("/run"); n != 0 {
		t.Fatalf("the button's target was sent %d requests before any press it takes", n)
	}
	if res := answer("u_1", map[string]any{"state": fresh, "button": "run"}); res.IsError || structured(t, res)["status"] != "done" || r.up.count("/run") != 1 {
		t.Fatalf("pressing with the fresh state: %s, the target sent %d", dump(res), r.up.count("/run"))
	}

	// A card answered another way (the Tools API) first: refused, and no
	// fresh state, since nothing waits.
	state, callID := r.viewCard(t, apps, "u_1")
	if _, err := r.gw.Resume(context.Background(), gateway.ResumeRequest{CallID: callID, Identity: gateway.Identity{User: "u_1", Install: "in_1"}, ButtonID: "approve"}); err != nil {
		t.Fatal(err)
	}
	res = answer("u_1", map[string]any{"state": state, "button": "run"})
	refused("already answered", res, "already answered")
	if res.Meta[MetaState] != nil {
		t.Errorf("a refusal for an answered card carries a state: %s", dump(res.Meta))
	}

	// Expired.
	state, _ = r.viewCard(t, apps, "u_1")
	r.clock.Add(stateTTL)
	refused("expired", answer("u_1", map[string]any{"state": state, "button": "run"}), "expired")

	// An input request's state is not the view's, nor the other way round.
	state, callID = r.viewCard(t, apps, "u_1")
	elicitState, err := r.s.newState(callID, callerOf("u_1", "in_1"), viaElicitation)
	if err != nil {
		t.Fatal(err)
	}
	refused("an input request's state", answer("u_1", map[string]any{"state": elicitState, "button": "run"}), "another way")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err = apps.CallTool(ctx, &sdk.CallToolParams{Name: "card", Arguments: map[string]any{}, Meta: as("u_1"),
		RequestState: state, InputResponses: sdk.InputResponseMap{cardInput: &sdk.ElicitResult{Action: "accept", Content: map[string]any{"button": "run"}}}})
	if err != nil {
		t.Fatal(err)
	}
	refused("the view's state in an input response", res, "another way")

	// A client without the extension is not offered the tool: to it, it
	// is unknown, whatever it holds.
	plain := r.connect(t, nil, nil)
	if res, err := plain.CallTool(ctx, &sdk.CallToolParams{Name: manifest.CardAnswerTool, Arguments: map[string]any{"state": state, "button": "run"}, Meta: as("u_1")}); err == nil || !strings.Contains(err.Error(), "unknown tool") {
		t.Errorf("a plain client: %s, %v", dump(res), err)
	}

	// Only the press with the fresh state above reached the target.
	if n := r.up.count("/run"); n != 1 {
		t.Fatalf("refusals sent the button's target %d requests", n-1)
	}
	// None of them spent the view's last state, which still answers once.
	res = answer("u_1", map[string]any{"state": state, "button": "run"})
	if res.IsError || r.up.count("/run") != 2 {
		t.Errorf("the state after the refusals: %s, /run sent %d", dump(res), r.up.count("/run"))
	}
}

// An Apps client that can answer input requests gets the card as one, as
// before; its answer shows in the view.
func TestAppsCardWithElicitation(t *testing.T) {
	r := newAppsRig(t)
	caps := appsCaps()
	caps.Elicitation = &sdk.ElicitationCapabilities{Form: &sdk.FormElicitationCapabilities{}}
	asked := 0
	cs := r.connect(t, caps, func(context.Context, *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
		asked++
		return &sdk.ElicitResult{Action: "accept", Content: map[string]any{"button": "approve"}}, nil
	})
	res := callTool(t, cs, "card", map[string]any{}, as("u_1"))
	if asked != 1 || res.IsError || res.Meta[MetaState] != nil {
		t.Fatalf("asked %d times: %s", asked, dump(res))
	}
	if sc := structured(t, res); sc["status"] != "done" || sc["content"] != "approved" {
		t.Errorf("the answer for the view: %s", dump(sc))
	}
}

// BenchmarkAppsResult: a tools/call of a markdown tool over an in-memory
// session, by a plain client (text items) and by an Apps client (the same,
// and the answer as structuredContent), each a new call recorded in bbolt.
func BenchmarkAppsResult(b *testing.B) {
	r := newAppsRig(b)
	for _, c := range []struct {
		name string
		caps *sdk.ClientCapabilities
	}{{"plain", nil}, {"apps", appsCaps()}} {
		b.Run(c.name, func(b *testing.B) {
			cs := r.connect(b, c.caps, nil)
			b.ReportAllocs()
			for b.Loop() {
				if res := callTool(b, cs, "show", map[string]any{}, as("u_1")); res.IsError || (c.caps != nil) != (res.StructuredContent != nil) {
					b.Fatalf("%s", dump(res))
				}
			}
		})
	}
}
