package httpapi

import (
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/toolgate/toolgate/internal/apitest"
	"github.com/toolgate/toolgate/internal/dispatch"
	"github.com/toolgate/toolgate/internal/manifest"
)

// These tests replay the card attacks of docs/security.md (see
// apitest.AttackRig) on the upstream and on another component against the
// API, and check that nothing is sent. (The attack on the admin API needs a
// Caddy whose admin API is on: it is the Caddy module's.)

// startAttackGateway serves the rig's manifest with components api and
// files.
func startAttackGateway(t *testing.T) *apitest.AttackRig {
	rig := apitest.NewAttackRig(t)
	s := startServer(t, options{
		sources: []manifest.Source{{Name: "manifest tools.json", Tools: parseTools(t, rig.Manifest())}},
		components: map[string]*dispatch.Component{
			"api":   component(t, "api", rig.API.URL, map[string]string{"API_KEY": apitest.SecretOfAPI}),
			"files": component(t, "files", rig.Files.URL, map[string]string{"API_KEY": apitest.SecretOfFiles}),
		},
		issuer:          "https://tools.test",
		upstreamTimeout: 2 * time.Second,
	})
	rig.Client = s.Client
	return rig
}

// (b) A url target answers a card whose button sends a component's env to
// the upstream's own host.
func TestCardAttackEnvToUpstream(t *testing.T) {
	rig := startAttackGateway(t)
	rig.Refused(t, "ext_card", "env", "atk_env", "only app components may answer action-required cards")
	if reqs := rig.Ext.Requests(); len(reqs) != 1 || reqs[0].Path != "/card/env" {
		t.Errorf("the upstream was sent %d requests (%+v), want only the tool call", len(reqs), reqs)
	}
	// The app's own component may not send its env through a button either.
	rig.Refused(t, "api_card", "env", "atk_env_app", `not a "url" target`)
	rig.Refused(t, "api_card", "own_env", "atk_own_env", "${env.API_KEY}: a button may reference ${input…} only")
	for name, u := range map[string]*apitest.CountingUpstream{"ext": rig.Ext, "api": rig.API, "files": rig.Files} {
		if u.SawSecret() {
			t.Errorf("%s was sent a secret", name)
		}
	}
	if n := len(rig.Ext.Requests()); n != 1 {
		t.Errorf("the upstream was sent %d requests, want only the first tool call", n)
	}
	for _, r := range rig.API.Requests() {
		if r.Path == "/items" {
			t.Errorf("the refused button ran: %+v", r)
		}
	}
}

// (c) Component api answers a card whose button deletes component files'
// data with the user's identity token.
func TestCardAttackOtherComponent(t *testing.T) {
	rig := startAttackGateway(t)
	rig.Refused(t, "api_card", "other", "atk_other", `component "files": a button runs on component "api"`)
	if n := len(rig.Files.Requests()); n != 0 {
		t.Errorf("component files was sent %d requests", n)
	}
}

// (d) A card of api whose button runs on api still works: once, with the
// identity token for api.
func TestCardOwnComponentStillWorks(t *testing.T) {
	rig := startAttackGateway(t)
	status, raw := rig.Do(t, "POST", "/tools/api_card", `{"input":{"kind":"own"},"callId":"own_1",`+apitest.ThreadCtx+`,`+apitest.Who+`}`)
	var paused struct {
		Status string `json:"status"`
		Card   struct {
			Elements []struct {
				ID string `json:"id"`
			} `json:"elements"`
		} `json:"card"`
	}
	if err := json.Unmarshal(raw, &paused); status != 200 || err != nil || paused.Status != "action_required" || len(paused.Card.Elements) != 1 {
		t.Fatalf("own card: %d %s", status, raw)
	}
	var first apitest.Answer
	for i := range 2 {
		status, raw = rig.Do(t, "POST", "/calls/own_1/resume", `{"buttonId":"go",`+apitest.Who+`}`)
		var a apitest.Answer
		if err := json.Unmarshal(raw, &a); status != 200 || err != nil || a.Status != "done" || a.IsError || a.Content != "ran POST /items/z9" {
			t.Fatalf("resume %d: %d %s", i, status, raw)
		}
		if i == 0 {
			first = a
		} else if a != first {
			t.Errorf("the second resume answered %+v, the first %+v", a, first)
		}
	}
	var ran []apitest.Recorded
	for _, r := range rig.API.Requests() {
		if r.Path == "/items/z9" {
			ran = append(ran, r)
		}
	}
	if len(ran) != 1 {
		t.Fatalf("the button ran %d times", len(ran))
	}
	if string(ran[0].Body) != `{"id":"z9"}` || ran[0].Header.Get("Kazzle-Tool-Context") != `{"source":"thread","threadId":"th_1"}` {
		t.Errorf("the button sent %s %v", ran[0].Body, ran[0].Header)
	}
	claims := rig.Client.VerifyWithJWKS(t, strings.TrimPrefix(ran[0].Header.Get("Authorization"), "Bearer "))
	if claims["sub"] != "u_1" || claims["install"] != "in_1" {
		t.Errorf("the button's identity token names %v", claims)
	}
	if n := len(rig.Files.Requests()); n != 0 {
		t.Errorf("component files was sent %d requests", n)
	}
}
