package caddymodule

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddytest"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/toolgate/toolgate/internal/dispatch"
	"github.com/toolgate/toolgate/internal/identity"
	"github.com/toolgate/toolgate/internal/manifest"
)

// benchUpstream answers every request with a 1 KiB JSON tool result.
func benchUpstream(b *testing.B) *httptest.Server {
	body, _ := json.Marshal(map[string]string{"content": strings.Repeat("x", 1024-len(`{"content":""}`))})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}))
	b.Cleanup(srv.Close)
	return srv
}

type nextHandler struct{}

func (nextHandler) ServeHTTP(http.ResponseWriter, *http.Request) error { return nil }

// cpuPerOp resets b's timer and reports, when b ends, the process's CPU
// time per iteration (cpu-µs/op, as BenchmarkServer's), all goroutines
// and the garbage collector included: on a machine shared with other
// work, wall time per iteration measures the other work as well; CPU time
// mostly does not. The benchmarks' upstream runs in the process too, the
// same in each.
func cpuPerOp(b *testing.B) {
	b.ReportAllocs()
	b.ResetTimer()
	start := cpuTime()
	b.Cleanup(func() {
		b.ReportMetric(float64((cpuTime()-start).Nanoseconds())/1e3/float64(b.N), "cpu-µs/op")
	})
}

func serve(b *testing.B, h caddyhttp.MiddlewareHandler, method, target, body string) {
	b.Helper()
	cpuPerOp(b)
	for i := 0; i < b.N; i++ {
		req := httptest.NewRequest(method, target, strings.NewReader(body))
		req.RemoteAddr = "127.0.0.1:40000"
		req.Host = "127.0.0.1"
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		w := httptest.NewRecorder()
		req = caddyhttp.PrepareRequest(req, caddy.NewReplacer(), w, nil)
		if err := h.ServeHTTP(w, req, nextHandler{}); err != nil {
			b.Fatal(err)
		}
		if w.Code != http.StatusOK || w.Body.Len() < 1024 {
			b.Fatalf("status %d: %s", w.Code, w.Body)
		}
	}
}

// writeKey writes a new identity key to a PEM file.
func writeKey(tb testing.TB) string {
	tb.Helper()
	key, err := identity.GenerateKey()
	if err != nil {
		tb.Fatal(err)
	}
	pemData, _ := key.MarshalPEM()
	keyFile := filepath.Join(tb.TempDir(), "key.pem")
	if err := os.WriteFile(keyFile, pemData, 0o600); err != nil {
		tb.Fatal(err)
	}
	return keyFile
}

// BenchmarkInvoke is one tool call through the handler: envelope decode,
// schema validation, references, a signed identity token, the upstream
// round trip on loopback, normalization and the answer. Compare it with
// BenchmarkReverseProxy, plain Caddy reverse_proxy to the same upstream in
// the same run. Its sub-benchmarks are the cost of observing: metrics off,
// on, and on with the call line written at info (JSON, to io.Discard).
func BenchmarkInvoke(b *testing.B) {
	up := benchUpstream(b)
	keyFile := writeKey(b)
	info := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(io.Discard), zap.InfoLevel))
	for _, c := range []struct {
		name   string
		off    bool
		logger *zap.Logger
	}{
		{"metrics_off", true, zap.NewNop()},
		{"metrics_on", false, zap.NewNop()},
		{"metrics_on_logged", false, info},
	} {
		b.Run(c.name, func(b *testing.B) {
			h := benchHandler(b, up.URL, keyFile, c.off, c.logger)
			serve(b, h, "POST", "/tools/get_item", `{"input":{"id":"b1"},"identity":{"user":"u_1","install":"in_1"}}`)
		})
	}
}

// benchHandler is the benchmarks' handler, provisioned: one app tool,
// get_item, on the upstream at upURL, and no ledger.
func benchHandler(b *testing.B, upURL, keyFile string, metricsOff bool, logger *zap.Logger) *Handler {
	h := &Handler{
		Components: map[string]*Component{"api": {BaseURL: upURL}},
		Identity:   &Identity{KeyFile: keyFile},
		Ledger:     &Ledger{Backend: "off"},
		Tools: []manifest.Tool{{
			Name:        "get_item",
			Description: "Get an item.",
			InputSchema: jsontext.Value(`{"type":"object","properties":{"id":{"type":"string"}},"required":["id"],"additionalProperties":false}`),
			Target:      dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/items/${input.id}"},
		}},
		DisableMetrics: metricsOff,
	}
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	b.Cleanup(cancel)
	if err := h.provision(ctx, logger); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = h.Cleanup() })
	return h
}

