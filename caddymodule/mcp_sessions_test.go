package caddymodule

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddytest"
	"github.com/go-json-experiment/json"

	"github.com/toolgate/toolgate/internal/apitest"
)

// The mcp block's session caps reach the endpoint: over
// max_sessions_per_caller (in loopback mode, all sessions are the local
// caller's) a new session is refused with 429, naming the option.
func TestMCPSessionCaps(t *testing.T) {
	startMCPGateway(t, "mcp {\n\t\t\t\tmax_sessions_per_caller 1\n\t\t\t\tsession_idle_timeout 1m\n\t\t\t}")
	resp, body := apitest.PostMCPInitialize(t, http.DefaultClient, mcpEndpoint, "")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Mcp-Session-Id") == "" {
		t.Fatalf("the first session: %d %s", resp.StatusCode, body)
	}
	resp, body = apitest.PostMCPInitialize(t, http.DefaultClient, mcpEndpoint, "")
	var e struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	_ = json.Unmarshal([]byte(body), &e)
	if resp.StatusCode != http.StatusTooManyRequests || e.Error.Code != "too_many_sessions" || !strings.Contains(e.Error.Message, "max_sessions_per_caller") {
		t.Errorf("the second session: %d %s, want 429 naming max_sessions_per_caller", resp.StatusCode, body)
	}
}

// Negative session limits in JSON are load errors naming the option (the
// Caddyfile refuses them already at adapt).
func TestMCPSessionLimitsLoadErrors(t *testing.T) {
	for _, c := range []struct{ field, value, want string }{
		{"session_idle_timeout", "-1", "mcp: session_idle_timeout -1ns must not be negative"},
		{"max_sessions_per_caller", "-1", "mcp: max_sessions_per_caller -1 must not be negative"},
		{"max_sessions", "-10", "mcp: max_sessions -10 must not be negative"},
	} {
		t.Run(c.field, func(t *testing.T) {
			cfg := fmt.Sprintf(`{"admin":{"listen":"localhost:2999"},"storage":{"module":"file_system","root":%q},
"apps":{"http":{"grace_period":1,"servers":{"s":{"listen":["127.0.0.1:9080"],"routes":[{"handle":[
{"handler":"toolgate","ledger":{"backend":"off"},"mcp":{%q:%s}}]}]}}}}}`, dataDir(t), c.field, c.value)
			caddytest.AssertLoadError(t, cfg, "json", c.want)
		})
	}
}
