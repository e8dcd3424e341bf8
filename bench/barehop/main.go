// Command barehop is the load harness's bare hop: a plain
// httputil.ReverseProxy to the upstream, with no Caddy in front. It is the
// limit for any Go proxy on the machine (docs/performance.md): what one more hop of
// net/http costs, with nothing else done on the way. toolgate is held
// against it ("ledger off ≥ 1.0 × the bare hop").
//
// Its transport is tuned as a proxy on loopback should be, so that the row
// measures the hop and not a poor setting: enough idle connections for
// every client connection (no dial per request), keep-alives, no
// compression (the upstream's answer passes as it is), and a pool of copy
// buffers (no 32 KiB allocation per answer).
package main

import (
	"flag"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"time"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:9815", "address to listen on")
	upstream := flag.String("upstream", "http://127.0.0.1:9801", "the upstream's base URL")
	conns := flag.Int("conns", 1024, "idle connections kept to the upstream: at least the client's connections")
	flag.Parse()
	target, err := url.Parse(*upstream)
	if err != nil {
		log.Fatal(err)
	}

	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Host = r.In.Host
		},
		Transport: &http.Transport{
			Proxy: nil,
			DialContext: (&net.Dialer{
				Timeout:   10 * time.Second,
				KeepAlive: 30 * time.Second,
			}).DialContext,
			MaxIdleConns:        *conns,
			MaxIdleConnsPerHost: *conns,
			IdleConnTimeout:     90 * time.Second,
			DisableCompression:  true,
		},
		BufferPool: new(bufferPool),
		ErrorLog:   log.Default(),
	}
	log.Printf("bare hop on %s to %s", *addr, target)
	log.Fatal(http.ListenAndServe(*addr, proxy))
}

// bufferPool is httputil.BufferPool on a sync.Pool of 32 KiB buffers, the
// size the proxy would allocate for each copy without one.
type bufferPool struct{ p sync.Pool }

func (b *bufferPool) Get() []byte {
	if v, ok := b.p.Get().(*[]byte); ok {
		return *v
	}
	return make([]byte, 32<<10)
}

func (b *bufferPool) Put(buf []byte) { b.p.Put(&buf) }
