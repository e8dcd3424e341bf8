package result_test

import (
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/result"
)

func TestFromOperation(t *testing.T) {
	for _, c := range []struct {
		name        string
		status      int
		ctype, body string
		out         result.Output
		content     string
		structured  string
		isError     bool
	}{
		{"object with a schema", 200, "application/json", `{ "id": 1, "name": "rex" }`, result.OutputObject, `{"id":1,"name":"rex"}`, `{"id":1,"name":"rex"}`, false},
		{"array with a schema", 200, "application/json", `[1, 2]`, result.OutputWrapped, `[1,2]`, `{"result":[1,2]}`, false},
		{"no schema", 200, "application/json", `{"id":1}`, result.OutputNone, `{"id":1}`, ``, false},
		{"the channels' shape", 200, "application/json", `{"content":"saved","markdown":"**saved**"}`, result.OutputObject, `saved`, ``, false},
		{"text", 200, "text/plain", `hello`, result.OutputObject, `hello`, ``, false},
		{"problem", 404, "application/problem+json", `{"type":"about:blank","title":"Not Found","detail":"no pet 7","status":404}`, result.OutputObject, `handler answered 404: Not Found: no pet 7`, ``, true},
		{"problem without title", 409, "application/problem+json; charset=utf-8", `{"detail":"taken"}`, result.OutputNone, `handler answered 409: taken`, ``, true},
		{"plain error", 500, "application/json", `{"code":"x","error":"boom"}`, result.OutputNone, `handler answered 500 Internal Server Error: x: boom`, ``, true},
		{"invalid JSON", 200, "application/json", `{`, result.OutputObject, `handler answered invalid JSON`, ``, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, card := result.FromOperation(c.status, c.ctype, []byte(c.body), c.out)
			if card || r.IsError != c.isError || !strings.HasPrefix(r.Content, c.content) || string(r.Structured) != c.structured {
				t.Errorf("got %+v (structured %s, card %v)", r, r.Structured, card)
			}
		})
	}
}
