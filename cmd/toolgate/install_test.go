package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestBinaryOutsideCheckout builds toolgate as the README says (go build -o
// <tmp>/toolgate ./cmd/toolgate from the checkout) and runs it from a
// scratch folder outside the checkout, with a Caddyfile of its own whose
// one inline tool has a url target on a loopback server, and calls it once.
func TestBinaryOutsideCheckout(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts toolgate")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	scratch := t.TempDir()
	if rel, err := filepath.Rel(root, scratch); err == nil && !strings.HasPrefix(rel, "..") {
		t.Fatalf("the scratch folder %s is inside the checkout %s", scratch, root)
	}

	var hits atomic.Int64
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"content":"pong to %s"}`, r.URL.Query().Get("who"))
	}))
	t.Cleanup(target.Close)

	port := freePort(t)
	cfg := fmt.Sprintf(`{
	admin off
}
http://127.0.0.1:%d {
	bind 127.0.0.1
	toolgate {
		tool ping {
			description "Answers pong."
			input_schema `+"`"+`{"type":"object","properties":{"who":{"type":"string"}},"required":["who"]}`+"`"+`
			target url GET %s/ping
			query who ${input.who}
		}
	}
}
`, port, target.URL)
	if err := os.WriteFile(filepath.Join(scratch, "Caddyfile"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}

	log := new(bytes.Buffer)
	cmd := exec.Command(toolgateBinary(t), "run", "--config", "Caddyfile", "--adapter", "caddyfile")
	cmd.Dir = scratch
	cmd.Env = append(os.Environ(), "HOME="+scratch, "XDG_DATA_HOME="+scratch, "XDG_CONFIG_HOME="+scratch)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	in := &instance{base: fmt.Sprintf("http://127.0.0.1:%d", port), cmd: cmd, log: log}
	t.Cleanup(in.kill)
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := http.Get(in.base + "/tools")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if !strings.Contains(string(b), `"ping"`) {
				t.Fatalf("GET /tools: %d %s", resp.StatusCode, b)
			}
			break
		}
		if time.Now().After(deadline) {
			in.kill()
			t.Fatalf("toolgate did not start in %s:\n%s", scratch, log)
		}
		time.Sleep(50 * time.Millisecond)
	}

	code, a := in.post(t, "/tools/ping", `{"input":{"who":"scratch"},"callId":"c1",`+envelope+`}`)
	if code != http.StatusOK || a.IsError || a.Content != "pong to scratch" {
		t.Fatalf("POST /tools/ping: %d %+v\n%s", code, a, log)
	}
	if n := hits.Load(); n != 1 {
		t.Errorf("the target ran %d times, want 1", n)
	}
}
