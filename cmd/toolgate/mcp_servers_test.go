package main

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/toolgate/toolgate/internal/upstream/upstreamtest"
)

// TestMCPServerCardSurvivesKill: an upstream MCP server's input request
// pauses its call on a card; the gateway is killed (kill -9) and started
// again, and the card's answer resumes the server's call, which runs
// once for the question and once for the answer.
func TestMCPServerCardSurvivesKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	up := upstreamtest.New()
	url := up.Serve(t)
	data := t.TempDir()
	lines := fmt.Sprintf("ledger bolt %s\n\t\tmcp_server crm %s {\n\t\t\tprefix crm_\n\t\t}", filepath.Join(data, "ledger.db"), url)
	in := startInstance(t, lines, "http://127.0.0.1:1", data)

	status, a := in.post(t, "/tools/crm_approve", `{"input":{"item":"inv-9"},"callId":"m1",`+envelope+`}`)
	if status != 200 || a.Status != "action_required" || len(a.Card) == 0 {
		t.Fatalf("approve: %d %+v", status, a)
	}
	in.kill()

	in = startInstance(t, lines, "http://127.0.0.1:1", data)
	status, r := in.post(t, "/calls/m1/resume", `{"buttonId":"choice-0","identity":{"user":"u_1","install":"in_1"}}`)
	if status != 200 || r.IsError || r.Content != "approved inv-9" {
		t.Fatalf("resume after kill -9: %d %+v", status, r)
	}
	// A repeat of the call gets the recorded answer; nothing runs again.
	if _, again := in.post(t, "/tools/crm_approve", `{"input":{"item":"inv-9"},"callId":"m1",`+envelope+`}`); again.Content != "approved inv-9" {
		t.Errorf("a repeat after the answer: %+v", again)
	}
	if n := up.Runs("approve"); n != 2 {
		t.Errorf("approve ran %d times, want 2 (the question, the answer)", n)
	}
}
