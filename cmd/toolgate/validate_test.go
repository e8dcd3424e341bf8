package main

import (
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// `toolgate validate` of a running gateway's config succeeds at once,
// though the gateway holds the bolt ledger's file lock, and leaves the
// gateway as it was.
func TestValidateWhileRunning(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	up := newUpstream(t)
	data := t.TempDir()
	in := startInstance(t, "ledger bolt "+filepath.Join(data, "ledger.db"), up.srv.URL, data)
	if status, a := in.post(t, "/tools/slow", `{"input":{},"callId":"v1",`+envelope+`}`); status != 200 || a.IsError {
		t.Fatalf("call before validate: %d %+v", status, a)
	}

	start := time.Now()
	cmd := exec.Command(toolgateBinary(t), "validate", "--config", in.config, "--adapter", "caddyfile")
	cmd.Env = in.env
	out, err := cmd.CombinedOutput()
	took := time.Since(start)
	if err != nil {
		t.Fatalf("validate while the gateway runs: %v\n%s", err, out)
	}
	if took > 4*time.Second {
		t.Errorf("validate took %s; the lock wait alone was 5s", took)
	}
	if !strings.Contains(string(out), "in use by another process") {
		t.Errorf("validate did not say the ledger file is in use:\n%s", out)
	}

	before := up.hits.Load()
	if status, a := in.post(t, "/tools/slow", `{"input":{},"callId":"v1",`+envelope+`}`); status != 200 || a.IsError || up.hits.Load() != before {
		t.Errorf("the recorded call after validate: %d %+v, %d more hits", status, a, up.hits.Load()-before)
	}
	if status, a := in.post(t, "/tools/slow", `{"input":{},"callId":"v2",`+envelope+`}`); status != 200 || a.IsError {
		t.Errorf("a new call after validate: %d %+v", status, a)
	}
}

// A second gateway on the same bolt file starts, answers 503 and runs
// nothing while the first holds the file, and takes the ledger over, with
// the first's calls, once the first is gone.
func TestSecondGatewayWaitsForLedger(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	up := newUpstream(t)
	data := t.TempDir()
	line := "ledger bolt " + filepath.Join(data, "ledger.db")
	first := startInstance(t, line, up.srv.URL, data)
	_, recorded := first.post(t, "/tools/slow", `{"input":{},"callId":"w1",`+envelope+`}`)

	second := startInstance(t, line, up.srv.URL, data)
	before := up.hits.Load()
	resp, err := http.Post(second.base+"/tools/slow", "application/json", strings.NewReader(`{"input":{},"callId":"w2",`+envelope+`}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	// The lock is said in the log; the answer, like every 503, names no
	// path (the gateway's log has the file).
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), `"code":"unavailable"`) ||
		strings.Contains(string(body), data) {
		t.Errorf("a call while the file is held: %d %s; want 503 unavailable without the path", resp.StatusCode, body)
	}
	if n := up.hits.Load() - before; n != 0 {
		t.Errorf("a call while the file is held reached the target %d times", n)
	}

	first.kill()
	deadline := time.Now().Add(10 * time.Second)
	var status int
	var a answer
	for {
		status, a = second.post(t, "/tools/slow", `{"input":{},"callId":"w1",`+envelope+`}`)
		if status == 200 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if status != 200 || a.Content != recorded.Content {
		t.Errorf("the first's call from the second: %d %+v; want the recorded %+v", status, a, recorded)
	}
	if n := up.hits.Load() - before; n != 0 {
		t.Errorf("the target ran %d times for calls already recorded or refused", n)
	}
}

// A config error is first said as toolgate's own message, naming the file,
// the tool and the field, before the line in which Caddy puts the same
// message behind its module chain.
func TestConfigErrorComesFirst(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	dir := t.TempDir()
	manifest := filepath.Join(dir, "tools.json")
	write(t, manifest, `{"tools":[{"name":"lookup","description":"d","inputSchema":{"type":"object"},
		"target":{"kind":"url","method":"GET","url":"http://127.0.0.1:1/"}}]}`)
	config := filepath.Join(dir, "Caddyfile")
	write(t, config, "http://127.0.0.1:0 {\n\tbind 127.0.0.1\n\ttoolgate {\n\t\tmanifest "+manifest+"\n\t}\n}\n")

	out, err := exec.Command(toolgateBinary(t), "validate", "--config", config, "--adapter", "caddyfile").CombinedOutput()
	if err == nil {
		t.Fatalf("validate accepted a manifest spelling inputSchema:\n%s", out)
	}
	var errors []string
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, `"level":"error"`) || strings.Contains(line, "ERROR") {
			errors = append(errors, line)
		}
	}
	want := `toolgate config: manifest ` + manifest + `: invalid JSON: tool \"lookup\" (tools[0]): unknown field \"inputSchema\": a manifest spells it \"input_schema\"`
	if len(errors) < 2 || !strings.Contains(errors[0], want) || strings.Contains(errors[0], "loading http app module") {
		t.Fatalf("the first error line is not toolgate's message %s:\n%s", want, out)
	}
	if !strings.Contains(errors[len(errors)-1], "provision http.handlers.toolgate") {
		t.Errorf("Caddy's own line with the module chain is missing:\n%s", out)
	}
}

func write(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}
