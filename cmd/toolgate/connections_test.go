package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-json-experiment/json"

	"github.com/toolgate/toolgate/internal/connect/oauthtest"
)

// restart starts the instance's process again, on the same config (the
// same port, ledger file and storage), after kill.
func (in *instance) restart(t *testing.T) {
	t.Helper()
	in.kill()
	in.run(t)
}

// connectCard is the authorization URL of the connect card a call answered.
func connectCard(t *testing.T, a answer) string {
	t.Helper()
	var card struct {
		Elements []struct {
			ID  string `json:"id"`
			URL string `json:"url"`
		} `json:"elements"`
	}
	if a.Status != "action_required" || json.Unmarshal(a.Card, &card) != nil || len(card.Elements) != 1 ||
		card.Elements[0].ID != "connect" || card.Elements[0].URL == "" {
		t.Fatalf("want a connect card, got %+v %s", a, a.Card)
	}
	return card.Elements[0].URL
}

// TestConnectionSurvivesKill: a call waiting on the connect card survives
// kill -9: on the restarted process (the same bolt file, the same Caddy
// storage and so the same generated connection key) the card's callback
// works once, runs the waiting call exactly once, and the user stays
// connected across a further restart. With the storage gone, the key is a
// new one: the token sealed with the old key no longer opens and counts as
// none, so the user gets the card again, and connecting replaces it.
func TestConnectionSurvivesKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	prov := oauthtest.New(t, oauthtest.Options{ClientID: "gw", ClientSecret: "pw"})
	mail := httptest.NewServer(prov.ResourceHandler())
	t.Cleanup(mail.Close)
	ledgerDir, storage := t.TempDir(), t.TempDir()
	line := fmt.Sprintf(`ledger bolt %s
		connection mail {
			authorize_url %s
			token_url %s
			client_id gw
			client_secret pw
			scopes mail.read
		}
		tool mail {
			description "Read the user's mail."
			input_schema `+"`"+`{"type":"object"}`+"`"+`
			target url GET %s/messages
			header Authorization "Bearer ${connection.mail}"
			result "{'content': 'mail of ' + body.subject, 'isError': status != 200}"
		}`, filepath.Join(ledgerDir, "ledger.db"), prov.AuthorizeURL(), prov.TokenURL(), mail.URL)
	in := startInstance(t, line, mail.URL, storage)

	_, a := in.post(t, "/tools/mail", `{"input":{},"callId":"m1",`+envelope+`}`)
	authURL := connectCard(t, a)
	if n := len(prov.ResourceHits()); n != 0 {
		t.Fatalf("the mail service was called %d times before the user connected", n)
	}

	in.restart(t)
	cb := prov.Authorize(t, authURL)
	if !strings.HasPrefix(cb.String(), in.base+"/connections/mail/callback?") {
		t.Fatalf("the service sends the browser to %s", cb)
	}
	callback := func() (int, string) {
		t.Helper()
		resp, err := http.Get(cb.String())
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if status, page := callback(); status != 200 || !strings.Contains(page, "Mail is connected") || !strings.Contains(page, "went on") {
		t.Fatalf("the callback after the restart: %d %s\n%s", status, page, in.log)
	}
	if status, _ := callback(); status != http.StatusBadRequest {
		t.Errorf("the same callback again: %d; want 400, the state spent", status)
	}
	if hits := prov.ResourceHits(); len(hits) != 1 || hits[0].Subject != "alice@example.com" {
		t.Fatalf("the mail service got %+v; want the waiting call once, with alice's token", hits)
	}
	if status, raw := in.get(t, "/calls/m1?user=u_1&install=in_1"); status != 200 ||
		!strings.Contains(string(raw), `"status":"done","isError":false,"content":"mail of alice@example.com"`) {
		t.Errorf("the call that waited: %d %s", status, raw)
	}

	// Connected across a restart: the next call needs no card.
	in.restart(t)
	if status, a := in.post(t, "/tools/mail", `{"input":{},"callId":"m2",`+envelope+`}`); status != 200 || a.Status != "done" || a.Content != "mail of alice@example.com" {
		t.Fatalf("a call after a second restart: %d %+v", status, a)
	}
	if n, auths := len(prov.ResourceHits()), prov.Count("authorize", ""); n != 2 || auths != 1 {
		t.Errorf("%d calls reached the mail service, %d authorizations; want 2 and 1", n, auths)
	}

	// A new generated key: the old token does not open, and the card comes
	// back. In production, connection_keys in a file keeps the key when
	// Caddy's storage is lost or not shared (docs/connections.md).
	in.kill()
	if err := os.RemoveAll(storage); err != nil {
		t.Fatal(err)
	}
	in.run(t)
	_, a = in.post(t, "/tools/mail", `{"input":{},"callId":"m3",`+envelope+`}`)
	authURL = connectCard(t, a)
	if n := len(prov.ResourceHits()); n != 2 {
		t.Errorf("the mail service got %d calls; want none with a token the gateway cannot open", n)
	}
	status, raw := in.get(t, "/connections?user=u_1&install=in_1")
	var list struct {
		Connections []struct {
			Name      string `json:"name"`
			Connected bool   `json:"connected"`
		} `json:"connections"`
	}
	if status != 200 || json.Unmarshal(raw, &list) != nil || len(list.Connections) != 1 || list.Connections[0].Connected {
		t.Errorf("GET /connections with a new key: %d %s; want mail not connected", status, raw)
	}
	// Connecting again works with the new key.
	cb = prov.Authorize(t, authURL)
	if status, page := callback(); status != 200 || !strings.Contains(page, "Mail is connected") {
		t.Fatalf("connecting again: %d %s", status, page)
	}
	if n := len(prov.ResourceHits()); n != 3 {
		t.Errorf("the mail service got %d calls; want 3", n)
	}
}
