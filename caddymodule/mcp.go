package caddymodule

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/toolgate/toolgate/internal/identity"
	"github.com/toolgate/toolgate/internal/mcp"
)

// setupMCP builds the /mcp endpoint. Continuation state is signed with a
// key derived from the identity key, so instances that share that key
// (and calls, on Redis) accept each other's.
func (h *Handler) setupMCP(key identity.Key) {
	stateKey := sha256.Sum256(append([]byte("toolgate mcp request state\x00"), key.Private.Seed()...))
	srv := mcp.New(h.gw, mcp.Options{StateKey: stateKey[:], CheckCallID: checkCallID})
	h.mcp = srv
	if h.verifier == nil {
		return
	}
	verify := func(ctx context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		claims, err := h.verifier.Verify(ctx, token)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", auth.ErrInvalidToken, err)
		}
		c := mcp.Caller{Claims: claims}
		c.Identity.User, _ = claims[h.userClaim].(string)
		c.Identity.Install, _ = claims[h.installClaim].(string)
		c.Device, _ = claims["device"].(string)
		if c.Identity.User == "" {
			return nil, fmt.Errorf("%w: the token has no string %q claim naming the user", auth.ErrInvalidToken, h.userClaim)
		}
		exp := time.Now().Add(time.Minute)
		if f, ok := claims["exp"].(float64); ok {
			exp = time.Unix(int64(f), 0)
		}
		return c.TokenInfo(exp), nil
	}
	h.mcp = auth.RequireBearerToken(verify, nil)(srv)
}

// serveMCP serves MCP Streamable HTTP. Without callers, only loopback
// peers. The Host check stands in for the SDK's DNS-rebinding protection:
// a gateway listening on loopback refuses a foreign Host unless it is one
// of mcp_allowed_hosts (the names a proxy in front forwards).
func (h *Handler) serveMCP(w http.ResponseWriter, r *http.Request) error {
	if local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && isLoopback(local.String()) && !h.allowedHost(r.Host) {
		writeError(w, http.StatusForbidden, "forbidden", fmt.Sprintf("MCP: Host %q is not allowed on a loopback listener; add it to mcp_allowed_hosts", r.Host))
		return nil
	}
	if h.verifier == nil {
		if _, ok := h.authenticate(w, r); !ok {
			return nil
		}
	}
	h.mcp.ServeHTTP(w, r)
	return nil
}

func (h *Handler) allowedHost(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	if host == "localhost" {
		return true
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return true
	}
	for _, a := range h.MCPAllowedHosts {
		if a == host || a == hostport {
			return true
		}
	}
	return false
}
