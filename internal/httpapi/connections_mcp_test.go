package httpapi

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/apitest"
)

// person answers a client's elicitations from the test's goroutine, which
// can open the links they hold and fail the test, while the call waits in
// another: each elicitation is handed over on asks, and its answer comes
// back on answers.
type person struct {
	asks    chan *mcp.ElicitParams
	answers chan *mcp.ElicitResult
}

func newPerson() *person {
	return &person{asks: make(chan *mcp.ElicitParams), answers: make(chan *mcp.ElicitResult)}
}

func (p *person) handle(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	select {
	case p.asks <- req.Params:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case a := <-p.answers:
		return a, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// asked waits for the next elicitation.
func (p *person) asked(t *testing.T) *mcp.ElicitParams {
	t.Helper()
	select {
	case q := <-p.asks:
		return q
	case <-time.After(10 * time.Second):
		t.Fatal("no elicitation within 10s")
		return nil
	}
}

func (p *person) answer(a *mcp.ElicitResult) { p.answers <- a }

// connMCPSession connects to r's /mcp as a client with caps (nil: the
// SDK's, form elicitation) whose elicitations p answers, at protocol
// version ("" the SDK's latest).
func connMCPSession(t *testing.T, r *connRig, caps *mcp.ClientCapabilities, version string, p *person) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "connect-test", Version: "1"}, &mcp.ClientOptions{Capabilities: caps, ElicitationHandler: p.handle})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: r.URL + "/mcp", HTTPClient: &http.Client{Timeout: 20 * time.Second}, MaxRetries: -1},
		&mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// mcpCall is a tools/call in flight.
type mcpCall struct {
	res *mcp.CallToolResult
	err error
	end chan struct{}
}

// callMail starts a thread call of mail for user in the background, named
// callID in _meta.
func callMail(cs *mcp.ClientSession, user, callID string) *mcpCall {
	c := &mcpCall{end: make(chan struct{})}
	go func() {
		defer close(c.end)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		c.res, c.err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "mail", Arguments: map[string]any{}, Meta: mcp.Meta{
			"toolgate/identity": map[string]any{"user": user, "install": "in_1"},
			"toolgate/threadId": "th_mcp", "toolgate/callId": callID,
		}})
	}()
	return c
}

// result waits for the call's result.
func (c *mcpCall) result(t *testing.T) *mcp.CallToolResult {
	t.Helper()
	select {
	case <-c.end:
	case <-time.After(20 * time.Second):
		t.Fatal("no result within 20s")
	}
	if c.err != nil {
		t.Fatalf("tools/call: %v", c.err)
	}
	return c.res
}

// cardLink is the link of the connect card call callID of user waits on,
// as GET /calls shows it.
func (r *connRig) cardLink(t *testing.T, callID, user string) string {
	t.Helper()
	return connectURL(t, r.status(t, callID, user))
}

// follow opens a connect link at the service and sends the browser back
// to the gateway's callback, which must make the connection.
func (r *connRig) follow(t *testing.T, link string) {
	t.Helper()
	if status, page := r.callback(t, r.oauth.Authorize(t, link)); status != http.StatusOK || !strings.Contains(page, "is connected") {
		t.Fatalf("callback: %d %s", status, page)
	}
}

var linkInMessage = regexp.MustCompile(`https?://\S+`)

// TestConnectOverMCP: over MCP a thread call of a tool whose connection
// the user has not made asks a client with URL elicitation to open the
// service's authorization page, and a client with form elicitation only
// to open the link its message holds; either's accept, once the
// connection is made, answers the tool's result, which reached the
// resource once; before it is made, a new card with a new link.
func TestConnectOverMCP(t *testing.T) {
	for _, version := range []string{"", "2025-11-25"} {
		name := version
		if name == "" {
			name = "latest"
		}
		t.Run("url "+name, func(t *testing.T) { connectOverMCPURL(t, version) })
		t.Run("form "+name, func(t *testing.T) { connectOverMCPForm(t, version) })
	}
}

