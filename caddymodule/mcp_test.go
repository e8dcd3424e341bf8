package caddymodule

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddytest"

	"github.com/toolgate/toolgate/internal/apitest"
)

const mcpEndpoint = base + "/mcp"

// mcpConfig is testConfig with one more manifest: a tool with MCP
// annotations. extra lines go into the toolgate block.
func mcpConfig(t *testing.T, upstream, dir string, extra ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "annotated.json")
	if err := os.WriteFile(path, []byte(apitest.AnnotatedManifest), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t, upstream, dir)
	inner := "toolgate {\n\t\t\tmanifest " + path + "\n"
	for _, e := range extra {
		inner += "\t\t\t" + e + "\n"
	}
	out := strings.Replace(cfg, "toolgate {\n", inner, 1)
	if out == cfg {
		t.Fatal("mcpConfig: no toolgate block to extend")
	}
	return out
}

func startMCPGateway(t *testing.T, extra ...string) (*caddytest.Tester, *apitest.Recorder) {
	rec := apitest.NewRecorder(t)
	tc := caddytest.NewTester(t)
	initServer(tc, mcpConfig(t, rec.URL, dataDir(t), extra...))
	return tc, rec
}
