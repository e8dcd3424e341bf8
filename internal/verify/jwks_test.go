package verify

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/golang-jwt/jwt/v5"

	"github.com/toolgate/toolgate/internal/clock"
	"github.com/toolgate/toolgate/internal/identity"
)

// idle waits until no fetch of the set runs.
func (s *RemoteKeySet) idle() {
	s.mu.Lock()
	done := s.inflight
	s.mu.Unlock()
	if done != nil {
		<-done
	}
}

// guard only turns a hang into a failure: nothing here is measured in
// time, the tests order events with channels.
const guard = 10 * time.Second

// gatedJWKS is a JWKS server whose answers a test can hold back: while
// held, a request is stuck until the test releases it, or until the
// request's own context ends.
type gatedJWKS struct {
	srv     *httptest.Server
	hits    atomic.Int64
	cut     atomic.Int64  // requests whose context ended while held
	arrived chan struct{} // a value for each request, when it arrives

	mu   sync.Mutex
	body []byte
	gate chan struct{} // nil: answer at once; else when it is closed
}

func newGatedJWKS(t *testing.T, body []byte) *gatedJWKS {
	t.Helper()
	g := &gatedJWKS{body: body, arrived: make(chan struct{}, 64)}
	g.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.hits.Add(1)
		g.mu.Lock()
		body, gate := g.body, g.gate
		g.mu.Unlock()
		g.arrived <- struct{}{}
		if gate != nil {
			select {
			case <-gate:
			case <-r.Context().Done():
				g.cut.Add(1)
				return
			}
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	}))
	t.Cleanup(g.srv.Close)
	t.Cleanup(g.release) // before Close, which waits for held requests
	return g
}

// hold holds back the answers to the requests that arrive from now on,
// which will carry body.
func (g *gatedJWKS) hold(body []byte) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.body, g.gate = body, make(chan struct{})
}

// release lets the held requests through and answers at once again.
func (g *gatedJWKS) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.gate != nil {
		close(g.gate)
		g.gate = nil
	}
}

// waitArrival waits for the next request to reach the server.
func (g *gatedJWKS) waitArrival(t *testing.T) {
	t.Helper()
	select {
	case <-g.arrived:
	case <-time.After(guard):
		t.Fatal("no JWKS request arrived")
	}
}

func (g *gatedJWKS) wantHits(t *testing.T, n int64) {
	t.Helper()
	if got := g.hits.Load(); got != n {
		t.Fatalf("JWKS fetched %d times, want %d", got, n)
	}
}

// gatedFixture is a JWKS verifier on a stepped clock against a gated
// server; keys A and B are Ed25519, each under its own kid.
type gatedFixture struct {
	srv   *gatedJWKS
	clock *clock.Manual
	keys  *RemoteKeySet
	v     *Verifier
	priv  map[string]ed25519.PrivateKey
	jwk   map[string]map[string]string
}

func newGatedFixture(t *testing.T, names ...string) *gatedFixture {
	t.Helper()
	f := &gatedFixture{clock: clock.NewManual(vNow), priv: map[string]ed25519.PrivateKey{}, jwk: map[string]map[string]string{}}
	for _, n := range []string{"A", "B"} {
		_, k, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		f.priv[n], f.jwk[n] = k, pubJWK(t, n, k.Public())
	}
	f.srv = newGatedJWKS(t, f.set(t, names...))
	f.keys = NewRemoteKeySet(f.srv.srv.URL, identity.DecodeJWK, f.srv.srv.Client(), nil)
	f.keys.SetClock(f.clock)
	f.v = NewJWKSVerifier(f.keys, Options{Issuer: vIssuer, Audience: vAudience})
	f.v.SetClock(f.clock)
	return f
}

func (f *gatedFixture) set(t *testing.T, names ...string) []byte {
	var keys []map[string]string
	for _, n := range names {
		keys = append(keys, f.jwk[n])
	}
	return jwksOf(t, keys...)
}

// token is signed by key (A or B) under kid.
func (f *gatedFixture) token(t *testing.T, key, kid string) string {
	c := jwt.MapClaims{"iss": vIssuer, "aud": vAudience, "sub": "u", "exp": vNow.Add(time.Hour).Unix()}
	return signJWT(t, jwt.SigningMethodEdDSA, f.priv[key], kid, c)
}