// BenchmarkServer runs toolgate and plain reverse_proxy side by side in one
// Caddy, in the same run, against the same upstream: the ratio of the two
// is the figure to report. Each iteration is one HTTP round trip from a
// keep-alive client. Caddy logs errors only: neither writes a line.
func BenchmarkServer(b *testing.B) {
	benchServer(b, b.TempDir(), "log {\n\t\tlevel ERROR\n\t}")
}

// BenchmarkServerInfo is BenchmarkServer at Caddy's default level, info,
// to a file (as a user's default, stderr, would cost): toolgate writes a
// line per call, reverse_proxy none (no access log).
func BenchmarkServerInfo(b *testing.B) {
	dir := b.TempDir()
	benchServer(b, dir, "log {\n\t\toutput file "+filepath.Join(dir, "caddy.log")+"\n\t\tlevel INFO\n\t}")
}

// benchServer runs BenchmarkServer's sites with the global log option
// logOpt, storage and ledger in dir.
func benchServer(b *testing.B, dir, logOpt string) {
	up := benchUpstream(b)
	tc := caddytest.NewTester(b)
	initServer(tc, testGlobals(dir, logOpt)+fmt.Sprintf(`http://127.0.0.1:9080 {
	bind 127.0.0.1
	handle_path /toolgate/* {
		toolgate {
			component api %[2]s
			ledger off
			tool get_item {
				description "Get an item."
				input_schema `+"`"+`{"type":"object","properties":{"id":{"type":"string"}},"required":["id"],"additionalProperties":false}`+"`"+`
				target app api GET /items/${input.id}
			}
		}
	}
	handle_path /bolt/* {
		toolgate {
			component api %[2]s
			ledger bolt %[1]s/ledger.db
			tool get_item {
				description "Get an item."
				input_schema `+"`"+`{"type":"object","properties":{"id":{"type":"string"}},"required":["id"],"additionalProperties":false}`+"`"+`
				target app api GET /items/${input.id}
			}
		}
	}
	handle_path /proxy/* {
		reverse_proxy %[3]s
	}
}`, dir, up.URL, strings.TrimPrefix(up.URL, "http://")))
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	do := func(b *testing.B, method, url, body string) {
		req, _ := http.NewRequest(method, url, strings.NewReader(body))
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || n < 1024 {
			b.Fatalf("status %d, %d bytes", resp.StatusCode, n)
		}
	}
	// run reports, beside the time, the process's CPU time (user and
	// system, the client's included) per request: on a shared machine it
	// moves less than the time does.
	run := func(b *testing.B, method, url, body string) {
		b.ReportAllocs()
		cpu0 := cpuTime()
		for i := 0; i < b.N; i++ {
			do(b, method, url, body)
		}
		b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
	}
	const (
		proxyURL = "http://127.0.0.1:9080/proxy/items/b1"
		toolURL  = "http://127.0.0.1:9080/toolgate/tools/get_item"
		envelope = `{"input":{"id":"b1"},"identity":{"user":"u_1","install":"in_1"}}`
	)
	b.Run("reverse_proxy", func(b *testing.B) {
		run(b, "GET", proxyURL, "")
	})
	b.Run("toolgate", func(b *testing.B) {
		run(b, "POST", toolURL, envelope)
	})
	b.Run("toolgate_bolt", func(b *testing.B) {
		run(b, "POST", "http://127.0.0.1:9080/bolt/tools/get_item", envelope)
	})
	// paired takes turns, one reverse_proxy request then one toolgate call,
	// so that drift in a shared machine falls on both alike, and reports
	// toolgate's throughput against reverse_proxy's (their time per
	// request, inverted) as tg/rp. paired_parallel does the same from 16
	// goroutines a core, the machine loaded as by wrk's 32 connections.
	paired := func(b *testing.B, parallel bool) {
		var rp, tg atomic.Int64
		one := func() {
			t0 := time.Now()
			do(b, "GET", proxyURL, "")
			t1 := time.Now()
			do(b, "POST", toolURL, envelope)
			rp.Add(int64(t1.Sub(t0)))
			tg.Add(int64(time.Since(t1)))
		}
		if parallel {
			b.SetParallelism(16)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					one()
				}
			})
		} else {
			for i := 0; i < b.N; i++ {
				one()
			}
		}
		b.ReportMetric(float64(rp.Load())/float64(tg.Load()), "tg/rp")
	}
	b.Run("paired", func(b *testing.B) { paired(b, false) })
	b.Run("paired_parallel", func(b *testing.B) { paired(b, true) })
}

