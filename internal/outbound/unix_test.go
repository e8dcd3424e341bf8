package outbound_test

import (
	"context"
	"errors"
	"github.com/go-json-experiment/json/jsontext"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/toolgate/toolgate/internal/dispatch"
	"github.com/toolgate/toolgate/internal/outbound"
)

// unixServer runs srv on a unix socket in a temporary folder and returns
// the socket's path.
func unixServer(t *testing.T, srv *http.Server) string {
	t.Helper()
	// A socket path is limited to about 100 bytes; t.TempDir holds the
	// test's name and may be longer.
	dir, err := os.MkdirTemp("", "tg")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "api.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return path
}

// seen records the requests a server got.
type seen struct {
	mu   sync.Mutex
	reqs []string // "host path"
}

func (s *seen) handler(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.reqs = append(s.reqs, r.Host+" "+r.URL.EscapedPath())
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"content":"ok"}`))
}

func (s *seen) all() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.reqs...)
}

// TestUnixComponentStaysOnItsSocket sends app targets of a component on a
// unix socket, with inputs that try to name another listener, beside a TCP
// listener they try to reach. Each call is refused or reaches the socket,
// with its value inside the path and Host localhost; the TCP listener gets
// only the url target that names it, before and after the socket's calls.
func TestUnixComponentStaysOnItsSocket(t *testing.T) {
	var onSocket seen
	sock := unixServer(t, &http.Server{Handler: http.HandlerFunc(onSocket.handler)})
	var tcpHits atomic.Int32
	tcp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tcpHits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"content":"tcp"}`))
	}))
	defer tcp.Close()
	tcpAddr := strings.TrimPrefix(tcp.URL, "http://")

	api, err := dispatch.NewComponent("api", "unix/"+sock, map[string]string{"K": "v"})
	if err != nil {
		t.Fatal(err)
	}
	comps := map[string]*dispatch.Component{"api": api}
	app, err := dispatch.Compile(dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/items/${input.id}"}, dispatch.Env{Components: comps})
	if err != nil {
		t.Fatal(err)
	}
	// A url target may name a socket component for its env: it still goes
	// where its URL says.
	external, err := dispatch.Compile(dispatch.Spec{Type: "url", Component: "api", Method: "GET", URL: tcp.URL + "/x/${env.K}"}, dispatch.Env{Components: comps})
	if err != nil {
		t.Fatal(err)
	}
	client := outbound.NewClient(0, 0)
	defer client.CloseIdleConnections()
	send := func(t *testing.T, target *dispatch.Target, input any) (*outbound.Response, error) {
		t.Helper()
		req, err := target.Request(context.Background(), input, nil)
		if err != nil {
			return nil, err
		}
		return client.Do(req)
	}

	if resp, err := send(t, external, nil); err != nil || string(resp.Body) != `{"content":"tcp"}` {
		t.Fatalf("url target before: %v %v", resp, err)
	}
	for _, tt := range []struct {
		id       string
		wantPath string // empty: refused when built
	}{
		{"b1", "/items/b1"},
		{"@" + tcpAddr, "/items/@" + tcpAddr},
		{"@evil", "/items/@evil"},
		{tcpAddr, "/items/" + tcpAddr},
		{"..", ""},
		{"../x", ""},
		{"%2F", ""},
		{"%2F%2Fevil", ""},
		{"//evil/", ""},
		{"//" + tcpAddr + "/", ""},
		{"a\\b", ""},
		{"http://" + tcpAddr, ""},
	} {
		t.Run(tt.id, func(t *testing.T) {
			before := len(onSocket.all())
			resp, err := send(t, app, map[string]any{"id": tt.id})
			if tt.wantPath == "" {
				if err == nil {
					t.Fatalf("sent, got %d %s; want refused", resp.Status, resp.Body)
				}
				if n := len(onSocket.all()); n != before {
					t.Errorf("refused, yet the socket got a request")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(resp.Body) != `{"content":"ok"}` {
				t.Errorf("answer %s, want the socket's", resp.Body)
			}
			got := onSocket.all()
			if len(got) != before+1 || got[before] != "localhost "+tt.wantPath {
				t.Errorf("socket got %q, want one more: %q", got[before:], "localhost "+tt.wantPath)
			}
		})
	}
	if resp, err := send(t, external, nil); err != nil || string(resp.Body) != `{"content":"tcp"}` {
		t.Fatalf("url target after: %v %v", resp, err)
	}
	if n := tcpHits.Load(); n != 2 {
		t.Errorf("the TCP listener got %d requests, want the url target's 2", n)
	}
}

// TestUnixComponentButton runs a card's button on a socket component: it
// goes to the socket, as the component's own targets do.
func TestUnixComponentButton(t *testing.T) {
	var onSocket seen
	sock := unixServer(t, &http.Server{Handler: http.HandlerFunc(onSocket.handler)})
	api, err := dispatch.NewComponent("api", "unix/"+sock, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := dispatch.CompileButton(jsontext.Value(`{"type":"app","component":"api","method":"POST","path":"/done/${input.id}"}`), api)
	if err != nil {
		t.Fatal(err)
	}
	req, err := b.Request(context.Background(), map[string]any{"id": "7"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	client := outbound.NewClient(0, 0)
	defer client.CloseIdleConnections()
	if _, err := client.Do(req); err != nil {
		t.Fatal(err)
	}
	if got := onSocket.all(); len(got) != 1 || got[0] != "localhost /done/7" {
		t.Errorf("socket got %q, want [localhost /done/7]", got)
	}
}

// TestUnixComponentDown reports a missing socket as unreachable: nothing
// was sent, the call did not run.
func TestUnixComponentDown(t *testing.T) {
	api, err := dispatch.NewComponent("api", "unix/"+filepath.Join(t.TempDir(), "none.sock"), nil)
	if err != nil {
		t.Fatal(err)
	}
	app, err := dispatch.Compile(dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/x"}, dispatch.Env{Components: map[string]*dispatch.Component{"api": api}})
	if err != nil {
		t.Fatal(err)
	}
	req, err := app.Request(context.Background(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = outbound.NewClient(0, 0).Do(req)
	if e := (*outbound.Error)(nil); !errors.As(err, &e) || e.Kind != "unreachable" {
		t.Errorf("Do = %v, want an unreachable error", err)
	}
}

// TestUnixComponentKeepsItsConnection sends calls one after another to a
// socket component: they share one connection, as calls to a TCP host do,
// rather than dialing the socket for each.
func TestUnixComponentKeepsItsConnection(t *testing.T) {
	var conns atomic.Int32
	sock := unixServer(t, &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(`{"content":"ok"}`)) }),
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				conns.Add(1)
			}
		},
	})

	api, err := dispatch.NewComponent("api", "unix/"+sock, nil)
	if err != nil {
		t.Fatal(err)
	}
	app, err := dispatch.Compile(dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/x"}, dispatch.Env{Components: map[string]*dispatch.Component{"api": api}})
	if err != nil {
		t.Fatal(err)
	}
	client := outbound.NewClient(0, 0)
	defer client.CloseIdleConnections()
	for range 20 {
		req, err := app.Request(context.Background(), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := client.Do(req); err != nil {
			t.Fatal(err)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("20 calls opened %d connections, want 1", n)
	}
}

// BenchmarkDoSocket sends an app target's request and reads its 1 KiB
// answer, over loopback TCP and over a unix socket, to the same handler:
// what the socket saves per call.
func BenchmarkDoSocket(b *testing.B) {
	answer := []byte(`{"content":"` + strings.Repeat("x", 1024-len(`{"content":""}`)) + `"}`)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(answer)
	})
	tcp := httptest.NewServer(h)
	defer tcp.Close()
	dir, err := os.MkdirTemp("", "tg")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "api.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(l)
	defer srv.Close()

	for _, c := range []struct{ name, addr string }{{"tcp", tcp.URL}, {"unix", "unix/" + sock}} {
		b.Run(c.name, func(b *testing.B) {
			api, err := dispatch.NewComponent("api", c.addr, nil)
			if err != nil {
				b.Fatal(err)
			}
			app, err := dispatch.Compile(dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/items/${input.id}"}, dispatch.Env{Components: map[string]*dispatch.Component{"api": api}})
			if err != nil {
				b.Fatal(err)
			}
			client := outbound.NewClient(0, 0)
			defer client.CloseIdleConnections()
			input := map[string]any{"id": "b1"}
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					req, err := app.Request(context.Background(), input, nil)
					if err != nil {
						b.Fatal(err)
					}
					if _, err := client.Do(req); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}