// verifyAsync verifies tok in a goroutine; the channel gets its error.
func (f *gatedFixture) verifyAsync(ctx context.Context, tok string) <-chan error {
	ch := make(chan error, 1)
	go func() {
		_, err := f.v.Verify(ctx, tok)
		ch <- err
	}()
	return ch
}

func wait(t *testing.T, ch <-chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(guard):
		t.Fatal("a verification never returned")
		return nil
	}
}

// A known kid verifies while a refresh is stuck at a slow JWKS server:
// the refresh runs outside the lock readers take.
func TestRemoteKeySetKnownKidNotBlocked(t *testing.T) {
	t.Run("refresh for an unknown kid", func(t *testing.T) {
		f := newGatedFixture(t, "A")
		if err := wait(t, f.verifyAsync(context.Background(), f.token(t, "A", "A"))); err != nil {
			t.Fatalf("A refused: %v", err)
		}
		f.srv.waitArrival(t)
		f.srv.hold(f.set(t, "A", "B"))
		f.clock.Set(vNow.Add(MinRefreshInterval))
		unknown := f.verifyAsync(context.Background(), f.token(t, "B", "B"))
		f.srv.waitArrival(t) // the refresh is now stuck at the server
		for range 5 {
			if err := wait(t, f.verifyAsync(context.Background(), f.token(t, "A", "A"))); err != nil {
				t.Fatalf("A refused while the refresh is stuck: %v", err)
			}
		}
		select {
		case err := <-unknown:
			t.Fatalf("the unknown kid returned (%v) before the refresh did", err)
		default:
		}
		f.srv.release()
		if err := wait(t, unknown); err != nil {
			t.Fatalf("B refused after the refresh: %v", err)
		}
		f.srv.wantHits(t, 2)
	})

	t.Run("refresh of a stale set", func(t *testing.T) {
		f := newGatedFixture(t, "A")
		if err := wait(t, f.verifyAsync(context.Background(), f.token(t, "A", "A"))); err != nil {
			t.Fatalf("A refused: %v", err)
		}
		f.srv.waitArrival(t)
		f.srv.hold(f.set(t, "A"))
		f.clock.Set(vNow.Add(MaxKeyAge))
		// The first lookup of the stale set starts the refresh and does
		// not wait for it, nor do those after it.
		for range 5 {
			if err := wait(t, f.verifyAsync(context.Background(), f.token(t, "A", "A"))); err != nil {
				t.Fatalf("A refused while the stale set is refreshed: %v", err)
			}
		}
		f.srv.waitArrival(t)
		f.srv.release()
		f.keys.idle()
		f.srv.wantHits(t, 2)
	})
}

// Concurrent verifications of an unknown kid share one fetch, and the
// next unknown kids wait for MinRefreshInterval, whatever their number.
func TestRemoteKeySetOneFetch(t *testing.T) {
	f := newGatedFixture(t, "A")
	if err := wait(t, f.verifyAsync(context.Background(), f.token(t, "A", "A"))); err != nil {
		t.Fatalf("A refused: %v", err)
	}
	f.srv.waitArrival(t)
	f.srv.hold(f.set(t, "A", "B"))
	f.clock.Set(vNow.Add(MinRefreshInterval))
	var results []<-chan error
	for range 16 {
		results = append(results, f.verifyAsync(context.Background(), f.token(t, "B", "B")))
	}
	f.srv.waitArrival(t)
	f.srv.release()
	for i, ch := range results {
		if err := wait(t, ch); err != nil {
			t.Errorf("verification %d of B refused: %v", i, err)
		}
	}
	f.srv.wantHits(t, 2)

	// A flood of forged kids within the interval fetches nothing.
	var flood []<-chan error
	for i := range 50 {
		f.clock.Set(vNow.Add(MinRefreshInterval + time.Duration(i%29+1)*time.Second))
		flood = append(flood, f.verifyAsync(context.Background(), f.token(t, "A", fmt.Sprintf("forged-%d", i))))
	}
	for _, ch := range flood {
		if err := wait(t, ch); !errors.Is(err, ErrUnknownKey) {
			t.Errorf("forged kid: %v, want ErrUnknownKey", err)
		}
	}
	f.srv.wantHits(t, 2)
	// Past the interval, one more fetch.
	f.clock.Set(vNow.Add(2 * MinRefreshInterval))
	if err := wait(t, f.verifyAsync(context.Background(), f.token(t, "A", "forged"))); !errors.Is(err, ErrUnknownKey) {
		t.Errorf("forged kid: %v, want ErrUnknownKey", err)
	}
	f.srv.wantHits(t, 3)
}

