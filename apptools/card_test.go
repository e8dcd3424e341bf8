package apptools

import (
	"context"
	"errors"
	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestWriteCard(t *testing.T) {
	good := Card{
		Title:       "Send the email?",
		Description: "To ada@example.com",
		Elements: []Button{
			{Type: "button", ID: "send", Label: "Send", Input: jsontext.Value(`{"content":"sent"}`)},
			{Type: "button", ID: "edit", Label: "Edit", Target: jsontext.Value(`{"type":"app","component":"mail","method":"POST","path":"/drafts"}`)},
		},
	}
	withTarget := func(target string) Card {
		return Card{Title: "t", Elements: []Button{
			{Type: "button", ID: "ok", Label: "OK"},
			{Type: "button", ID: "x", Label: "X", Target: jsontext.Value(target)},
		}}
	}
	const thread = `{"source":"thread","threadId":"th_1"}`
	for _, c := range []struct {
		name    string
		header  string
		card    Card
		wantErr string
	}{
		{"thread call", `{"source":"thread","threadId":"th_1"}`, good, ""},
		{"api call", `{"source":"api"}`, good, "needs a thread"},
		{"no context", "", good, "needs a thread"},
		{"no title", `{"source":"thread","threadId":"th_1"}`, Card{Elements: good.Elements}, "title is required"},
		{"no buttons", `{"source":"thread","threadId":"th_1"}`, Card{Title: "t"}, "at least one button"},
		{"duplicate ids", `{"source":"thread","threadId":"th_1"}`, Card{Title: "t", Elements: []Button{
			{Type: "button", ID: "a", Label: "A"}, {Type: "button", ID: "a", Label: "B"}}}, "used twice"},
		// Toolgate refuses these (dispatch.CompileButton); the component hears it first.
		{"url target", thread, withTarget(`{"type":"url","method":"GET","url":"http://localhost:2019/config/"}`), `button "x": target: a button runs an app target`},
		{"env reference", thread, withTarget(`{"type":"app","component":"mail","method":"POST","path":"/send","headers":{"X-Key":"${env.API_KEY}"}}`), "${env.API_KEY}: a button may reference ${input…} only"},
		{"result mapping", thread, withTarget(`{"type":"app","component":"mail","method":"GET","path":"/x","result":"body"}`), "no result mapping"},
		{"client tool", thread, withTarget(`{"type":"kazzle","name":"where"}`), `not a "kazzle" target`},
		{"unknown field", thread, withTarget(`{"type":"app","component":"mail","method":"GET","path":"/x","url":"http://localhost:2019/"}`), "url is for url targets"},
		{"no component", thread, withTarget(`{"type":"app","method":"GET","path":"/x"}`), "component is required"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/x", nil)
			if c.header != "" {
				r.Header.Set(ContextHeader, c.header)
			}
			w := httptest.NewRecorder()
			err := WriteCard(w, r, c.card)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err %v, want %q", err, c.wantErr)
				}
				if w.Body.Len() != 0 || w.Code != 200 || len(w.Header()) != 0 {
					t.Errorf("a refused card wrote %d %q", w.Code, w.Body)
				}
				if strings.Contains(c.wantErr, "thread") && !errors.Is(err, ErrNotThread) {
					t.Errorf("err %v is not ErrNotThread", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got map[string]any
			if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
				t.Fatal(err)
			}
			if got["type"] != "action_required" || got["title"] != "Send the email?" || len(got["elements"].([]any)) != 2 ||
				w.Header().Get("Content-Type") != "application/json" {
				t.Errorf("wrote %s", w.Body)
			}
		})
	}
}

// Behind a Verifier's Middleware the component knows its own name: a
// button on another component is refused.
func TestWriteCardOwnComponent(t *testing.T) {
	card := func(component string) Card {
		return Card{Title: "t", Elements: []Button{{Type: "button", ID: "x", Label: "X",
			Target: jsontext.Value(`{"type":"app","component":"` + component + `","method":"DELETE","path":"/data"}`)}}}
	}
	verified := func() *http.Request {
		r := httptest.NewRequest("POST", "/x", nil)
		r.Header.Set(ContextHeader, `{"source":"thread","threadId":"th_1"}`)
		return r.WithContext(context.WithValue(r.Context(), identityKey{}, Identity{User: "u_1", Component: "mail"}))
	}
	w := httptest.NewRecorder()
	if err := WriteCard(w, verified(), card("files")); err == nil || !strings.Contains(err.Error(), `component "files": a button runs on component "mail"`) || w.Body.Len() != 0 {
		t.Errorf("a button on another component: %v, wrote %q", err, w.Body)
	}
	w = httptest.NewRecorder()
	if err := WriteCard(w, verified(), card("mail")); err != nil || w.Code != 200 {
		t.Errorf("a button on the own component: %v, %d", err, w.Code)
	}
}
