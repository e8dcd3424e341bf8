package caddymodule

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"go.uber.org/zap"

	"github.com/toolgate/toolgate/internal/dispatch"
	"github.com/toolgate/toolgate/internal/manifest"
)

// provisioned builds a handler with the given tools against upstream,
// ledger off, with limits large enough for 1 MiB inputs and answers.
func provisioned(b *testing.B, upstream string, tools []manifest.Tool) *Handler {
	b.Helper()
	h := &Handler{
		Components:      map[string]*Component{"api": {BaseURL: upstream}},
		Identity:        &Identity{KeyFile: writeKey(b)},
		Ledger:          &Ledger{Backend: "off"},
		MaxRequestSize:  4 << 20,
		MaxResponseSize: 4 << 20,
		Tools:           tools,
	}
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	b.Cleanup(cancel)
	if err := h.provision(ctx, zap.NewNop()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = h.Cleanup() })
	return h
}

func echoTool(name string) manifest.Tool {
	return manifest.Tool{
		Name: name, Description: "Echo a note.",
		InputSchema: jsontext.Value(`{"type":"object","properties":{"note":{"type":"string"}},"required":["note"],"additionalProperties":false}`),
		Target:      dispatch.Spec{Type: "app", Component: "api", Method: "POST", Path: "/echo", Body: jsontext.Value(`"${input}"`)},
	}
}

// BenchmarkInvokeSize is the cost of one call as its input and its answer
// grow together: 1 KiB, 64 KiB, 1 MiB.
func BenchmarkInvokeSize(b *testing.B) {
	for _, size := range []int{1 << 10, 64 << 10, 1 << 20} {
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) {
			answer, _ := json.Marshal(map[string]string{"content": strings.Repeat("y", size)})
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write(answer)
			}))
			defer up.Close()
			h := provisioned(b, up.URL, []manifest.Tool{echoTool("echo")})
			body := `{"input":{"note":"` + strings.Repeat("x", size) + `"},"identity":{"user":"u_1"}}`
			b.SetBytes(int64(2 * size))
			serve(b, h, "POST", "/tools/echo", body)
		})
	}
}

// BenchmarkManifestScale reports load time and the per-call cost of lookup
// (an invoke) and of the tool list as the manifest grows.
func BenchmarkManifestScale(b *testing.B) {
	up := benchUpstream(b)
	for _, n := range []int{10, 1000, 10000} {
		tools := make([]manifest.Tool, n)
		for i := range tools {
			tools[i] = echoTool(fmt.Sprintf("tool_%05d", i))
			tools[i].Target = dispatch.Spec{Type: "app", Component: "api", Method: "GET", Path: "/items/x"}
		}
		start := time.Now()
		h := provisioned(b, up.URL, tools)
		load := time.Since(start)
		name := fmt.Sprintf("tool_%05d", n/2)
		b.Run(fmt.Sprintf("tools=%d/invoke", n), func(b *testing.B) {
			serve(b, h, "POST", "/tools/"+name, `{"input":{"note":"n"},"identity":{"user":"u_1"}}`)
			b.ReportMetric(float64(load.Microseconds())/1000, "load-ms")
		})
		b.Run(fmt.Sprintf("tools=%d/list", n), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				req := httptest.NewRequest("GET", "/tools", nil)
				req.RemoteAddr = "127.0.0.1:40000"
				req.Host = "127.0.0.1"
				w := httptest.NewRecorder()
				if err := h.ServeHTTP(w, req, nextHandler{}); err != nil || w.Code != 200 {
					b.Fatalf("%v %d", err, w.Code)
				}
			}
		})
	}
}
