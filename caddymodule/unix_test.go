package caddymodule

import (
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/caddyserver/caddy/v2/caddytest"
	"github.com/go-json-experiment/json"

	"github.com/toolgate/toolgate/internal/apitest"
)

// socketRecorder is a component on a unix socket that records what it is
// sent.
type socketRecorder struct {
	mu   sync.Mutex
	reqs []*http.Request
}

func (s *socketRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.reqs = append(s.reqs, r)
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"content":"from the socket"}`))
}

func (s *socketRecorder) all() []*http.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*http.Request(nil), s.reqs...)
}

// TestUnixSocketComponent runs a tool on a component that listens on a
// unix socket (`component api unix//PATH`): the call reaches the socket with
// the identity token and context a TCP component gets, Host localhost; an
// input that names a TCP listener stays in the path or is refused, and the
// listener gets nothing.
func TestUnixSocketComponent(t *testing.T) {
	dir := dataDir(t)
	sock := filepath.Join(dir, "api.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	var rec socketRecorder
	srv := &http.Server{Handler: &rec}
	go srv.Serve(l)
	defer srv.Close()
	var tcpHits atomic.Int32
	tcp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { tcpHits.Add(1) }))
	defer tcp.Close()
	tcpAddr := strings.TrimPrefix(tcp.URL, "http://")

	tc := caddytest.NewTester(t)
	initServer(tc, testGlobals(dir)+`http://127.0.0.1:9080 {
	bind 127.0.0.1
	handle_path /toolgate/* {
		toolgate {
			component api unix/`+sock+`
			identity {
				issuer https://tools.test
			}
			ledger off
			tool get_item {
				description "Get an item."
				input_schema `+"`"+`{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}`+"`"+`
				target app api GET /items/${input.id}
			}
		}
	}
}`)

	status, a := client(tc).Invoke(t, "get_item", `{"input":{"id":"b1"},"context":{"source":"thread","threadId":"th_1"},`+apitest.Who+`}`)
	if status != 200 || a.IsError || a.Content != "from the socket" {
		t.Fatalf("answer %d %+v", status, a)
	}
	got := rec.all()
	if len(got) != 1 || got[0].Host != "localhost" || got[0].URL.EscapedPath() != "/items/b1" {
		t.Fatalf("the socket got %d requests, the first %s %s", len(got), got[0].Host, got[0].URL)
	}
	claims := client(tc).VerifyWithJWKS(t, strings.TrimPrefix(got[0].Header.Get("Authorization"), "Bearer "))
	if claims["aud"] != "api" || claims["sub"] != "u_1" {
		t.Errorf("claims %v", claims)
	}
	var ctx map[string]string
	if err := json.Unmarshal([]byte(got[0].Header.Get("Kazzle-Tool-Context")), &ctx); err != nil || ctx["source"] != "thread" || ctx["threadId"] != "th_1" {
		t.Errorf("Kazzle-Tool-Context %q", got[0].Header.Get("Kazzle-Tool-Context"))
	}

	for _, c := range []struct {
		id   string
		path string // empty: refused before anything is sent
	}{
		{"@" + tcpAddr, "/items/@" + tcpAddr},
		{tcpAddr, "/items/" + tcpAddr},
		{"//" + tcpAddr + "/", ""},
		{"%2F%2F" + tcpAddr, ""},
		{"../" + tcpAddr, ""},
		{"http://" + tcpAddr + "/", ""},
	} {
		before := len(rec.all())
		in, _ := json.Marshal(c.id)
		status, a := client(tc).Invoke(t, "get_item", `{"input":{"id":`+string(in)+`},`+apitest.Who+`}`)
		after := rec.all()
		switch {
		case status != 200:
			t.Errorf("%q: status %d", c.id, status)
		case c.path == "" && (!a.IsError || len(after) != before):
			t.Errorf("%q: want refused with nothing sent; got %+v, %d requests on the socket", c.id, a, len(after)-before)
		case c.path != "" && (a.IsError || len(after) != before+1 || after[before].URL.EscapedPath() != c.path || after[before].Host != "localhost"):
			t.Errorf("%q: want sent to the socket as localhost %s; got %+v", c.id, c.path, a)
		}
	}
	if n := tcpHits.Load(); n != 0 {
		t.Errorf("the TCP listener got %d requests, want 0", n)
	}
}
