package connect_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"go.etcd.io/bbolt"

	"github.com/toolgate/toolgate/internal/connect"
	"github.com/toolgate/toolgate/internal/connect/oauthtest"
)

// BenchmarkToken is what a call of a target with a connection adds: the
// user's token read from the store and opened (AES-GCM, JSON), fresh.
func BenchmarkToken(b *testing.B) {
	for _, tc := range []struct {
		name  string
		store func(b *testing.B) connect.Store
	}{
		{"memory", func(*testing.B) connect.Store { return connect.NewMemory(nil) }},
		{"bolt", func(b *testing.B) connect.Store {
			db, err := bbolt.Open(filepath.Join(b.TempDir(), "c.db"), 0o600, nil)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = db.Close() })
			s, err := connect.NewBolt(db, nil)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = s.Close() })
			return s
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			srv := oauthtest.New(b, oauthtest.Options{ClientID: "gw", ClientSecret: "s", TokenLifetime: time.Hour})
			key, _ := connect.ParseKey(connect.GenerateKey())
			keys, _ := connect.NewKeys(key)
			m, err := connect.New([]connect.Config{{Name: "mail", AuthorizeURL: srv.AuthorizeURL(), TokenURL: srv.TokenURL(), ClientID: "gw", ClientSecret: "s"}},
				connect.Options{Store: tc.store(b), Keys: keys})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			who := connect.Who{User: "alice", Install: "in_1"}
			auth, _, err := m.Begin(ctx, "mail", who, "c1", "http://127.0.0.1:1/cb")
			if err != nil {
				b.Fatal(err)
			}
			cb := srv.Authorize(b, auth)
			if _, err := m.Complete(ctx, "mail", cb.Query().Get("state"), cb.Query().Get("code"), ""); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, err := m.Token(ctx, "mail", who); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
