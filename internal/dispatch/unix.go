package dispatch

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"unicode"
)

// unixPrefix starts a component address on a unix socket, in the form
// Caddy's own upstreams take: unix//run/api.sock is the socket
// /run/api.sock.
const unixPrefix = "unix/"

// unixHost is the Host a unix-socket component is sent: fixed, so that
// nothing in a call can name it, and the name servers on a socket expect
// (curl --unix-socket sends it too).
const unixHost = "localhost"

// parseUnix checks the socket path of a unix//PATH address. The path is
// taken as written, without escapes, and is all of the address: a base
// path could not be told from the socket's own, so targets of a socket
// component carry their whole path.
func parseUnix(name, addr string) (string, error) {
	path := strings.TrimPrefix(addr, unixPrefix)
	bad := func(why string) error {
		return fmt.Errorf("component %q: address %q: %s (want unix//ABSOLUTE/PATH)", name, addr, why)
	}
	switch {
	case path == "":
		return "", bad("the socket path is empty")
	case !filepath.IsAbs(path):
		return "", bad("the socket path must be absolute")
	case strings.ContainsAny(path, "?#"):
		return "", bad("a socket address has no query or fragment")
	case strings.Contains(path, "@"):
		// Go reads a leading @ as Linux's abstract namespace, and an @
		// elsewhere would read as user info to anyone who takes the
		// address for a URL.
		return "", bad("a socket address has no user info")
	case strings.ContainsFunc(path, func(r rune) bool { return unicode.IsControl(r) || unicode.IsSpace(r) }):
		return "", bad("the socket path holds a space or a control character")
	case filepath.Clean(path) != path:
		return "", bad("the socket path must be clean (no //, . or .. segments, no trailing /)")
	}
	return path, nil
}

// newUnixComponent builds a component whose app targets are sent over the
// unix socket at path. Its base URL is http://localhost: the URL only
// carries the path and the Host header, and the socket is chosen by
// Target.Request, never by the URL.
func newUnixComponent(name, path string, env map[string]string) *Component {
	if env == nil {
		env = map[string]string{}
	}
	return &Component{Name: name, BaseURL: &url.URL{Scheme: "http", Host: unixHost}, Socket: path, Env: env}
}

// socketKey is the context key of the socket a request is sent to. Its
// value is the socket's path as an any, boxed once by the target (a string
// made an any allocates), so that marking a request and finding its
// transport allocate nothing more than the context.
type socketKey struct{}

// withSocket marks ctx's requests for the unix socket whose path is in
// socket.
func withSocket(ctx context.Context, socket any) context.Context {
	return context.WithValue(ctx, socketKey{}, socket)
}

// Socket returns what a request's context was marked with by
// Target.Request: the path of the unix socket it goes to, boxed once in an
// any (a sender keys its transports by it), or nil for TCP.
func Socket(ctx context.Context) any { return ctx.Value(socketKey{}) }
