package main

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// readmeXcaddyLine is the README's xcaddy command: the first line in a code
// block of its Install section that starts with "xcaddy build". The test
// runs that line, so the README and the test cannot drift apart.
func readmeXcaddyLine(t *testing.T, root string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var inInstall, inCode bool
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "```"):
			inCode = !inCode
		case !inCode && strings.HasPrefix(line, "## "):
			inInstall = strings.TrimSpace(line) == "## Install"
		case inInstall && inCode && strings.HasPrefix(strings.TrimSpace(line), "xcaddy build"):
			return strings.TrimSpace(line)
		}
	}
	t.Fatal("README.md: no line starting with `xcaddy build` in a code block of the Install section")
	return ""
}

// TestXcaddyBuild runs the README's xcaddy command as a user does, from the
// checkout's root with the normal module proxy, with only --output added (a
// temporary folder outside the checkout). The built Caddy must have the
// module and adapt the quick-start Caddyfile without an order line, and the
// build must leave the checkout as it was.
func TestXcaddyBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds Caddy; skipped in -short mode")
	}
	xcaddy, err := exec.LookPath("xcaddy")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("xcaddy is not installed; make tools installs it")
		}
		t.Skip("xcaddy is not installed (go install github.com/caddyserver/xcaddy/cmd/xcaddy@v0.4.5)")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	line := readmeXcaddyLine(t, root)
	args := strings.Fields(line) // the README's line has no quoting
	for _, a := range args {
		if a == "--output" || a == "-o" {
			t.Fatalf("README's xcaddy line names its own --output: %s", line)
		}
	}
	gitStatus := func() string {
		t.Helper()
		cmd := exec.Command("git", "status", "--porcelain", "--ignored")
		cmd.Dir = root
		b, err := cmd.Output()
		if err != nil {
			t.Skipf("git status in %s: %v (not a git checkout?)", root, err)
		}
		return string(b)
	}
	before := gitStatus()

	out := t.TempDir()
	if rel, err := filepath.Rel(root, out); err == nil && !strings.HasPrefix(rel, "..") {
		t.Fatalf("the temporary folder %s is inside the checkout %s", out, root)
	}
	bin := filepath.Join(out, "caddy")
	cmd := exec.Command(xcaddy, append(args[1:], "--output", bin)...)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s --output %s (in %s): %v\n%s", line, bin, root, err, b)
	}
	if after := gitStatus(); after != before {
		t.Errorf("xcaddy changed the checkout:\nbefore:\n%s\nafter:\n%s", before, after)
	}

	mods, err := exec.Command(bin, "list-modules").CombinedOutput()
	if err != nil || !strings.Contains(string(mods), "http.handlers.toolgate") {
		t.Fatalf("http.handlers.toolgate is not in the built Caddy (%v):\n%s", err, mods)
	}
	cmd = exec.Command(bin, "adapt", "--config", filepath.Join(root, "Caddyfile.example"), "--adapter", "caddyfile")
	cmd.Dir = root
	b, err := cmd.Output()
	if err != nil || !strings.Contains(string(b), `"handler":"toolgate"`) {
		t.Fatalf("adapting Caddyfile.example: %v\n%s", err, b)
	}
}
