package httpapi

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/clock"
	"github.com/toolgate/toolgate/internal/connect"
	"github.com/toolgate/toolgate/internal/connect/oauthtest"
	"github.com/toolgate/toolgate/internal/ledger"
)

// TestRefreshOutlivesItsCaller: a refresh runs to its end when the call
// that started it goes away meanwhile (with the ledger off, the call ends
// with its caller). The service rotates refresh tokens: once it answered,
// the old one is spent, and only the new one, stored, refreshes again.
func TestRefreshOutlivesItsCaller(t *testing.T) {
	clk := clock.NewManual(time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC))
	oauth := oauthtest.New(t, oauthtest.Options{ClientID: "gw", ClientSecret: "gw-secret", TokenLifetime: 10 * time.Minute, Clock: clk.Now})
	resource := httptest.NewServer(oauth.ResourceHandler())
	t.Cleanup(resource.Close)

	// The token endpoint, behind a proxy that holds a refresh until the
	// test lets it go, then has the service answer it whatever became of
	// the gateway's request, as a service does.
	arrived, release := make(chan struct{}, 1), make(chan struct{})
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if form, _ := url.ParseQuery(string(body)); form.Get("grant_type") == "refresh_token" {
			arrived <- struct{}{}
			<-release
		}
		req, _ := http.NewRequestWithContext(context.Background(), r.Method, oauth.TokenURL(), strings.NewReader(string(body)))
		req.Header = r.Header.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	}))
	t.Cleanup(proxy.Close)

	key, err := connect.ParseKey(connect.GenerateKey())
	if err != nil {
		t.Fatal(err)
	}
	keys, _ := connect.NewKeys(key)
	m, err := connect.New([]connect.Config{
		{Name: "gmail", AuthorizeURL: oauth.AuthorizeURL(), TokenURL: proxy.URL, ClientID: "gw", ClientSecret: "gw-secret"},
		{Name: "cal", AuthorizeURL: oauth.AuthorizeURL(), TokenURL: proxy.URL, ClientID: "gw", ClientSecret: "gw-secret"},
	}, connect.Options{Store: connect.NewMemory(clk), Keys: keys, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	s := startConnServer(t, ledger.Off, m, connTools(t, resource.URL))

	// Alice connects from the connections page (no call waits).
	link, _, err := m.Begin(t.Context(), "gmail", alice, "", s.URL+"/connections/gmail/callback")
	if err != nil {
		t.Fatal(err)
	}
	if status, page := s.Send(t, http.MethodGet, oauth.Authorize(t, link).String(), "", ""); status != http.StatusOK {
		t.Fatalf("callback: %d %s", status, page)
	}

	// Expired: the call that refreshes goes away while the service
	// answers.
	clk.Add(10 * time.Minute)
	ctx, cancel := context.WithCancel(t.Context())
	gone := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/tools/mail", strings.NewReader(`{"input":{},"identity":{"user":"alice","install":"in_1"}}`))
		req.Header.Set("Content-Type", "application/json")
		resp, err := s.client.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		gone <- err
	}()
	select {
	case <-arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("no refresh reached the token endpoint")
	}
	cancel()
	<-gone
	time.Sleep(100 * time.Millisecond) // the gateway sees its caller gone
	close(release)

	// The refreshed token is stored once the service answered: the next
	// call uses it, without refreshing again with the spent one.
	var a connAnswer
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if list, err := m.List(t.Context(), alice); err == nil && list[1].Name == "gmail" && list[1].Expires.After(clk.Now()) {
			break
		}
		if time.Now().After(deadline) {
			break // the call below says what went wrong
		}
	}
	status, body := s.Send(t, http.MethodPost, s.URL+"/tools/mail", "application/json", `{"input":{},"identity":{"user":"alice","install":"in_1"}}`)
	if a = decodeConn(t, body); status != http.StatusOK || a.IsError || !strings.Contains(a.Content, "alice@example.com") {
		t.Fatalf("the call after the caller went away: %d %+v", status, a)
	}
	if n := oauth.Count("token", "refresh_token"); n != 1 {
		t.Errorf("%d refreshes, want 1", n)
	}
}