// BenchmarkMCPCall is BenchmarkInvoke's call over MCP: tools/call of the
// same tool, for the same user (named in _meta), through the handler, on
// the sessionless revision (2026-07-28). Compare it with BenchmarkInvoke in
// the same run.
func BenchmarkMCPCall(b *testing.B) {
	up := benchUpstream(b)
	h := benchHandler(b, up.URL, writeKey(b), false, zap.NewNop())
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_item","arguments":{"id":"b1"},` +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"bench","version":"1"},"toolgate/identity":{"user":"u_1","install":"in_1"}}}}`
	cpuPerOp(b)
	for i := 0; i < b.N; i++ {
		req := httptest.NewRequest("POST", "/mcp", strings.NewReader(body))
		req.RemoteAddr = "127.0.0.1:40000"
		req.Host = "127.0.0.1"
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "tools/call")
		req.Header.Set("Mcp-Name", "get_item")
		w := httptest.NewRecorder()
		req = caddyhttp.PrepareRequest(req, caddy.NewReplacer(), w, nil)
		if err := h.ServeHTTP(w, req, nextHandler{}); err != nil {
			b.Fatal(err)
		}
		if w.Code != http.StatusOK || w.Body.Len() < 1024 || strings.Contains(w.Body.String(), `"isError":true`) {
			b.Fatalf("status %d: %.300s", w.Code, w.Body)
		}
	}
}

// BenchmarkMCPSessionCall is BenchmarkMCPCall on a session of the revision
// before the sessionless one (2025-11-25), through the SDK's streamable
// HTTP handler: the session is opened once (initialize, then
// notifications/initialized), and each iteration is one tools/call on it,
// with its Mcp-Session-Id. Compare it with BenchmarkInvoke in the same run.
func BenchmarkMCPSessionCall(b *testing.B) {
	up := benchUpstream(b)
	h := benchHandler(b, up.URL, writeKey(b), false, zap.NewNop())
	post := func(tb testing.TB, session, body string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", "/mcp", strings.NewReader(body))
		req.RemoteAddr = "127.0.0.1:40000"
		req.Host = "127.0.0.1"
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if session != "" {
			req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
			req.Header.Set("Mcp-Session-Id", session)
		}
		w := httptest.NewRecorder()
		req = caddyhttp.PrepareRequest(req, caddy.NewReplacer(), w, nil)
		if err := h.ServeHTTP(w, req, nextHandler{}); err != nil {
			tb.Fatal(err)
		}
		return w
	}
	w := post(b, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`)
	session := w.Header().Get("Mcp-Session-Id")
	if w.Code != http.StatusOK || session == "" {
		b.Fatalf("initialize: status %d, session %q: %.300s", w.Code, session, w.Body)
	}
	if w := post(b, session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); w.Code != http.StatusAccepted {
		b.Fatalf("initialized: status %d: %.300s", w.Code, w.Body)
	}
	body := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"get_item","arguments":{"id":"b1"},"_meta":{"toolgate/identity":{"user":"u_1","install":"in_1"}}}}`
	cpuPerOp(b)
	for i := 0; i < b.N; i++ {
		w := post(b, session, body)
		if w.Code != http.StatusOK || w.Body.Len() < 1024 || strings.Contains(w.Body.String(), `"isError":true`) {
			b.Fatalf("status %d: %.300s", w.Code, w.Body)
		}
	}
}
