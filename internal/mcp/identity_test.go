package mcp

import (
	"errors"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/gateway"
)

// Who a call acts for: the verified caller first, then a _meta identity,
// then the local identity, then nobody; a malformed _meta identity is a
// protocol error even with a local identity to fall back on.
func TestCallerLocalIdentity(t *testing.T) {
	local := gateway.Identity{User: "u_local", Install: "in_local"}
	token := &sdk.RequestExtra{TokenInfo: Caller{Identity: gateway.Identity{User: "u_token"}}.TokenInfo(time.Now().Add(time.Minute))}
	meta := func(id any) sdk.Meta { return sdk.Meta{MetaIdentity: id} }
	for _, c := range []struct {
		name  string
		local gateway.Identity
		extra *sdk.RequestExtra
		meta  sdk.Meta
		want  gateway.Identity
		bad   bool
	}{
		{name: "nothing", want: gateway.Identity{}},
		{name: "the local identity", local: local, want: local},
		{name: "_meta wins", local: local, meta: meta(map[string]any{"user": "u_1", "install": "in_1"}), want: gateway.Identity{User: "u_1", Install: "in_1"}},
		{name: "_meta wins whole", local: local, meta: meta(map[string]any{"user": "u_2"}), want: gateway.Identity{User: "u_2"}},
		{name: "a null _meta identity is none", local: local, meta: meta(nil), want: local},
		{name: "the token wins", local: local, extra: token, meta: meta(map[string]any{"user": "u_1"}), want: gateway.Identity{User: "u_token"}},
		{name: "a malformed _meta identity", local: local, meta: meta("u_1"), bad: true},
		{name: "a _meta identity out of bounds", local: local, meta: meta(map[string]any{"user": "u\x1f1"}), bad: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := &Server{local: c.local}
			got, err := s.caller(c.extra, c.meta)
			var je *jsonrpc.Error
			switch {
			case c.bad && (err == nil || !errors.As(err, &je) || je.Code != jsonrpc.CodeInvalidParams):
				t.Fatalf("got %+v, %v; want an invalid params error", got, err)
			case !c.bad && err != nil:
				t.Fatal(err)
			case !c.bad && got.Identity != c.want:
				t.Errorf("caller %+v, want %+v", got.Identity, c.want)
			}
		})
	}
}

// plainIdentity reads what marshalling a _meta identity and unmarshalling
// it into a gateway.Identity reads, and leaves every other value to that.
func TestPlainIdentity(t *testing.T) {
	for _, raw := range []any{
		map[string]any{"user": "u_1", "install": "in_1"},
		map[string]any{"user": "u_1"},
		map[string]any{"install": "in_1"},
		map[string]any{},
		map[string]any{"user": "<é>&\u2028"},
		map[string]any{"user": "u\xff"},
		map[string]any{"User": "u_1"},
		map[string]any{"user": "u_1", "USER": "u_2"},
		map[string]any{"user": "u_1", "extra": true},
		map[string]any{"user": 5.0},
		map[string]any{"user": nil},
		"u_1",
		[]any{"u_1"},
	} {
		var want gateway.Identity
		b, _ := json.Marshal(raw)
		wantOK := json.Unmarshal(b, &want) == nil
		got, ok := plainIdentity(raw)
		if ok && (!wantOK || got != want) {
			t.Errorf("%#v: read %+v, the round trip %+v (%v)", raw, got, want, wantOK)
		}
	}
	if _, ok := plainIdentity(map[string]any{"user": "u_1", "install": "in_1"}); !ok {
		t.Error("a plain identity was not read")
	}
}
