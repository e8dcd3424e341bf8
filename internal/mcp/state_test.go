package mcp

import (
	"strconv"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/gateway"
)

// BenchmarkState is a card's continuation signed and opened: once per
// card answered over MCP, never per call.
func BenchmarkState(b *testing.B) {
	s := &Server{key: []byte("0123456789abcdef0123456789abcdef"), now: time.Now, used: map[string]time.Time{}}
	c := Caller{Identity: gateway.Identity{User: "u_1", Install: "in_1"}}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		clear(s.used) // the sweep of spent nonces is not what is measured
		raw := s.sign(state{CallID: "toolu_01", User: "u_1", Install: "in_1", Exp: time.Now().Add(stateTTL).Unix(), Nonce: strconv.Itoa(i)})
		if _, err := s.open(raw, c); err != nil {
			b.Fatal(err)
		}
	}
}
