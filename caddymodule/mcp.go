package caddymodule

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net"
	"net/http"
	"net/netip"
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
	srv := mcp.New(h.gw, mcp.Options{StateKey: stateKey[:], Logger: h.logger})
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
		if err := h.checkTokenIdentity(c.Identity); err != nil {
			return nil, fmt.Errorf("%w: %v", auth.ErrInvalidToken, err)
		}
		exp := time.Now().Add(time.Minute)
		if f, ok := claims["exp"].(float64); ok {
			exp = time.Unix(int64(f), 0)
		}
		return c.TokenInfo(exp), nil
	}
	h.mcp = auth.RequireBearerToken(verify, nil)(srv)
}

// serveMCP serves MCP Streamable HTTP. Without callers, it takes the
// runtime endpoints' loopback rules, Host check included. With callers,
// the Host check still stands in for the SDK's DNS-rebinding protection
// on a loopback listener: a foreign Host is refused unless it is one of
// allowed_hosts (the SDK's own check cannot be told those names).
func (h *Handler) serveMCP(w http.ResponseWriter, r *http.Request) error {
	if h.verifier == nil {
		if _, ok := h.authenticate(w, r); !ok {
			return nil
		}
	} else if onLoopbackListener(r) && !h.allowedHost(r.Host) {
		writeError(w, http.StatusForbidden, "forbidden", fmt.Sprintf("MCP: Host %q is not allowed on a loopback listener: list it in allowed_hosts", r.Host))
		return nil
	}
	if !requireJSON(w, r) {
		return nil
	}
	h.mcp.ServeHTTP(w, r)
	return nil
}

func onLoopbackListener(r *http.Request) bool {
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok {
		return false
	}
	ap, err := netip.ParseAddrPort(local.String())
	return err == nil && ap.Addr().Unmap().IsLoopback()
}
