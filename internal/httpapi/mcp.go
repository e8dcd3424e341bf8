package httpapi

import (
	"context"
	"fmt"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/toolgate/toolgate/internal/mcp"
	"github.com/toolgate/toolgate/internal/observe"
)

// mcpHandler puts the MCP server behind the callers' tokens, when callers
// are configured; the SDK then binds each session to its caller.
func (a *API) mcpHandler(srv *mcp.Server) http.Handler {
	if a.callers == nil {
		return srv
	}
	verify := func(ctx context.Context, token string, r *http.Request) (*auth.TokenInfo, error) {
		p, err := a.callers.Verify(r.WithContext(ctx), token)
		if err != nil {
			a.refused(observe.RefusedAuth, "invalid_token")
			return nil, fmt.Errorf("%w: %v", auth.ErrInvalidToken, err)
		}
		return mcp.Caller{Identity: p.Identity, Claims: p.Claims, Device: p.Device}.TokenInfo(p.Expires), nil
	}
	return auth.RequireBearerToken(verify, nil)(srv)
}

// serveMCP serves MCP Streamable HTTP. Without callers, it takes the
// runtime endpoints' loopback rules, Host check included. With callers,
// the Host check still stands in for the SDK's DNS-rebinding protection
// on a loopback listener: a foreign Host is refused unless it is one of
// allowed_hosts (the SDK's own check cannot be told those names).
func (a *API) serveMCP(w http.ResponseWriter, r *http.Request) {
	if a.callers == nil {
		if _, ok := a.authenticate(w, r); !ok {
			return
		}
	} else if onLoopbackListener(r) && !a.loopback.allowedHost(r.Host) {
		a.refused(observe.RefusedLoopback, "forbidden")
		writeError(w, http.StatusForbidden, "forbidden", fmt.Sprintf("MCP: Host %q is not allowed on a loopback listener: list it in allowed_hosts", r.Host))
		return
	}
	if !requireJSON(w, r) {
		return
	}
	a.mcp.ServeHTTP(w, r)
}
