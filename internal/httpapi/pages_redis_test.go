package httpapi

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgate/toolgate/internal/apitest"
	"github.com/toolgate/toolgate/internal/clienttools"
	"github.com/toolgate/toolgate/internal/redistest"
)

// TestPagesRedisUnavailable: with the bridge on Redis and Redis gone, the
// page endpoints answer 503 without naming the server, then work again
// once it is back.
func TestPagesRedisUnavailable(t *testing.T) {
	rs := redistest.Start(t)
	s := startRedisPages(t, &redis.Options{Addr: rs.Addr, DialTimeout: time.Second, ReadTimeout: time.Second, MaxRetries: 1, DialerRetries: 1})
	tok := apitest.PageToken(t, "u_1", "th_1")

	rs.Stop()
	if status, body := s.Claim(t, tok, "c1"); status != 503 || !strings.Contains(body, `"unavailable"`) || strings.Contains(body, rs.Addr) {
		t.Errorf("claim while Redis is down: %d %s", status, body)
	}
	if status, body, _ := s.PagePost(t, tok, "/client/calls/c1/result", `{"result":1}`); status != 503 || strings.Contains(body, rs.Addr) {
		t.Errorf("result while Redis is down: %d %s", status, body)
	}
	if page, status, body := apitest.OpenStream(t, s.URL, tok, "th_1"); page != nil || status != 503 || strings.Contains(body, rs.Addr) {
		t.Errorf("stream while Redis is down: %d %s", status, body)
	}

	rs.Restart(t)
	var status int
	var body string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if status, body = s.Claim(t, tok, "c1"); status != 503 {
			break
		}
	}
	if status != 404 {
		t.Errorf("claim of an unknown call once Redis is back: %d %s", status, body)
	}
}

// TestInstallsApartRedisHTTP is TestInstallsApartHTTP across two instances
// on one Redis: the call is made on one, the pages stream from the other.
func TestInstallsApartRedisHTTP(t *testing.T) {
	rs := redistest.Start(t)
	instance := func() *server {
		return startRedisPages(t, &redis.Options{Addr: rs.Addr, DialTimeout: time.Second, ReadTimeout: time.Second})
	}
	installsApart(t, instance(), instance())
}

// startRedisPages starts a gateway with the pages options whose client
// tools go through a Redis bridge on a client with opts.
func startRedisPages(t *testing.T, opts *redis.Options) *server {
	t.Helper()
	client := redis.NewClient(opts)
	t.Cleanup(func() { client.Close() })
	relay, err := clienttools.NewRedisRelay(context.Background(), client, "tg:", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { relay.Close() })
	o := pagesOptions(t)
	o.bridge = clienttools.NewBridgeOn(relay)
	return startServer(t, o)
}
