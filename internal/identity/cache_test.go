package identity

import (
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/clock"
	"github.com/toolgate/toolgate/internal/jsonread"
)

// cacheT0 is not on a second boundary, so iat truncation shows.
var cacheT0 = time.Date(2031, 1, 2, 3, 4, 5, 700_000_000, time.UTC)

func newCachingIssuer(t testing.TB, ttl time.Duration, clk *clock.Manual) *Issuer {
	t.Helper()
	k, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	iss := NewIssuer("toolgate", ttl, k)
	if clk != nil {
		iss.SetClock(clk)
	}
	return iss
}

func mustToken(t *testing.T, iss *Issuer, user, install, aud string) string {
	t.Helper()
	tok, err := iss.Token(user, install, aud)
	if err != nil {
		t.Fatalf("Token(%q, %q, %q): %v", user, install, aud, err)
	}
	return tok
}

// claimInt reads a numeric claim of a token's payload.
func claimInt(t *testing.T, tok, name string) int64 {
	t.Helper()
	n, ok := tokenPart(t, tok, 1)[name].(jsonread.Number)
	if !ok {
		t.Fatalf("claim %s is not a number", name)
	}
	v, err := strconv.ParseInt(n.String(), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func cacheLen(iss *Issuer) int {
	iss.mu.Lock()
	defer iss.mu.Unlock()
	return len(iss.cache)
}

func TestTokenCached(t *testing.T) {
	const ttl = 4 * time.Minute
	clk := clock.NewManual(cacheT0)
	iss := newCachingIssuer(t, ttl, clk)

	first := mustToken(t, iss, "u_1", "in_1", "notes")
	if got := claimInt(t, first, "iat"); got != cacheT0.Unix() {
		t.Fatalf("iat = %d, want %d", got, cacheT0.Unix())
	}

	// Within 3/4 of the ttl: the very same token, although a fresh one
	// would now carry a later iat.
	for _, d := range []time.Duration{0, time.Second, time.Minute, ttl*3/4 - time.Nanosecond} {
		clk.Set(cacheT0.Add(d))
		if got := mustToken(t, iss, "u_1", "in_1", "notes"); got != first {
			t.Errorf("at +%v: a new token, want the cached one", d)
		}
		if auth, err := iss.Authorization("u_1", "in_1", "notes"); err != nil || auth != "Bearer "+first {
			t.Errorf("at +%v: Authorization = %q, %v; want Bearer and the cached token", d, auth, err)
		}
		if d >= time.Second {
			fresh, err := iss.Sign("u_1", "in_1", "notes")
			if err != nil {
				t.Fatal(err)
			}
			if fresh == first {
				t.Fatalf("at +%v: Sign gave the cached token", d)
			}
		}
	}

	// The cached token still has about a quarter of its life left when it
	// is last handed out (iat is truncated to the second).
	last := cacheT0.Add(ttl*3/4 - time.Nanosecond)
	left := time.Unix(claimInt(t, first, "exp"), 0).Sub(last)
	if left <= ttl/4-time.Second || left > ttl/4 {
		t.Errorf("the last use of the cached token leaves %v, want about %v", left, ttl/4)
	}

	// From 3/4 of the ttl on: a new token with a later iat, cached in turn.
	clk.Set(cacheT0.Add(ttl * 3 / 4))
	second := mustToken(t, iss, "u_1", "in_1", "notes")
	if second == first {
		t.Fatal("the token was reused past 3/4 of its ttl")
	}
	if got, want := claimInt(t, second, "iat"), cacheT0.Add(ttl*3/4).Unix(); got != want {
		t.Errorf("new iat = %d, want %d", got, want)
	}
	if claimInt(t, second, "exp") <= claimInt(t, first, "exp") {
		t.Error("the new token does not expire later")
	}
	clk.Set(cacheT0.Add(ttl*3/4 + time.Minute))
	if got := mustToken(t, iss, "u_1", "in_1", "notes"); got != second {
		t.Error("the renewed token is not cached")
	}
	if n := cacheLen(iss); n != 1 {
		t.Errorf("cache holds %d entries, want 1", n)
	}
}

func TestTokenCacheKeys(t *testing.T) {
	clk := clock.NewManual(cacheT0)
	iss := newCachingIssuer(t, time.Minute, clk)
	keys := []struct{ user, install, aud string }{
		{"u_1", "in_1", "notes"},
		{"u_2", "in_1", "notes"},
		{"u_1", "in_2", "notes"},
		{"u_1", "in_1", "billing"},
		{"u_1", "", "notes"},
		// Concatenations that coincide must not share a cache entry.
		{"ab", "c", "x"},
		{"a", "bc", "x"},
		{"a", "b", "cx"},
	}
	seen := map[string]int{}
	for round := range 2 { // the second round is served from the cache
		for i, k := range keys {
			tok := mustToken(t, iss, k.user, k.install, k.aud)
			p := tokenPart(t, tok, 1)
			install, _ := p["install"].(string)
			if p["sub"] != k.user || install != k.install || p["aud"] != k.aud {
				t.Errorf("round %d: Token(%q, %q, %q) gave sub %v install %v aud %v", round, k.user, k.install, k.aud, p["sub"], p["install"], p["aud"])
			}
			if j, dup := seen[tok]; dup && j != i {
				t.Errorf("round %d: keys %d and %d share a token", round, j, i)
			}
			seen[tok] = i
		}
	}
	if len(seen) != len(keys) {
		t.Errorf("%d distinct tokens for %d keys over two rounds", len(seen), len(keys))
	}
	if n := cacheLen(iss); n != len(keys) {
		t.Errorf("cache holds %d entries, want %d", n, len(keys))
	}
}

// Sign always signs and leaves the cache alone.
func TestSignUncached(t *testing.T) {
	clk := clock.NewManual(cacheT0)
	iss := newCachingIssuer(t, time.Minute, clk)
	cached := mustToken(t, iss, "u", "i", "a")
	clk.Set(cacheT0.Add(time.Second))
	signed, err := iss.Sign("u", "i", "a")
	if err != nil {
		t.Fatal(err)
	}
	if signed == cached {
		t.Fatal("Sign returned the cached token")
	}
	if got, want := claimInt(t, signed, "iat"), cacheT0.Add(time.Second).Unix(); got != want {
		t.Errorf("Sign iat = %d, want %d", got, want)
	}
	if got := mustToken(t, iss, "u", "i", "a"); got != cached {
		t.Error("Sign replaced the cached token")
	}
	if _, err := iss.Sign("other", "i", "a"); err != nil {
		t.Fatal(err)
	}
	if n := cacheLen(iss); n != 1 {
		t.Errorf("cache holds %d entries after Sign, want 1", n)
	}
}

// fillCache puts n placeholder entries due for refresh at refreshAt
// straight into the cache: signing ten thousand tokens under -race takes
// far longer than the bound's logic needs.
func fillCache(iss *Issuer, prefix string, n int, refreshAt time.Time) {
	iss.mu.Lock()
	defer iss.mu.Unlock()
	for i := range n {
		iss.cache[tokenKey{fmt.Sprintf("%s_%d", prefix, i), "in", "aud"}] = cachedToken{token: "placeholder", refreshAt: refreshAt}
	}
}

func TestTokenCacheBounded(t *testing.T) {
	const ttl = 4 * time.Minute
	clk := clock.NewManual(cacheT0)
	iss := newCachingIssuer(t, ttl, clk)

	// All fresh: past the bound the cache starts over.
	fillCache(iss, "fresh", maxCachedTokens-5, cacheT0.Add(ttl*3/4))
	for n := range 10 {
		mustToken(t, iss, fmt.Sprintf("user_%d", n), "in", "aud")
		if l := cacheLen(iss); l > maxCachedTokens {
			t.Fatalf("after %d tokens the cache holds %d entries, over %d", n+1, l, maxCachedTokens)
		}
	}
	if l := cacheLen(iss); l != 5 {
		t.Errorf("cache holds %d entries, want 5 after starting over", l)
	}
	// The newest token is still served from the cache.
	tok := mustToken(t, iss, "user_9", "in", "aud")
	clk.Set(cacheT0.Add(time.Second))
	if again := mustToken(t, iss, "user_9", "in", "aud"); again != tok {
		t.Error("the newest token is not cached")
	}

	// Half stale: past the bound only the stale half is swept.
	clk.Set(cacheT0.Add(2 * time.Minute))
	iss = newCachingIssuer(t, ttl, clk)
	fillCache(iss, "old", maxCachedTokens/2, cacheT0.Add(ttl*3/4))
	fillCache(iss, "new", maxCachedTokens/2-1, cacheT0.Add(2*time.Minute+ttl*3/4))
	keep := mustToken(t, iss, "kept", "in", "aud")
	if l := cacheLen(iss); l != maxCachedTokens {
		t.Fatalf("cache holds %d entries, want %d", l, maxCachedTokens)
	}
	clk.Set(cacheT0.Add(ttl*3/4 + time.Second)) // the old half is stale
	mustToken(t, iss, "one_more", "in", "aud")
	if l := cacheLen(iss); l != maxCachedTokens/2+1 {
		t.Errorf("cache holds %d entries, want %d: the stale half swept, the fresh half kept", l, maxCachedTokens/2+1)
	}
	if got := mustToken(t, iss, "kept", "in", "aud"); got != keep {
		t.Error("a fresh token was dropped by the sweep")
	}

	// Filled through Token alone, the cache never passes the bound.
	clk.Set(cacheT0)
	iss = newCachingIssuer(t, ttl, clk)
	fillCache(iss, "pre", maxCachedTokens-100, cacheT0.Add(ttl*3/4))
	for n := range 300 {
		mustToken(t, iss, fmt.Sprintf("user_%d", n), "in", "aud")
		if l := cacheLen(iss); l > maxCachedTokens {
			t.Fatalf("after %d tokens the cache holds %d entries, over %d", n+1, l, maxCachedTokens)
		}
	}
	if l := cacheLen(iss); l != 200 {
		t.Errorf("cache holds %d entries, want 200", l)
	}
}

func TestTokenConcurrent(t *testing.T) {
	clk := clock.NewManual(cacheT0)
	iss := newCachingIssuer(t, time.Minute, clk)
	type key struct{ user, install, aud string }
	keys := []key{{"u_1", "in_1", "notes"}, {"u_2", "in_1", "notes"}, {"u_1", "in_2", "billing"}, {"u_3", "", "notes"}}

	run := func(advance bool) map[key]map[string]bool {
		var mu sync.Mutex
		got := map[key]map[string]bool{}
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Go(func() {
				for n := range 200 {
					if advance && g == 0 && n%20 == 0 {
						clk.Set(clk.Now().Add(10 * time.Second))
					}
					k := keys[(g+n)%len(keys)]
					tok, err := iss.Token(k.user, k.install, k.aud)
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					if got[k] == nil {
						got[k] = map[string]bool{}
					}
					got[k][tok] = true
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		return got
	}

	// A fixed clk: one token per key, whoever signed it.
	for k, toks := range run(false) {
		if len(toks) != 1 {
			t.Errorf("%v: %d distinct tokens at one instant, want 1", k, len(toks))
		}
		for tok := range toks {
			p := tokenPart(t, tok, 1)
			if p["sub"] != k.user || p["aud"] != k.aud {
				t.Errorf("%v got a token for sub %v aud %v", k, p["sub"], p["aud"])
			}
		}
	}
	// A moving clk: renewals race with reads; each key still gets only
	// its own tokens.
	for k, toks := range run(true) {
		for tok := range toks {
			p := tokenPart(t, tok, 1)
			if p["sub"] != k.user || p["aud"] != k.aud {
				t.Errorf("%v got a token for sub %v aud %v", k, p["sub"], p["aud"])
			}
		}
	}
	if n := cacheLen(iss); n != len(keys) {
		t.Errorf("cache holds %d entries, want %d", n, len(keys))
	}
}

// BenchmarkToken is the cost of a call's identity token with the cache:
// the same (user, install, aud) as every call of a conversation.
func BenchmarkToken(b *testing.B) {
	iss := newCachingIssuer(b, DefaultTTL, nil)
	if _, err := iss.Token("user_1", "install_1", "notes"); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := iss.Token("user_1", "install_1", "notes"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSign is the same token signed on every call, without the cache.
func BenchmarkSign(b *testing.B) {
	iss := newCachingIssuer(b, DefaultTTL, nil)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := iss.Sign("user_1", "install_1", "notes"); err != nil {
			b.Fatal(err)
		}
	}
}
