package gateway

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/toolgate/toolgate/internal/dispatch"
	"github.com/toolgate/toolgate/internal/result"
)

// FuzzCheckCard holds the gateway's card check (checkCard; docs/http-api.md,
// "Cards: pause and resume") for any answer
// of a component a: what it accepts is recorded as it re-checks at resume,
// and no button of it can send anywhere but a, or send a's env; a card
// with a button target is never valid for two components.
func FuzzCheckCard(f *testing.F) {
	for _, s := range []string{
		cardWith(`{"type":"app","component":"a","method":"POST","path":"/items/${input.id}","body":"${input}"}`),
		cardWith(`{"type":"app","component":"a","method":"GET","path":"/x","headers":{"X":"${env.API_KEY}"}}`),
		cardWith(`{"type":"app","component":"a","method":"GET","path":"/x","body":{"k":"$${env.API_KEY}"}}`),
		cardWith(`{"type":"app","component":"b","method":"DELETE","path":"/data"}`),
		cardWith(`{"type":"url","method":"GET","url":"http://localhost:2019/config/","result":"body"}`),
		cardWith(`{"type":"app","component":"a","method":"GET","path":"/${input.id}","query":{"q":"${input}"}}`),
		cardWith(`{"type":"kazzle","name":"where"}`),
		`{"type":"action_required","title":"t","elements":[{"type":"button","id":"a","label":"A","input":{"content":"ok"}}]}`,
	} {
		f.Add([]byte(s))
	}
	a, err := dispatch.NewComponent("a", "http://a.internal:9001/base", map[string]string{"API_KEY": "s3cret"})
	if err != nil {
		f.Fatal(err)
	}
	twin, err := dispatch.NewComponent("a", "http://a.internal:9001/base", map[string]string{"API_KEY": "another value"})
	if err != nil {
		f.Fatal(err)
	}
	b, err := dispatch.NewComponent("b", "http://b.internal:9002", map[string]string{"API_KEY": "s3cret"})
	if err != nil {
		f.Fatal(err)
	}
	ownA, ownB := appOwner(f, a), appOwner(f, b)
	f.Fuzz(func(t *testing.T, body []byte) {
		recorded, err := checkCard(ownA, body)
		if err != nil {
			if recorded != nil {
				t.Fatalf("checkCard returned a card and the error %v", err)
			}
			return
		}
		card, err := result.ParseCard(recorded)
		if err != nil {
			t.Fatalf("the recorded card %s does not parse: %v", recorded, err)
		}
		if err := checkButtons(ownA, card); err != nil {
			t.Fatalf("the recorded card %s fails the check at resume: %v", recorded, err)
		}
		targets := 0
		for _, e := range card.Elements {
			if len(e.Target) == 0 {
				continue
			}
			targets++
			tgt, err := dispatch.CompileButton(e.Target, a)
			if err != nil {
				t.Fatalf("button %q of an accepted card does not compile: %v", e.ID, err)
			}
			input, err := decodeInput(e.Input)
			if err != nil {
				continue
			}
			req, err := tgt.Request(context.Background(), input, nil)
			if err != nil {
				continue
			}
			if req.URL.Host != "a.internal:9001" || !strings.HasPrefix(req.URL.EscapedPath(), "/base/") {
				t.Fatalf("button %q sends to %s", e.ID, req.URL)
			}
			// The same button on a twin of a with another env value sends
			// the same request: none of a's env went into it.
			twinTgt, err := dispatch.CompileButton(e.Target, twin)
			if err != nil {
				t.Fatalf("button %q compiles for a but not for its twin: %v", e.ID, err)
			}
			twinReq, err := twinTgt.Request(context.Background(), input, nil)
			if err != nil {
				t.Fatalf("button %q builds for a but not for its twin: %v", e.ID, err)
			}
			if sent(req) != sent(twinReq) {
				t.Fatalf("button %q sends a's env:\n%s\n%s", e.ID, sent(req), sent(twinReq))
			}
		}
		if _, err := checkCard(ownB, body); targets > 0 && err == nil {
			t.Fatalf("a card with button targets is valid for both a and b: %s", body)
		}
		if !jsontext.Value(recorded).IsValid() {
			t.Fatalf("the recorded card is not JSON: %s", recorded)
		}
	})
}

// sent is what a request would put on the wire: its URL, headers and body.
func sent(req *http.Request) string {
	var b bytes.Buffer
	b.WriteString(req.Method + " " + req.URL.String() + "\n")
	_ = req.Header.Write(&b)
	if req.Body != nil {
		_, _ = io.Copy(&b, req.Body)
	}
	return b.String()
}

// appOwner is an app target on c: the owner of the cards c's handlers
// answer.
func appOwner(tb testing.TB, c *dispatch.Component) *dispatch.Target {
	tb.Helper()
	t, err := dispatch.Compile(dispatch.Spec{Type: dispatch.TypeApp, Component: c.Name, Method: "GET", Path: "/"},
		dispatch.Env{Components: map[string]*dispatch.Component{c.Name: c}})
	if err != nil {
		tb.Fatal(err)
	}
	return t
}