func connectOverMCPURL(t *testing.T, version string) {
	r := newConnRig(t, nil)
	p := newPerson()
	cs := connMCPSession(t, r, &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}}, version, p)

	call := callMail(cs, "alice", "m1")
	q := p.asked(t)
	if q.Mode != "url" || q.URL != r.cardLink(t, "m1", "alice") || q.ElicitationID == "" || !strings.Contains(q.Message, "Connect Gmail") {
		t.Fatalf("asked %s, want the card's link as a URL elicitation", apitest.Dump(q))
	}
	if n := len(r.oauth.ResourceHits()); n != 0 {
		t.Fatalf("%d resource hits before the user connected", n)
	}
	r.follow(t, q.URL)
	p.answer(&mcp.ElicitResult{Action: "accept"})
	res := call.result(t)
	if res.IsError || !strings.Contains(apitest.ModelText(t, res), "mail of alice@example.com") {
		t.Fatalf("the accepted call: %s", apitest.Dump(res))
	}
	if n := len(r.oauth.ResourceHits()); n != 1 {
		t.Fatalf("%d resource hits, want 1", n)
	}

	// An accept before the connection is made asks again, with a new
	// link; the old one's state is not the new one's.
	r.oauth.SetSubject("bob@example.com")
	call = callMail(cs, "bob", "m2")
	first := p.asked(t)
	p.answer(&mcp.ElicitResult{Action: "accept"})
	again := p.asked(t)
	if again.Mode != "url" || again.URL == first.URL || again.URL != r.cardLink(t, "m2", "bob") {
		t.Fatalf("accept before connecting: asked %s, then %s", apitest.Dump(first), apitest.Dump(again))
	}
	if n := len(r.oauth.ResourceHits()); n != 1 {
		t.Fatalf("an accept before connecting reached the resource: %d hits", n)
	}
	r.follow(t, again.URL)
	p.answer(&mcp.ElicitResult{Action: "accept"})
	if res := call.result(t); res.IsError || !strings.Contains(apitest.ModelText(t, res), "mail of bob@example.com") {
		t.Fatalf("bob's call: %s", apitest.Dump(res))
	}

	// Declined: the call is skipped, and nothing is sent.
	call = callMail(cs, "carol", "m3")
	p.asked(t)
	p.answer(&mcp.ElicitResult{Action: "decline"})
	if res := call.result(t); res.IsError || !strings.Contains(apitest.ModelText(t, res), "skipped connecting gmail") {
		t.Fatalf("declined: %s", apitest.Dump(res))
	}
	if a := r.status(t, "m3", "carol"); a.Status != "done" || !strings.Contains(a.Content, "skipped") {
		t.Errorf("the declined call: %+v", a)
	}
	if n := len(r.oauth.ResourceHits()); n != 2 {
		t.Fatalf("%d resource hits, want 2", n)
	}
}

func connectOverMCPForm(t *testing.T, version string) {
	r := newConnRig(t, nil)
	p := newPerson()
	cs := connMCPSession(t, r, nil, version, p)

	call := callMail(cs, "alice", "f1")
	q := p.asked(t)
	link := linkInMessage.FindString(q.Message)
	if q.Mode != "" && q.Mode != "form" || q.URL != "" || link == "" || link != r.cardLink(t, "f1", "alice") ||
		!strings.Contains(apitest.Dump(q.RequestedSchema), `"const":"connect"`) {
		t.Fatalf("asked %s, want a form whose message holds the card's link", apitest.Dump(q))
	}
	// Connect chosen before connecting: a new card, a new link.
	p.answer(&mcp.ElicitResult{Action: "accept", Content: map[string]any{"button": "connect"}})
	again := p.asked(t)
	fresh := linkInMessage.FindString(again.Message)
	if fresh == "" || fresh == link || fresh != r.cardLink(t, "f1", "alice") {
		t.Fatalf("connect before connecting: asked %s", apitest.Dump(again))
	}
	if stateOf(t, fresh) == stateOf(t, link) {
		t.Fatal("the new link has the old state")
	}
	if n := len(r.oauth.ResourceHits()); n != 0 {
		t.Fatalf("%d resource hits before the user connected", n)
	}
	// Connected through the new link, whose callback runs the call:
	// connect then answers its result.
	r.follow(t, fresh)
	p.answer(&mcp.ElicitResult{Action: "accept", Content: map[string]any{"button": "connect"}})
	res := call.result(t)
	if res.IsError || !strings.Contains(apitest.ModelText(t, res), "mail of alice@example.com") {
		t.Fatalf("the connected call: %s", apitest.Dump(res))
	}
	if n := len(r.oauth.ResourceHits()); n != 1 {
		t.Fatalf("%d resource hits, want 1", n)
	}
}

func stateOf(t *testing.T, link string) string {
	t.Helper()
	u, err := url.Parse(link)
	if err != nil {
		t.Fatal(err)
	}
	return u.Query().Get("state")
}
