package outbound

import (
	"context"
	"net"
	"net/http"
	"time"

	"github.com/toolgate/toolgate/internal/dispatch"
)

// transportFor picks the transport for a request: the shared TCP one, or
// the one of its unix socket. Each socket has a transport of its own, which
// dials nothing else: the transports pool idle connections by the URL's
// host, and every socket's URL says localhost, so a shared pool could hand
// one component's connection (and with it the identity token meant for it)
// to another, or to a url target on http://localhost.
func (c *Client) transportFor(req *http.Request) *http.Transport {
	key := dispatch.Socket(req.Context())
	if key == nil {
		return c.transport
	}
	if tr, ok := c.sockets.Load(key); ok {
		return tr.(*http.Transport)
	}
	path := key.(string)
	tr := c.transport.Clone()
	d := &net.Dialer{Timeout: 10 * time.Second}
	tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
		return d.DialContext(ctx, "unix", path)
	}
	got, _ := c.sockets.LoadOrStore(key, tr)
	return got.(*http.Transport)
}

// closeIdleSockets closes the idle connections of every socket transport.
func (c *Client) closeIdleSockets() {
	c.sockets.Range(func(_, tr any) bool {
		tr.(*http.Transport).CloseIdleConnections()
		return true
	})
}
