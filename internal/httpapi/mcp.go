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
//
// serveMCP has verified the token by then, and answered a refusal with
// the challenges of the MCP authorization spec (error, scope,
// resource_metadata), which the SDK's middleware does not write. The SDK
// middleware stays only because it alone can hand the SDK the caller's
// TokenInfo; its verifier takes the principal serveMCP put in the context.
func (a *API) mcpHandler(srv *mcp.Server) http.Handler {
	if a.callers == nil {
		return srv
	}
	verified := func(ctx context.Context, _ string, _ *http.Request) (*auth.TokenInfo, error) {
		p, ok := ctx.Value(principalKey{}).(Principal)
		if !ok {
			return nil, fmt.Errorf("%w: not verified", auth.ErrInvalidToken)
		}
		info := mcp.Caller{Identity: p.Identity, Claims: p.Claims, Device: p.Device}.TokenInfo(a.callers.acceptedUntil(p))
		info.Scopes = p.Scopes
		return info, nil
	}
	// The verifier allowed for clock skew on exp already; the SDK must not
	// refuse again what it accepted.
	return auth.RequireBearerToken(verified, &auth.RequireBearerTokenOptions{ClockSkew: MaxLeeway})(srv)
}

// principalKey keys the verified caller of an MCP request.
type principalKey struct{}

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
	} else {
		p, err := a.callers.Authenticate(r)
		if err != nil {
			metadata := ""
			if a.publishesMetadata() {
				metadata = a.metadataURL(r)
			}
			a.refuseTokenWith(w, a.callers, err, metadata)
			return
		}
		r = r.WithContext(context.WithValue(r.Context(), principalKey{}, p))
	}
	if !requireJSON(w, r) {
		return
	}
	// Set over whatever the client sent: the tools' handlers read it.
	r.Header.Set(mcp.BaseURLHeader, a.baseURL(r))
	if r.Method == http.MethodPost {
		// The body is held to max_request_size as the Tools API's is,
		// with the same 413, before the SDK reads it.
		body, bp, err := a.readBody(w, r)
		defer putBuffer(bp, body)
		switch {
		case a.tooLarge(w, err):
			return
		case err != nil:
			writeError(w, http.StatusBadRequest, "unreadable_body", "the body could not be read: "+err.Error())
			return
		}
		// The SDK reads it whole before ServeHTTP returns, and keeps its
		// own copy; the fast path reads it in place (mcp.Body), and keeps
		// nothing of it past ServeHTTP either.
		r.Body = mcp.NewBody(body)
	}
	a.mcp.ServeHTTP(w, r)
}

// refuseSession answers a new MCP session over a cap as the pages' caps
// are answered: 429 with Retry-After, the message naming the cap.
func (a *API) refuseSession(w http.ResponseWriter, err error) {
	a.refused(observe.RefusedLimits, "too_many_sessions")
	w.Header().Set("Retry-After", retryAfter)
	writeError(w, http.StatusTooManyRequests, "too_many_sessions", err.Error())
}
