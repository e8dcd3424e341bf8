package mcp

import (
	"context"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/golang-jwt/jwt/v5"
	"go.uber.org/zap"

	"github.com/toolgate/toolgate/internal/clock"
	"github.com/toolgate/toolgate/internal/gateway"
)

var stateT0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// spentIDs is a ledger's Spend in memory, on a clock.
type spentIDs struct {
	clock clock.Clock
	ids   map[string]time.Time
}

func (s *spentIDs) spend(_ context.Context, id string, until time.Time) (bool, error) {
	if exp, ok := s.ids[id]; ok && exp.After(s.clock.Now()) {
		return false, nil
	}
	s.ids[id] = until
	return true, nil
}

// stateServer is a Server with only what sign and open need, and the ids
// it spent.
func stateServer(c clock.Clock) (*Server, *spentIDs) {
	spent := &spentIDs{clock: c, ids: map[string]time.Time{}}
	return &Server{key: []byte("0123456789abcdef0123456789abcdef"), clock: c, spend: spent.spend}, spent
}

func callerOf(user, install string) Caller {
	return Caller{Identity: gateway.Identity{User: user, Install: install}}
}

// newState is the state askCard would sign at the clock's time.
func newState(s *Server, nonce string) state {
	return state{CallID: "toolu_01", User: "u_1", Install: "in_1", RegisteredClaims: jwt.RegisteredClaims{
		ExpiresAt: jwt.NewNumericDate(s.clock.Now().Add(stateTTL)),
		ID:        nonce,
	}}
}

