package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// caddyVersion is the Caddy release the module is built and tested against.
const caddyVersion = "v2.11.9"

// TestXcaddyBuild builds stock Caddy with the module from this checkout, as
// a user does with xcaddy, and checks that the module is in it and that the
// quick-start Caddyfile adapts without an order line. It first builds plain
// Caddy to warm the module cache, then builds offline: the module proxy
// does not know our module path.
func TestXcaddyBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds Caddy twice; skipped in -short mode")
	}
	xcaddy, err := exec.LookPath("xcaddy")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("xcaddy is not installed; .ci/run installs it")
		}
		t.Skip("xcaddy is not installed (go install github.com/caddyserver/xcaddy/cmd/xcaddy@v0.4.5)")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	run := func(env []string, args ...string) string {
		t.Helper()
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Dir = out
		cmd.Env = append(os.Environ(), env...)
		b, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, b)
		}
		return string(b)
	}

	run(nil, xcaddy, "build", caddyVersion, "--output", filepath.Join(out, "caddy-plain"))
	bin := filepath.Join(out, "caddy")
	run([]string{"GOPROXY=off", "GOSUMDB=off"}, xcaddy, "build", caddyVersion,
		"--with", "github.com/toolgate/toolgate/caddymodule",
		"--replace", "github.com/toolgate/toolgate="+root,
		"--output", bin)

	if mods := run(nil, bin, "list-modules"); !strings.Contains(mods, "http.handlers.toolgate") {
		t.Fatalf("http.handlers.toolgate is not in the built Caddy:\n%s", mods)
	}
	cmd := exec.Command(bin, "adapt", "--config", filepath.Join(root, "Caddyfile.example"), "--adapter", "caddyfile")
	cmd.Dir = root
	b, err := cmd.Output()
	if err != nil || !strings.Contains(string(b), `"handler":"toolgate"`) {
		t.Fatalf("adapting Caddyfile.example: %v\n%s", err, b)
	}
}