// A caller that gives up does not end the fetch it started: the others
// waiting on it, and those after, get its keys.
func TestRemoteKeySetCancelledCaller(t *testing.T) {
	f := newGatedFixture(t)
	f.srv.hold(f.set(t, "A"))
	ctx, cancel := context.WithCancel(context.Background())
	gaveUp := f.verifyAsync(ctx, f.token(t, "A", "A"))
	f.srv.waitArrival(t)
	stays := f.verifyAsync(context.Background(), f.token(t, "A", "A"))
	cancel()
	if err := wait(t, gaveUp); !errors.Is(err, context.Canceled) {
		t.Fatalf("the cancelled verification: %v, want context.Canceled", err)
	}
	f.srv.release()
	if err := wait(t, stays); err != nil {
		t.Fatalf("the verification that waited on: %v", err)
	}
	if n := f.srv.cut.Load(); n != 0 {
		t.Errorf("%d fetches were cut off", n)
	}
	// The fetch succeeded: no other is due within the second.
	if err := wait(t, f.verifyAsync(context.Background(), f.token(t, "A", "A"))); err != nil {
		t.Fatalf("A refused after the fetch: %v", err)
	}
	f.srv.wantHits(t, 1)
}

// A fetch has its own timeout, whatever its callers' contexts allow.
func TestRemoteKeySetFetchTimeout(t *testing.T) {
	f := newGatedFixture(t)
	f.keys.timeout = 50 * time.Millisecond
	f.srv.hold(f.set(t, "A")) // never released while the fetch runs
	err := wait(t, f.verifyAsync(context.Background(), f.token(t, "A", "A")))
	if !errors.Is(err, ErrKeysUnavailable) {
		t.Fatalf("verification against a stuck JWKS: %v, want ErrKeysUnavailable", err)
	}
	wantRefused(t, err, "the token could not be verified")
	f.srv.wantHits(t, 1)
}

// An https JWKS URL that redirects to plain http is refused: the keys never
// come over a connection that can be rewritten. A redirect that stays on
// https is followed.
func TestRemoteKeySetRedirects(t *testing.T) {
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	var plainHits atomic.Int64
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		plainHits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_ = json.MarshalWrite(w, map[string]any{"keys": []map[string]string{pubJWK(t, "k1", pub)}})
	}))
	defer plain.Close()
	var tlsSrv *httptest.Server
	tlsSrv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/down":
			http.Redirect(w, r, plain.URL+"/jwks.json", http.StatusFound)
		case "/moved":
			http.Redirect(w, r, tlsSrv.URL+"/jwks.json", http.StatusMovedPermanently)
		default:
			w.Header().Set("Content-Type", "application/json")
			_ = json.MarshalWrite(w, map[string]any{"keys": []map[string]string{pubJWK(t, "k1", pub)}})
		}
	}))
	defer tlsSrv.Close()

	moved := NewRemoteKeySet(tlsSrv.URL+"/moved", identity.DecodeJWK, tlsSrv.Client(), nil)
	if keys, err := moved.Lookup(context.Background(), "k1"); err != nil || len(keys) != 1 {
		t.Errorf("https to https: %v, %v", keys, err)
	}
	down := NewRemoteKeySet(tlsSrv.URL+"/down", identity.DecodeJWK, tlsSrv.Client(), nil)
	if keys, err := down.Lookup(context.Background(), "k1"); err == nil || len(keys) != 0 {
		t.Errorf("https to http: got %v, %v; want refused", keys, err)
	}
	if n := plainHits.Load(); n != 0 {
		t.Errorf("the plain http server was asked %d times", n)
	}
	if tlsSrv.Client().CheckRedirect != nil {
		t.Error("the caller's client was changed")
	}
}

// BenchmarkParseJWKS is one fetch's parse of a set with a key of each
// type. It runs at most once per MinRefreshInterval, never per call.
func BenchmarkParseJWKS(b *testing.B) {
	k := testSigKeys(b)
	data := jwksOf(b, pubJWK(b, "rsa", &k.rsa.PublicKey), pubJWK(b, "ec", &k.ec.PublicKey), pubJWK(b, "ed", k.ed.Public()))
	b.ReportAllocs()
	for b.Loop() {
		if keys, err := ParseJWKS(data, identity.DecodeJWK); err != nil || len(keys) != 3 {
			b.Fatal(keys, err)
		}
	}
}
