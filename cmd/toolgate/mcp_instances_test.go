package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/apitest"
	"github.com/toolgate/toolgate/internal/redistest"
)

// sharedKeyFile writes one Ed25519 key for instances that must sign alike:
// their identity tokens and their MCP request states.
func sharedKeyFile(t *testing.T) string {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "ed25519.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// An MCP card's continuation (its request state) is usable once across
// instances and restarts: its nonce is spent in the shared ledger. One
// issued on A may be answered on B; once used on A it is refused on B, and
// on A after A restarted.
func TestMCPStateOnceAcrossInstances(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	rs := redistest.Start(t)
	up := newUpstream(t)
	line := "ledger redis " + rs.Addr + " {\n\t\t\tprefix tg-mcp:\n\t\t}\n\t\tidentity {\n\t\t\tkey_file " + sharedKeyFile(t) + "\n\t\t}"
	a := startInstance(t, line, up.srv.URL, t.TempDir())
	b := startInstance(t, line, up.srv.URL, t.TempDir())

	session := func(in *instance) *mcp.ClientSession {
		return apitest.MCPClient{
			Endpoint: in.base + "/mcp",
			Elicit: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				t.Error("asked to elicit though the round trip is the client's")
				return &mcp.ElicitResult{Action: "cancel"}, nil
			},
			NoRoundTrip: true,
		}.Session(t)
	}
	ask := func(cs *mcp.ClientSession) string {
		t.Helper()
		res := apitest.CallTool(t, cs, &mcp.CallToolParams{Name: "card", Arguments: map[string]any{}, Meta: apitest.U1()})
		if !res.NeedsInput() || res.RequestState == "" {
			t.Fatalf("want an input request for the card, got %s", apitest.Dump(res))
		}
		return res.RequestState
	}
	press := func(cs *mcp.ClientSession, state string) string {
		t.Helper()
		res := apitest.CallTool(t, cs, &mcp.CallToolParams{Name: "card", Arguments: map[string]any{}, Meta: apitest.U1(),
			InputResponses: mcp.InputResponseMap{"card": &mcp.ElicitResult{Action: "accept", Content: map[string]any{"button": "yes"}}},
			RequestState:   state})
		return apitest.ModelText(t, res)
	}
	onA, onB := session(a), session(b)

	// Issued on A, answered on B: the instances share the key and the call.
	if got := press(onB, ask(onA)); got != "yes pressed" {
		t.Fatalf("a state from A answered on B: %q", got)
	}

	// Used on A, then refused on B, and on A after a restart.
	state := ask(onA)
	if got := press(onA, state); got != "yes pressed" {
		t.Fatalf("answered on A: %q", got)
	}
	if got := press(onB, state); !strings.Contains(got, "already used") {
		t.Errorf("the state used on A, answered on B: %q; want already used", got)
	}
	a.kill()
	a = startInstance(t, line, up.srv.URL, t.TempDir())
	if got := press(session(a), state); !strings.Contains(got, "already used") {
		t.Errorf("the state used on A, answered on A restarted: %q; want already used", got)
	}
}
