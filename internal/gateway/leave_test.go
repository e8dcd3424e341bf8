package gateway

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/toolgate/toolgate/internal/dispatch"
	"github.com/toolgate/toolgate/internal/identity"
	"github.com/toolgate/toolgate/internal/ledger"
	"github.com/toolgate/toolgate/internal/manifest"
	"github.com/toolgate/toolgate/internal/outbound"
)

// saveGateway is a gateway with one tool, save (POST /save on component api
// at upstream), a 5 s upstream timeout, and led (nil: the ledger off).
func saveGateway(t *testing.T, upstream string, led ledger.Ledger) *Gateway {
	t.Helper()
	comp, err := dispatch.NewComponent("api", upstream, nil)
	if err != nil {
		t.Fatal(err)
	}
	set, err := manifest.Compile([]manifest.Source{{Name: "test", Tools: []manifest.Tool{
		tool("save", dispatch.Spec{Type: "app", Component: "api", Method: "POST", Path: "/save"}),
	}}}, map[string]*dispatch.Component{"api": comp})
	if err != nil {
		t.Fatal(err)
	}
	key, _ := identity.GenerateKey()
	return New(Config{Tools: set, Issuer: identity.NewIssuer("gw", time.Minute, key), Client: outbound.NewClient(5*time.Second, 1<<20), Ledger: led})
}

// TestCallerLeaves: a caller that goes away while its call's target works
// does not cut the call. The target finishes, its result is recorded, and
// a repeat gets that result: the call ran once and nothing of it is lost
// (before, it was recorded as cancelled although the target had run it).
func TestCallerLeaves(t *testing.T) {
	var hits atomic.Int64
	arrived, release := make(chan struct{}, 1), make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		arrived <- struct{}{}
		<-release
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"content":"saved"}`)
	}))
	defer up.Close()
	led, err := ledger.OpenBolt(filepath.Join(t.TempDir(), "ledger.db"), ledger.BoltOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer led.Close()
	gw := saveGateway(t, up.URL, led)

	call := Call{Tool: "save", CallID: "c1", Input: jsontext.Value(`{}`), Identity: Identity{User: "u_1"}}
	ctx, cancel := context.WithCancel(context.Background())
	first := make(chan *Answer, 1)
	go func() {
		a, _ := gw.Invoke(ctx, call)
		first <- a
	}()
	select {
	case <-arrived:
	case <-time.After(5 * time.Second):
		t.Fatal("the call never reached its target")
	}
	cancel() // the caller goes away while the target works
	close(release)
	select {
	case a := <-first:
		if a == nil || a.IsError || a.Content != "saved" {
			t.Errorf("the call whose caller left answered %+v", a)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the call did not end")
	}
	again, err := gw.Invoke(context.Background(), call)
	if err != nil || again.Status != StatusDone || again.IsError || again.Content != "saved" {
		t.Errorf("the repeat answered %+v, %v; want the recorded result", again, err)
	}
	if n := hits.Load(); n != 1 {
		t.Errorf("the target ran %d times", n)
	}
}
