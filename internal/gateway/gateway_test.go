package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/toolgate/toolgate/internal/clienttools"
	"github.com/toolgate/toolgate/internal/dispatch"
	"github.com/toolgate/toolgate/internal/identity"
	"github.com/toolgate/toolgate/internal/manifest"
	"github.com/toolgate/toolgate/internal/outbound"
)

func TestCheckContext(t *testing.T) {
	for _, c := range []struct {
		name string
		in   Origin
		want Origin
		ok   bool
	}{
		{"empty is api", Origin{}, Origin{Source: "api"}, true},
		{"api", Origin{Source: "api"}, Origin{Source: "api"}, true},
		{"thread", Origin{Source: "thread", ThreadID: "th_1"}, Origin{Source: "thread", ThreadID: "th_1"}, true},
		{"thread without id", Origin{Source: "thread"}, Origin{}, false},
		{"api with thread id", Origin{Source: "api", ThreadID: "th_1"}, Origin{}, false},
		{"thread id without source", Origin{ThreadID: "th_1"}, Origin{}, false},
		{"unknown source", Origin{Source: "chat"}, Origin{}, false},
		{"thread id at the bound", Origin{Source: "thread", ThreadID: strings.Repeat("t", MaxIdentityLen)}, Origin{Source: "thread", ThreadID: strings.Repeat("t", MaxIdentityLen)}, true},
		{"thread id too long", Origin{Source: "thread", ThreadID: strings.Repeat("t", MaxIdentityLen+1)}, Origin{}, false},
		{"thread id with a newline", Origin{Source: "thread", ThreadID: "th\n1"}, Origin{}, false},
		{"thread id not UTF-8", Origin{Source: "thread", ThreadID: "th\xff"}, Origin{}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := c.in
			err := CheckOrigin(&got)
			if (err == nil) != c.ok {
				t.Fatalf("err = %v, want ok=%v", err, c.ok)
			}
			if err != nil {
				if !errors.Is(err, ErrBadRequest) {
					t.Errorf("err %v is not a 400 bad request", err)
				}
				return
			}
			if got != c.want {
				t.Errorf("got %+v, want %+v", got, c.want)
			}
		})
	}
}

type seen struct {
	path, auth, ctx string
	body            []byte
}

