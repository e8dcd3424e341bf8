package caddymodule

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddytest"
)

// TestCaddyfileAdapt checks `caddy adapt` output against golden files: a
// Caddyfile, a line of dashes, and the JSON it must adapt to.
func TestCaddyfileAdapt(t *testing.T) {
	files, err := filepath.Glob("testdata/caddyfile_adapt/*.caddyfiletest")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden files: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			caddyfile, expected, ok := strings.Cut(string(data), "----------")
			if !ok {
				t.Fatalf("%s has no ---------- separator", f)
			}
			caddytest.AssertAdapt(t, strings.TrimSpace(caddyfile)+"\n", "caddyfile", strings.TrimSpace(expected))
		})
	}
}

// TestExampleKeepsSecretsOut adapts Caddyfile.example with every variable
// it reads set to a marker: none may reach the JSON, which Caddy's admin
// API serves to anyone who can reach it and which autosave writes to disk.
// {$NAME} is substituted when the Caddyfile is adapted; {env.NAME} when
// the config loads.
func TestExampleKeepsSecretsOut(t *testing.T) {
	src, err := os.ReadFile("../Caddyfile.example")
	if err != nil {
		t.Fatal(err)
	}
	const marker = "example-secret-marker-4f1c"
	for _, name := range []string{"TOOLGATE_PAGE_SECRET", "TOOLGATE_CALLER_SECRET", "REDIS_PASSWORD"} {
		t.Setenv(name, marker)
	}
	// Only ports are substituted at adapt time ({$TOOLGATE_PORT:8080}).
	adaptTime := regexp.MustCompile(`\{\$([A-Z0-9_]*)`)
	for _, line := range strings.Split(string(src), "\n") {
		code, _, _ := strings.Cut(line, "#")
		for _, m := range adaptTime.FindAllStringSubmatch(code, -1) {
			if !strings.HasSuffix(m[1], "_PORT") {
				t.Errorf("Caddyfile.example substitutes %s at adapt time: %s", m[1], strings.TrimSpace(line))
			}
		}
	}
	adapter := caddyconfig.GetAdapter("caddyfile")
	out, warnings, err := adapter.Adapt(src, map[string]any{"filename": "Caddyfile.example"})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range warnings {
		t.Logf("warning: %s", w.Message)
	}
	if strings.Contains(string(out), marker) {
		t.Errorf("a secret reached the adapted JSON:\n%s", out)
	}
	if !strings.Contains(string(out), `{env.TOOLGATE_PAGE_SECRET}`) {
		t.Errorf("the page secret is not read from the environment at load:\n%s", out)
	}
}
