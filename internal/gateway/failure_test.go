package gateway

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/toolgate/toolgate/internal/dispatch"
	"github.com/toolgate/toolgate/internal/identity"
	"github.com/toolgate/toolgate/internal/manifest"
	"github.com/toolgate/toolgate/internal/outbound"
)

// TestFailingAnswerForTheModel: an upstream's error page, stack trace
// included, reaches the model as the status and its message (the first
// line, at most 200 characters); the body itself goes to the log.
func TestFailingAnswerForTheModel(t *testing.T) {
	trace := "Error: connect ECONNREFUSED 10.0.0.7:5432\n    at TCPConnectWrap.afterConnect (node:net:1607:16)\n    at /srv/app/db.js:88:11\n"
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte(trace))
	}))
	t.Cleanup(up.Close)
	comp, err := dispatch.NewComponent("api", up.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	set, err := manifest.Compile([]manifest.Source{{Name: "test", Tools: []manifest.Tool{
		{Name: "db", Description: "d", InputSchema: []byte(`{"type":"object"}`), Target: dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/db"}},
	}}}, map[string]*dispatch.Component{"api": comp})
	if err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zapcore.InfoLevel)
	key, _ := identity.GenerateKey()
	gw := New(Config{Tools: set, Issuer: identity.NewIssuer("gw", time.Minute, key), Client: outbound.NewClient(time.Second, 1<<20), Logger: zap.New(core)})

	a, err := gw.Invoke(context.Background(), Call{Tool: "db", CallID: "c1", Identity: Identity{User: "u_1"}})
	if err != nil {
		t.Fatal(err)
	}
	if want := "handler answered 500 Internal Server Error: Error: connect ECONNREFUSED 10.0.0.7:5432"; !a.IsError || a.Content != want {
		t.Errorf("the model reads %q, want %q", a.Content, want)
	}
	logged := logs.FilterMessage("upstream answered an error").All()
	if len(logged) != 1 {
		t.Fatalf("logged %v", logs.All())
	}
	f := logged[0].ContextMap()
	if f["body"] != trace || f["status"] != int64(500) || f["tool"] != "db" || f["call_id"] != "c1" || !strings.Contains(f["target"].(string), "/db") {
		t.Errorf("log fields %v", f)
	}
}
