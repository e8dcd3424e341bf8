package dispatch_test

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/dispatch"
)

func opTarget(t *testing.T, s dispatch.Spec) (*dispatch.Target, error) {
	t.Helper()
	return dispatch.Compile(s, dispatch.Env{Components: testComponents(t)})
}

// TestOperationRequest: an operation's target sends each parameter where
// the operation says, serialized by its style, and the body as its media
// type says; what the input does not hold is not sent.
func TestOperationRequest(t *testing.T) {
	f, tr := false, true
	op := &dispatch.Operation{
		Params: []dispatch.OperationParam{
			{Name: "id", In: "path", Group: "path"},
			{Name: "id", In: "query", Group: "query"},
			{Name: "tags", In: "query", Explode: &f, Group: "query"},
			{Name: "filter", In: "query", Style: "deepObject", Explode: &tr, Group: "query"},
			{Name: "X-Trace", In: "header", Group: "header"},
			{Name: "session", In: "cookie", Group: "cookie"},
			{Name: "lang", In: "cookie", Group: "cookie"},
		},
		Body: &dispatch.OperationBody{MediaType: "application/json", Property: "body"},
	}
	tgt, err := opTarget(t, dispatch.Spec{Type: "app", Component: "api", Method: "PUT", Path: "/items/{id}/full", Operation: op,
		Headers: map[string]string{"X-Static": "s"}})
	if err != nil {
		t.Fatal(err)
	}
	req, err := tgt.Request(context.Background(), decode(t, `{"path":{"id":"a b/c"},"query":{"id":3,"tags":["red","x y"],"filter":{"min":1}},"header":{"X-Trace":"t1"},"cookie":{"session":"s=1"},"body":{"name":"n","n":1.50}}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(req.Body)
	for got, want := range map[string]string{
		req.Method:                     "PUT",
		req.URL.EscapedPath():          "/base/items/a%20b%2Fc/full",
		req.URL.RawQuery:               "id=3&tags=red,x%20y&filter%5Bmin%5D=1",
		req.Header.Get("X-Trace"):      "t1",
		req.Header.Get("X-Static"):     "s",
		req.Header.Get("Cookie"):       "session=s%3D1",
		req.Header.Get("Content-Type"): "application/json",
		string(body):                   `{"n":1.50,"name":"n"}`,
	} {
		if got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}

	// Optional parameters and the body left out are not sent.
	req, err = tgt.Request(context.Background(), decode(t, `{"path":{"id":"7"}}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if req.URL.RawQuery != "" || req.Header.Get("Cookie") != "" || req.Body != nil || req.Header.Get("Content-Type") != "" {
		t.Errorf("an input of the path alone sent %s %v", req.URL, req.Header)
	}
	// A path value that would be a dot segment is refused.
	for _, id := range []string{"..", "."} {
		if _, err := tgt.Request(context.Background(), decode(t, `{"path":{"id":"`+id+`"}}`), nil); err == nil {
			t.Errorf("path id %q was sent", id)
		}
	}
}

func TestOperationForm(t *testing.T) {
	tgt, err := opTarget(t, dispatch.Spec{Type: "url", Method: "POST", URL: "https://api.example/v1/forms/{kind}",
		Operation: &dispatch.Operation{
			Params: []dispatch.OperationParam{{Name: "kind", In: "path", Style: "label"}},
			Body:   &dispatch.OperationBody{MediaType: "application/x-www-form-urlencoded", Property: "body"},
		}})
	if err != nil {
		t.Fatal(err)
	}
	req, err := tgt.Request(context.Background(), decode(t, `{"kind":"a","body":{"b":"x&y","a":[1,2]}}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(req.Body)
	if req.URL.String() != "https://api.example/v1/forms/.a" || string(body) != "a=1&a=2&b=x%26y" || req.Header.Get("Content-Type") != "application/x-www-form-urlencoded" {
		t.Errorf("sent %s %q %s", req.URL, body, req.Header.Get("Content-Type"))
	}
}

// TestOperationCompile: the template and the operation must agree, and
// an operation's target has no query or body of its own.
func TestOperationCompile(t *testing.T) {
	id := []dispatch.OperationParam{{Name: "id", In: "path"}}
	for _, c := range []struct {
		name string
		spec dispatch.Spec
		err  string
	}{
		{"slot without parameter", dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/x/{nope}", Operation: &dispatch.Operation{Params: id}}, "{nope} is no path parameter"},
		{"parameter without slot", dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/x", Operation: &dispatch.Operation{Params: id}}, "has no {id}"},
		{"unclosed", dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/x/{id", Operation: &dispatch.Operation{Params: id}}, "without its }"},
		{"relative path", dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "x/{id}", Operation: &dispatch.Operation{Params: id}}, "must start with /"},
		{"host from input", dispatch.Spec{Type: "url", Method: "GET", URL: "https://{id}.example/", Operation: &dispatch.Operation{Params: id}}, "may not fill the scheme, host or port"},
		{"query beside", dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/x/{id}", Query: map[string]string{"a": "b"}, Operation: &dispatch.Operation{Params: id}}, "takes its query and body from the operation"},
		{"bad style", dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/x", Operation: &dispatch.Operation{Params: []dispatch.OperationParam{{Name: "q", In: "query", Style: "matrix"}}}}, "matrix"},
		{"bad body", dispatch.Spec{Type: "app", Component: "api", Method: "POST", Path: "/x", Operation: &dispatch.Operation{Body: &dispatch.OperationBody{MediaType: "text/plain", Property: "body"}}}, "JSON or form"},
		{"on a client tool", dispatch.Spec{Type: "kazzle", Name: "x", Operation: &dispatch.Operation{}}, "only name may be set"},
		{"dot segment", dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/../{id}", Operation: &dispatch.Operation{Params: id}}, "dot segments"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := opTarget(t, c.spec); err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("Compile: %v, want %q", err, c.err)
			}
		})
	}
}

// BenchmarkOperationRequest builds an operation's request against the
// same call written with references: what an imported tool costs a call
// over a tool written by hand.
func BenchmarkOperationRequest(b *testing.B) {
	comps := testComponents(b)
	op, err := dispatch.Compile(dispatch.Spec{Type: "app", Component: "api", Method: "PUT", Path: "/items/{id}",
		Operation: &dispatch.Operation{
			Params: []dispatch.OperationParam{{Name: "id", In: "path"}, {Name: "n", In: "query"}},
			Body:   &dispatch.OperationBody{MediaType: "application/json", Property: "body"},
		}}, dispatch.Env{Components: comps})
	if err != nil {
		b.Fatal(err)
	}
	refs, err := dispatch.Compile(dispatch.Spec{Type: "app", Component: "api", Method: "PUT", Path: "/items/${input.id}",
		Query: map[string]string{"n": "${input.n}"}, Body: []byte(`"${input.body}"`)}, dispatch.Env{Components: comps})
	if err != nil {
		b.Fatal(err)
	}
	input := decode(b, `{"id":"a1","n":3,"body":{"name":"rex","tags":["a","b"]}}`)
	for name, tgt := range map[string]*dispatch.Target{"operation": op, "references": refs} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := tgt.Request(context.Background(), input, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
