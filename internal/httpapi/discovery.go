package httpapi

import (
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// metadataPath is where OAuth 2.0 Protected Resource Metadata lives
// (RFC 9728 §3): at the root, or with the resource's path after it.
const metadataPath = "/.well-known/oauth-protected-resource"

// publishesMetadata reports whether the protected resource metadata is
// served: with callers that name an authorization server, which is what a
// client needs to learn from it.
func (a *API) publishesMetadata() bool {
	return a.callers != nil && len(a.callers.cfg.AuthorizationServers) > 0
}

// serveMetadata serves the protected resource metadata of /mcp, at
// metadataPath and metadataPath+"/mcp" relative to the mount, and at any
// path a route sends here (RFC 9728's root form,
// /.well-known/oauth-protected-resource/<mount>/mcp, which a gateway
// mounted below the root never sees).
//
// Without a configured resource the document names the one the request
// reaches, from its Host: a hostile Host gets its own name back, and only
// in this answer, which is not stored (no-store); what tokens are accepted
// never comes from a request.
func (a *API) serveMetadata(w http.ResponseWriter, r *http.Request) {
	cfg := a.callers.cfg
	md := &oauthex.ProtectedResourceMetadata{
		Resource:               cfg.Resource,
		AuthorizationServers:   cfg.AuthorizationServers,
		ScopesSupported:        cfg.Scopes,
		BearerMethodsSupported: []string{"header"},
		ResourceName:           "toolgate",
	}
	if md.Resource == "" {
		md.Resource = requestOrigin(r) + a.resourcePath(r)
		w.Header().Set("Cache-Control", "no-store")
	} else {
		w.Header().Set("Cache-Control", "public, max-age=3600")
	}
	auth.ProtectedResourceMetadataHandler(md).ServeHTTP(w, r)
}

// resourcePath is the path of the /mcp a metadata request is for, as the
// client sees it: the original path without the well-known segment,
// ending in /mcp. /toolgate/.well-known/oauth-protected-resource/mcp,
// /toolgate/.well-known/oauth-protected-resource and (rewritten here by a
// route) /.well-known/oauth-protected-resource/toolgate/mcp are all for
// /toolgate/mcp.
func (a *API) resourcePath(r *http.Request) string {
	p := a.originalPath(r)
	i := strings.LastIndex(p, metadataPath)
	if i < 0 {
		return "/mcp"
	}
	p = p[:i] + p[i+len(metadataPath):]
	if !strings.HasSuffix(p, "/mcp") {
		p = strings.TrimSuffix(p, "/") + "/mcp"
	}
	return p
}

// metadataURL is the resource_metadata of /mcp's challenges: the
// metadata beside /mcp, under the mount, which works with no route at the
// host's root. With a configured resource whose path ends in /mcp it is
// derived from that; otherwise from the request, as the client reached
// /mcp.
func (a *API) metadataURL(r *http.Request) string {
	if res := a.callers.cfg.Resource; res != "" {
		if mount, ok := strings.CutSuffix(res, "/mcp"); ok && !strings.Contains(res, "?") {
			return mount + metadataPath + "/mcp"
		}
	}
	mount, _ := strings.CutSuffix(a.originalPath(r), "/mcp")
	return requestOrigin(r) + mount + metadataPath + "/mcp"
}

// requestOrigin is the scheme and Host the request came with.
func requestOrigin(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// originalPath is the request's path as the client sent it, before a
// route stripped the mount.
func (a *API) originalPath(r *http.Request) string {
	if a.origPath != nil {
		if p := a.origPath(r); p != "" {
			return p
		}
	}
	return r.URL.Path
}