func newGateway(t *testing.T, tools ...manifest.Tool) (*Gateway, chan seen) {
	t.Helper()
	ch := make(chan seen, 10)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		ch <- seen{r.URL.EscapedPath(), r.Header.Get("Authorization"), r.Header.Get("Kazzle-Tool-Context"), b}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"content":"got %s"}`, r.URL.Path)
	}))
	t.Cleanup(up.Close)
	comp, err := dispatch.NewComponent("api", up.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	set, err := manifest.Compile([]manifest.Source{{Name: "test", Tools: tools}}, map[string]*dispatch.Component{"api": comp})
	if err != nil {
		t.Fatal(err)
	}
	key, _ := identity.GenerateKey()
	return New(Config{Tools: set, Issuer: identity.NewIssuer("gw", time.Minute, key), Client: outbound.NewClient(time.Second, 1<<20)}), ch
}

func tool(name string, target dispatch.Spec) manifest.Tool {
	return manifest.Tool{
		Name: name, Description: "d",
		InputSchema: []byte(`{"type":"object","properties":{"id":{"type":"string","maxLength":3},"big":{"type":"integer"}},"additionalProperties":false}`),
		Target:      target,
	}
}

func TestInvoke(t *testing.T) {
	gw, ch := newGateway(t,
		tool("app", dispatch.Spec{Type: "app", Component: "api", Method: "POST", Path: "/i/${input.id}", Body: []byte(`"${input}"`)}),
		tool("client", dispatch.Spec{Type: "kazzle", Name: "where"}),
	)
	me := Identity{User: "u_1", Install: "in_1"}
	ctx := context.Background()

	// Caller mistakes are errors with a status, and nothing is sent.
	for _, c := range []struct {
		name string
		call Call
		kind error // what httpapi maps to the status
		code string
	}{
		{"unknown tool", Call{Tool: "nope", Identity: me}, ErrUnknownTool, "unknown_tool"},
		{"no user for an app target", Call{Tool: "app", Input: jsontext.Value(`{"id":"a"}`)}, ErrBadRequest, "identity_required"},
		{"bad context", Call{Tool: "app", Origin: Origin{Source: "thread"}, Identity: me}, ErrBadRequest, "invalid_context"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := gw.Invoke(ctx, c.call)
			var re *RequestError
			if !errors.As(err, &re) || re.Code != c.code || !errors.Is(err, c.kind) {
				t.Errorf("err %v, want %v %s", err, c.kind, c.code)
			}
		})
	}

	// Tool failures are answers with isError, and nothing is sent.
	for _, c := range []struct {
		name, input, want string
	}{
		{"invalid JSON input", `{"id":`, "invalid input"},
		{"schema violation", `{"id":"toolong"}`, "/id"},
		{"wrong type", `{"id":1}`, "/id"},
		{"missing reference", `{}`, "reference ${input.id}"},
		{"path reference leaves its segment", `{"id":"../"}`, "reference ${input.id}: a path segment value may not hold"},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, err := gw.Invoke(ctx, Call{Tool: "app", Input: jsontext.Value(c.input), Identity: me})
			if err != nil {
				t.Fatal(err)
			}
			if !a.IsError || !strings.Contains(a.Content, c.want) || a.Status != StatusDone {
				t.Errorf("got %+v, want an error result with %q", a, c.want)
			}
		})
	}
	select {
	case s := <-ch:
		t.Fatalf("the upstream was called for a call that must not reach it: %+v", s)
	default:
	}

	a, err := gw.Invoke(ctx, Call{Tool: "app", CallID: "c1", Input: jsontext.Value(`{"id":"a b","big":12345678901234567890}`),
		Origin: Origin{Source: "thread", ThreadID: "t"}, Identity: me})
	if err != nil || a.IsError || a.CallID != "c1" || a.Content != "got /i/a b" {
		t.Fatalf("got %+v, %v", a, err)
	}
	s := <-ch
	if s.path != "/i/a%20b" || !strings.HasPrefix(s.auth, "Bearer ey") || s.ctx != `{"source":"thread","threadId":"t"}` {
		t.Errorf("upstream saw %+v", s)
	}
	if string(s.body) != `{"big":12345678901234567890,"id":"a b"}` {
		t.Errorf("body %s: the number must keep its exact text", s.body)
	}

}

func TestClientTools(t *testing.T) {
	gw, _ := newGateway(t, tool("client", dispatch.Spec{Type: "kazzle", Name: "where"}))
	gw.clientWait = 200 * time.Millisecond
	ctx := context.Background()
	me := Identity{User: "u_1"}
	thread := Origin{Source: "thread", ThreadID: "th_1"}

	if a, err := gw.Invoke(ctx, Call{Tool: "client", Identity: me}); err != nil || !a.IsError || a.Content != "client tools need a thread" {
		t.Errorf("api call: %+v, %v", a, err)
	}
	if a, err := gw.Invoke(ctx, Call{Tool: "client", Origin: thread, Identity: me}); err != nil || !a.IsError || a.Content != "client tool timed out" {
		t.Errorf("no page: %+v, %v", a, err)
	}

	// A page of the thread claims the call and answers it.
	stream, waiting, err := gw.bridge.Open(clienttools.Thread{User: "u_1", ID: "th_1"}, "page token")
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	if len(waiting) != 0 {
		t.Fatalf("a timed-out call is offered again: %+v", waiting)
	}
	go func() {
		o := <-stream.C
		if o.Name != "where" || string(o.Input) != `{"id":"x"}` {
			t.Errorf("offer %+v", o)
		}
		if err := gw.bridge.Claim(clienttools.Thread{User: "u_1", ID: "th_1"}, o.CallID); err != nil {
			t.Error(err)
		}
		_ = gw.bridge.Post(clienttools.Thread{User: "u_1", ID: "th_1"}, o.CallID, clienttools.Outcome{Result: jsontext.Value(`{"b":1, "a":[2]}`)})
	}()
	a, err := gw.Invoke(ctx, Call{Tool: "client", CallID: "k1", Input: jsontext.Value(`{ "id": "x" }`), Origin: thread, Identity: me})
	if err != nil || a.IsError || a.Content != `{"b":1,"a":[2]}` {
		t.Errorf("page answer: %+v, %v", a, err)
	}
}

func TestNewCallID(t *testing.T) {
	a, b := NewCallID(), NewCallID()
	if a == b || !strings.HasPrefix(a, "call_") || len(a) != len("call_")+26 {
		t.Errorf("call ids %q %q", a, b)
	}
	if err := CheckCallID(a); err != nil {
		t.Errorf("call id %q: %v", a, err)
	}
	// Ids made in a later millisecond sort after earlier ones.
	prev := NewCallID()
	for range 3 {
		time.Sleep(2 * time.Millisecond)
		next := NewCallID()
		if next <= prev {
			t.Errorf("call id %q made after %q sorts before it", next, prev)
		}
		prev = next
	}
}
