package apptools

import (
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestWriteCard(t *testing.T) {
	good := Card{
		Title:       "Send the email?",
		Description: "To ada@example.com",
		Elements: []Button{
			{Type: "button", ID: "send", Label: "Send", Input: json.RawMessage(`{"content":"sent"}`)},
			{Type: "button", ID: "edit", Label: "Edit", Target: json.RawMessage(`{"type":"app","component":"mail","method":"POST","path":"/drafts"}`)},
		},
	}
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