func mustSign(t testing.TB, s *Server, st state) string {
	t.Helper()
	raw, err := s.sign(st)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// signAs signs claims with any method and key, as someone forging a
// state would.
func signAs(t *testing.T, m jwt.SigningMethod, key any, claims jwt.Claims) string {
	t.Helper()
	raw, err := jwt.NewWithClaims(m, claims).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// withPayload is raw with its payload changed by edit, header and
// signature kept.
func withPayload(t *testing.T, raw string, edit func(map[string]any)) string {
	t.Helper()
	parts := strings.Split(raw, ".")
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var claims map[string]any
	if err := json.Unmarshal(b, &claims); err != nil {
		t.Fatal(err)
	}
	edit(claims)
	b, _ = json.Marshal(claims)
	parts[1] = base64.RawURLEncoding.EncodeToString(b)
	return strings.Join(parts, ".")
}

func TestStateOpen(t *testing.T) {
	clk := clock.NewManual(stateT0)
	s, _ := stateServer(clk)
	ctx := context.Background()
	raw := mustSign(t, s, newState(s, "n1"))
	st, err := s.open(ctx, raw, callerOf("u_1", "in_1"), viaElicitation)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	if st.CallID != "toolu_01" || st.User != "u_1" || st.Install != "in_1" || st.ID != "n1" || !st.ExpiresAt.Time.Equal(stateT0.Add(stateTTL)) {
		t.Errorf("opened %+v", st)
	}
	// The state is a JWT: HS256 with its fields, exp and jti as claims.
	parts := strings.Split(raw, ".")
	if len(parts) != 3 {
		t.Fatalf("state %q is not a compact JWS", raw)
	}
	header, _ := base64.RawURLEncoding.DecodeString(parts[0])
	if !strings.Contains(string(header), `"alg":"HS256"`) {
		t.Errorf("header %s", header)
	}
	// Valid until its exp, not at it.
	clk.Set(stateT0.Add(stateTTL - time.Second))
	if _, err := s.open(ctx, mustSign(t, s, newState(s, "n2")), callerOf("u_1", "in_1"), viaElicitation); err != nil {
		t.Errorf("open before exp: %v", err)
	}
}

func TestStateOpenRefused(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	u1 := callerOf("u_1", "in_1")
	tests := []struct {
		name   string
		raw    func(t *testing.T, s *Server) string
		caller Caller
		at     time.Duration // since stateT0, when opened
		want   string
	}{
		{"tampered exp", func(t *testing.T, s *Server) string {
			return withPayload(t, mustSign(t, s, newState(s, "n")), func(c map[string]any) { c["exp"] = c["exp"].(float64) + 3600 })
		}, u1, 0, "does not verify"},
		{"tampered user", func(t *testing.T, s *Server) string {
			return withPayload(t, mustSign(t, s, newState(s, "n")), func(c map[string]any) { c["user"] = "u_2" })
		}, callerOf("u_2", "in_1"), 0, "does not verify"},
		{"signed with another key", func(t *testing.T, s *Server) string {
			return signAs(t, jwt.SigningMethodHS256, []byte("another key, another key, another"), newState(s, "n"))
		}, u1, 0, "does not verify"},
		{"alg none", func(t *testing.T, s *Server) string {
			return signAs(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, newState(s, "n"))
		}, u1, 0, "does not verify"},
		{"HS512 with the same key", func(t *testing.T, s *Server) string {
			return signAs(t, jwt.SigningMethodHS512, key, newState(s, "n"))
		}, u1, 0, "does not verify"},
		{"signature respelled", func(t *testing.T, s *Server) string {
			// HS256's 32 bytes end in a character with 2 spare bits.
			raw := mustSign(t, s, newState(s, "n"))
			const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
			return raw[:len(raw)-1] + string(alphabet[strings.IndexByte(alphabet, raw[len(raw)-1])^1])
		}, u1, 0, "malformed"},
		{"expired", func(t *testing.T, s *Server) string { return mustSign(t, s, newState(s, "n")) }, u1, stateTTL, "expired"},
		{"another user", func(t *testing.T, s *Server) string { return mustSign(t, s, newState(s, "n")) }, callerOf("u_2", "in_1"), 0, "another caller"},
		{"another install", func(t *testing.T, s *Server) string { return mustSign(t, s, newState(s, "n")) }, callerOf("u_1", "in_2"), 0, "another caller"},
		{"no exp", func(t *testing.T, s *Server) string {
			st := newState(s, "n")
			st.ExpiresAt = nil
			return mustSign(t, s, st)
		}, u1, 0, "malformed"},
		{"no nonce", func(t *testing.T, s *Server) string { return mustSign(t, s, newState(s, "")) }, u1, 0, "malformed"},
		{"no call", func(t *testing.T, s *Server) string {
			st := newState(s, "n")
			st.CallID = ""
			return mustSign(t, s, st)
		}, u1, 0, "malformed"},
		{"issued for the view", func(t *testing.T, s *Server) string {
			st := newState(s, "n")
			st.Via = viaView
			return mustSign(t, s, st)
		}, u1, 0, "another way"},
		{"garbage", func(*testing.T, *Server) string { return "garbage" }, u1, 0, "malformed"},
		{"empty", func(*testing.T, *Server) string { return "" }, u1, 0, "malformed"},
		{"the old body.mac form", func(t *testing.T, s *Server) string {
			raw := mustSign(t, s, newState(s, "n"))
			parts := strings.Split(raw, ".")
			return parts[1] + "." + parts[2]
		}, u1, 0, "malformed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clock.NewManual(stateT0)
			s, spent := stateServer(clk)
			ctx := context.Background()
			raw := tt.raw(t, s)
			clk.Set(stateT0.Add(tt.at))
			st, err := s.open(ctx, raw, tt.caller, viaElicitation)
			if err == nil {
				t.Fatalf("open accepted %+v", st)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("open: %v, want it to say %q", err, tt.want)
			}
			if len(spent.ids) != 0 {
				t.Errorf("a refused state was spent: %v", spent.ids)
			}
		})
	}
}

// A state opens once; a refused caller does not spend it; a spent nonce
// is forgotten once its state has expired.
func TestStateOnce(t *testing.T) {
	clk := clock.NewManual(stateT0)
	s, _ := stateServer(clk)
	ctx := context.Background()
	raw := mustSign(t, s, newState(s, "n"))
	if _, err := s.open(ctx, raw, callerOf("u_2", "in_1"), viaElicitation); err == nil || !strings.Contains(err.Error(), "another caller") {
		t.Fatalf("another caller: %v", err)
	}
	if _, err := s.open(ctx, raw, callerOf("u_1", "in_1"), viaElicitation); err != nil {
		t.Fatalf("the owner after a refused stranger: %v", err)
	}
	if _, err := s.open(ctx, raw, callerOf("u_1", "in_1"), viaElicitation); err == nil || !strings.Contains(err.Error(), "already used") {
		t.Fatalf("reused: %v", err)
	}
	// Another state with the same nonce is the same state.
	clk.Add(time.Minute)
	if _, err := s.open(ctx, mustSign(t, s, newState(s, "n")), callerOf("u_1", "in_1"), viaElicitation); err == nil || !strings.Contains(err.Error(), "already used") {
		t.Fatalf("same nonce, later exp: %v", err)
	}
	clk.Set(stateT0.Add(stateTTL + time.Second))
	if _, err := s.open(ctx, mustSign(t, s, newState(s, "other")), callerOf("u_1", "in_1"), viaElicitation); err != nil {
		t.Fatal(err)
	}
	// Its nonce's expiry passed with it: a state under it would be
	// fresh (and signed only by someone holding the key).
	if _, err := s.open(ctx, mustSign(t, s, newState(s, "n")), callerOf("u_1", "in_1"), viaElicitation); err != nil {
		t.Errorf("a new state under the expired state's nonce: %v", err)
	}
}

// BenchmarkState is a card's continuation signed and opened: once per
// card answered over MCP, never per call.
func BenchmarkState(b *testing.B) {
	s, spent := stateServer(clock.Real)
	ctx := context.Background()
	c := callerOf("u_1", "in_1")
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		clear(spent.ids) // the sweep of spent nonces is not what is measured
		raw := mustSign(b, s, newState(s, strconv.Itoa(i)))
		if _, err := s.open(ctx, raw, c, viaElicitation); err != nil {
			b.Fatal(err)
		}
	}
}

