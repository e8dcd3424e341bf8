package upstream_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/toolgate/toolgate/internal/dispatch"
	"github.com/toolgate/toolgate/internal/upstream"
	"github.com/toolgate/toolgate/internal/upstream/upstreamtest"
)

// BenchmarkCall is one tools/call through a Server, against the same
// call posted by hand (the floor: the server's own work and the HTTP
// round trip).
func BenchmarkCall(b *testing.B) {
	up := upstreamtest.New()
	url := up.Serve(b)
	s, err := upstream.New(upstream.Config{Name: "crm", URL: url}, upstream.Options{Authorization: authorization})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if err := s.Start(); err != nil {
		b.Fatal(err)
	}
	call := dispatch.MCPCall{Tool: "echo", Arguments: jsontext.Value(`{"text":"hello"}`), User: "u", IdempotencyKey: "k"}
	b.Run("server", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if out := s.Call(context.Background(), call); out.Result.Content != "hello" {
				b.Fatal(out.Result)
			}
		}
	})
	b.Run("by hand", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			resp, err := http.DefaultClient.Do(upstreamtest.SessionlessRequest(url, "echo", `{"text":"hello"}`))
			if err != nil {
				b.Fatal(err)
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if !bytes.Contains(raw, []byte("hello")) {
				b.Fatalf("%s", raw)
			}
		}
	})
}
