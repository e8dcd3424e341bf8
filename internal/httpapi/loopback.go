package httpapi

import (
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"

	"github.com/toolgate/toolgate/internal/verify"
)

// Without callers, toolgate trusts the envelope's identity, so it must know
// that the request comes from this machine itself: a peer's loopback
// address proves that only when no proxy stands between, and a browser on
// this machine is a loopback peer for any web page it opens. These are the
// rules that stand in for caller authentication (docs/security.md, "Without callers: this machine only").

// forwardingHeaders are the headers a proxy adds to say whom it forwards
// for. Any of them, from any peer, means a proxy stands between, and the
// peer's loopback address says nothing about the real client. That holds
// for a peer in the server's trusted_proxies too: a proxy that appends to
// X-Forwarded-For (nginx's $proxy_add_x_forwarded_for, load balancers)
// passes on what its client wrote, and Caddy takes the left-most entry,
// the one the client chose. (A proxy that adds none, like nginx's bare
// proxy_pass, cannot be told apart: docs/security.md says so.)
var forwardingHeaders = []string{"X-Forwarded-For", "Forwarded", "X-Real-Ip", "X-Forwarded-Host", "X-Forwarded-Proto", "Via"}

// parseClientIP parses an IP, or IP:port, with or without a zone. What
// does not parse is the zero Addr, which is no loopback.
func parseClientIP(s string) netip.Addr {
	if host, _, err := net.SplitHostPort(s); err == nil {
		s = host
	}
	s, _, _ = strings.Cut(s, "%")
	ip, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}
	}
	return ip.Unmap()
}

// loopback holds the compiled allowed_hosts.
type loopback struct {
	allowedHosts map[string]bool // in lower case
}

func newLoopback(hosts []string) (*loopback, error) {
	l := &loopback{allowedHosts: make(map[string]bool, len(hosts))}
	for _, a := range hosts {
		u, err := url.Parse("http://" + a)
		if a == "" || strings.Contains(a, "*") || err != nil || u.Host != a || u.User != nil {
			return nil, fmt.Errorf("allowed_hosts: %q is not a host name or host:port (no scheme, path or wildcard)", a)
		}
		l.allowedHosts[strings.ToLower(a)] = true
	}
	return l, nil
}

// refusal says why a runtime request may not be served without callers,
// naming what to configure, or returns "" when it may.
func (l *loopback) refusal(r *http.Request) string {
	// The peer, never the client a proxy names: see forwardingHeaders.
	if ip := parseClientIP(r.RemoteAddr); !ip.IsLoopback() {
		return fmt.Sprintf("without callers, toolgate accepts runtime calls only from this machine, and the client %s is not a loopback address: configure callers to accept others", ip)
	}
	for _, name := range forwardingHeaders {
		if len(r.Header.Values(name)) > 0 {
			return fmt.Sprintf("the request carries %s, so it came through a proxy (trusted_proxies or not), and toolgate cannot see the client behind it: without callers, toolgate accepts runtime calls only straight from this machine; a gateway behind a proxy must configure callers", name)
		}
	}
	if !l.allowedHost(r.Host) {
		return fmt.Sprintf("Host %q is not a loopback name: list it in allowed_hosts if this machine is reached by that name", r.Host)
	}
	// The pages origins are not this site: their pages reach the page
	// endpoints, with a page token for one user and thread, and never a
	// runtime endpoint, where the envelope names any user.
	origin := r.Header.Get("Origin")
	if origin != "" && !sameOrigin(r, origin) {
		return fmt.Sprintf("Origin %q is another web origin: without callers, only this site's own pages may call toolgate's runtime endpoints (pages origins reach the page endpoints only)", origin)
	}
	if origin == "" && r.Header.Get("Sec-Fetch-Site") == "cross-site" {
		return "the request comes from another site (Sec-Fetch-Site: cross-site) and names no Origin: without callers, only this site's own pages may call toolgate's runtime endpoints"
	}
	return ""
}

// allowedHost reports whether a Host names this machine: a loopback name,
// or one of allowed_hosts (by name, or name and port). A foreign Host on
// a loopback peer is how DNS rebinding reaches a local server.
func (l *loopback) allowedHost(hostport string) bool {
	// Not net.SplitHostPort: a Host without a port, as for port 80, is
	// its error, allocated on every call.
	host := hostport
	if i := strings.LastIndexByte(host, ':'); i > strings.LastIndexByte(host, ']') {
		host = host[:i]
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	return verify.IsLoopbackHost(host) || l.allowedHosts[strings.ToLower(host)] || l.allowedHosts[strings.ToLower(hostport)]
}

// sameOrigin reports whether origin is this site's own: the scheme of the
// connection and the request's Host.
func sameOrigin(r *http.Request, origin string) bool {
	key, ok := originKey(origin)
	if !ok {
		return false
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return key == scheme+"://"+hostKey(scheme, r.Host)
}

// originKey normalizes an origin, scheme://host[:port], for comparison:
// lower case, the default port written out. "null" and anything with a
// path, query or user is no origin.
func originKey(origin string) (string, bool) {
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return "", false
	}
	return u.Scheme + "://" + hostKey(u.Scheme, u.Host), true
}

// hostKey is host:port in lower case, with the scheme's default port when
// none is given.
func hostKey(scheme, hostport string) string {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		host, port = strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]"), "80"
		if scheme == "https" {
			port = "443"
		}
	}
	return net.JoinHostPort(strings.ToLower(host), port)
}

// onLoopbackListener reports whether the request came in on a loopback
// address of this machine.
func onLoopbackListener(r *http.Request) bool {
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok {
		return false
	}
	ap, err := netip.ParseAddrPort(local.String())
	return err == nil && ap.Addr().Unmap().IsLoopback()
}

// requireJSON refuses a POST whose body is not declared JSON, with 415.
// This is what keeps a web page from calling toolgate without a CORS
// preflight: a page may send text/plain, form and multipart bodies to any
// origin, never application/json. It writes the refusal itself.
func requireJSON(w http.ResponseWriter, r *http.Request) bool {
	if r.Method != http.MethodPost || r.ContentLength == 0 {
		return true
	}
	// What every client sends, without the parser's allocations.
	ct := r.Header.Get("Content-Type")
	if ct == "application/json" {
		return true
	}
	if mt, _, err := mime.ParseMediaType(ct); err == nil && mt == "application/json" {
		return true
	}
	writeError(w, http.StatusUnsupportedMediaType, "unsupported_media_type", "the request body must be JSON, sent with Content-Type: application/json")
	return false
}