// A ledger that cannot say whether a state was used refuses it (fail
// closed), without naming the ledger's error to the client; once the
// ledger answers again the same state opens.
func TestStateLedgerDown(t *testing.T) {
	clk := clock.NewManual(stateT0)
	s, spent := stateServer(clk)
	s.logger = zap.NewNop()
	ctx := context.Background()
	raw := mustSign(t, s, newState(s, "n"))
	working := s.spend
	s.spend = func(context.Context, string, time.Time) (bool, error) {
		return true, errors.New("ledger: unavailable: redis 10.0.0.7:6379")
	}
	_, err := s.open(ctx, raw, callerOf("u_1", "in_1"), viaElicitation)
	if err == nil || !strings.Contains(err.Error(), "cannot be checked") || strings.Contains(err.Error(), "10.0.0.7") {
		t.Fatalf("open with the ledger down: %v; want a refusal that names no server", err)
	}
	if len(spent.ids) != 0 {
		t.Fatalf("spent while the ledger was down: %v", spent.ids)
	}
	s.spend = working
	if _, err := s.open(ctx, raw, callerOf("u_1", "in_1"), viaElicitation); err != nil {
		t.Fatalf("open once the ledger is back: %v", err)
	}
}

// TestStateOpenWays: an input response opens a state issued for either
// way an input request asks (a form, a connect card's URL), and only
// those: the view's state stays the view's; a state opened is spent.
func TestStateOpenWays(t *testing.T) {
	s, spent := stateServer(clock.NewManual(stateT0))
	ctx := context.Background()
	u1 := callerOf("u_1", "in_1")
	for i, via := range []string{viaElicitation, viaURL, viaView} {
		st := newState(s, "w"+strconv.Itoa(i))
		st.Via = via
		raw := mustSign(t, s, st)
		got, err := s.open(ctx, raw, u1, viaElicitation, viaURL)
		switch {
		case via == viaView && (err == nil || !strings.Contains(err.Error(), "another way")):
			t.Errorf("the view's state opened as an input response's: %+v %v", got, err)
		case via != viaView && (err != nil || got.Via != via):
			t.Errorf("a state for %q: %+v %v", via, got, err)
		}
		if _, err := s.open(ctx, raw, u1, viaElicitation); via == viaURL && err == nil {
			t.Error("a URL elicitation's state opened again, or as a form's")
		}
	}
	if len(spent.ids) != 2 {
		t.Errorf("spent %v, want the two opened", spent.ids)
	}
}
