package httpapi

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/golang-jwt/jwt/v5"
	"go.uber.org/zap"

	"github.com/toolgate/toolgate/internal/apitest"
)

// invokeAs invokes the client tool where in loopback mode, for a user of
// an installation ("" for none) in a thread.
func invokeAs(s *server, user, install, thread, callID string) <-chan apitest.InvokeResult {
	identity := `{"user":"` + user + `"}`
	if install != "" {
		identity = `{"user":"` + user + `","install":"` + install + `"}`
	}
	return s.InvokeAsync("where", `{"input":{},"callId":"`+callID+`","context":{"source":"thread","threadId":"`+thread+`"},"identity":`+identity+`}`)
}

// TestInstallsApartHTTP: user ids are unique only within an installation.
// A call of u_1 in installation in_a on th_1 is not seen by the page of
// u_1 in in_b on th_1, nor by a page whose token names no installation:
// nothing on their streams, and their claim and result are 404 as for a
// call that does not exist. in_a's page answers it.
func TestInstallsApartHTTP(t *testing.T) {
	s := startPages(t)
	installsApart(t, s, s)
}

// installsApart runs TestInstallsApartHTTP's checks with the call made on
// runtime and the pages on pages (the same server, or two instances on
// one Redis).
func installsApart(t *testing.T, runtime, pages *server) {
	t.Helper()
	tokA := apitest.InstallPageToken(t, "u_1", "in_a", "th_1")
	tokB := apitest.InstallPageToken(t, "u_1", "in_b", "th_1")
	tokNone := apitest.PageToken(t, "u_1", "th_1")
	open := func(tok string) *apitest.PageStream {
		t.Helper()
		ps, status, body := apitest.OpenStream(t, pages.URL, tok, "th_1")
		if ps == nil {
			t.Fatalf("stream: %d %s", status, body)
		}
		return ps
	}
	pageA, pageB, pageNone := open(tokA), open(tokB), open(tokNone)

	inv := invokeAs(runtime, "u_1", "in_a", "th_1", "ia_1")
	if o := pageA.Next(t); o.CallID != "ia_1" {
		t.Fatalf("in_a's page got %+v", o)
	}
	pageB.None(t, 100*time.Millisecond)
	pageNone.None(t, 10*time.Millisecond)
	for name, tok := range map[string]string{"in_b's page": tokB, "a page of no installation": tokNone} {
		late := open(tok)
		late.None(t, 50*time.Millisecond)
		late.Close()
		if status, body := pages.Claim(t, tok, "ia_1"); status != http.StatusNotFound || apitest.ErrCode(body) != "unknown_call" {
			t.Errorf("%s claims: %d %s, want 404 unknown_call", name, status, body)
		}
		if status, body := pages.PostResult(t, tok, "ia_1", `{"result":"stolen"}`); status != http.StatusNotFound || apitest.ErrCode(body) != "unknown_call" {
			t.Errorf("%s posts: %d %s, want 404 unknown_call", name, status, body)
		}
	}
	if status, body := pages.Claim(t, tokA, "ia_1"); status != http.StatusOK {
		t.Fatalf("in_a's page claims: %d %s", status, body)
	}
	if status, body := pages.PostResult(t, tokA, "ia_1", `{"result":"mine"}`); status != http.StatusOK {
		t.Fatalf("in_a's page posts: %d %s", status, body)
	}
	if r := apitest.WaitInvoke(t, inv); r.A.Content != "mine" || r.A.IsError {
		t.Errorf("invoke: %s", r.Raw)
	}

	// And the other way round: a call of no installation is not in_a's.
	inv = invokeAs(runtime, "u_1", "", "th_1", "ia_2")
	if o := pageNone.Next(t); o.CallID != "ia_2" {
		t.Fatalf("the page of no installation got %+v", o)
	}
	pageA.None(t, 100*time.Millisecond)
	if status, body := pages.Claim(t, tokA, "ia_2"); status != http.StatusNotFound {
		t.Errorf("in_a's page claims a call of none: %d %s", status, body)
	}
	if status, body := pages.PostResult(t, tokNone, "ia_2", `{"result":"none"}`); status != http.StatusOK {
		t.Fatalf("the page of no installation posts: %d %s", status, body)
	}
	if r := apitest.WaitInvoke(t, inv); r.A.Content != "none" {
		t.Errorf("invoke: %s", r.Raw)
	}
}

// TestPageTokenInstall: with install_claim set in callers, installations
// are in use, and a page token must name one (401 saying so otherwise);
// the caller token's installation and the page token's must match for the
// page to see the call. The pages' install_claim names the page token's
// claim. Without install_claim in callers a page token may name none.
func TestPageTokenInstall(t *testing.T) {
	const callerSecret = "caller-secret-0123456789-abcdefghij-klm"
	start := func(t *testing.T, callerInstallClaim, pageInstallClaim string) *server {
		callers, pages, err := NewAuthenticators(
			&TokenConfig{Secret: callerSecret, Issuer: "https://runtime.test", Audience: "toolgate", InstallClaim: callerInstallClaim},
			&TokenConfig{Secret: apitest.PageSecret, Issuer: "https://app.test", Audience: "toolgate-pages", InstallClaim: pageInstallClaim},
			zap.NewNop())
		if err != nil {
			t.Fatal(err)
		}
		o := pagesOptions(t)
		o.api.Callers, o.api.Pages = callers, pages
		return startServer(t, o)
	}

	t.Run("required", func(t *testing.T) {
		s := start(t, "tenant", "")
		notString := apitest.PageClaims("u_1", "th_1")
		notString["install"] = 7
		for name, tok := range map[string]string{
			"no install":     apitest.PageToken(t, "u_1", "th_1"),
			"empty install":  apitest.InstallPageToken(t, "u_1", "", "th_1"),
			"number install": apitest.SignHS256(t, notString, apitest.PageSecret),
		} {
			ps, status, body := apitest.OpenStream(t, s.URL, tok, "th_1")
			if ps != nil || status != http.StatusUnauthorized || apitest.ErrCode(body) != "invalid_token" || !strings.Contains(body, `\"install\" claim`) {
				t.Errorf("%s: stream %d %s; want 401 naming the install claim", name, status, body)
			}
			if status, body := s.Claim(t, tok, "x"); status != http.StatusUnauthorized {
				t.Errorf("%s: claim %d %s", name, status, body)
			}
		}

		// The caller's installation is its token's tenant claim; the page's
		// is its token's install claim.
		caller, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
			"sub": "u_1", "tenant": "in_a", "aud": "toolgate", "iss": "https://runtime.test", "exp": time.Now().Add(time.Minute).Unix(),
		}).SignedString([]byte(callerSecret))
		tokA := apitest.InstallPageToken(t, "u_1", "in_a", "th_1")
		tokB := apitest.InstallPageToken(t, "u_1", "in_b", "th_1")
		pageA, status, body := apitest.OpenStream(t, s.URL, tokA, "th_1")
		if pageA == nil {
			t.Fatalf("in_a's page: %d %s", status, body)
		}
		pageB, _, _ := apitest.OpenStream(t, s.URL, tokB, "th_1")
		inv := make(chan apitest.Answer, 1)
		go func() {
			var a apitest.Answer
			defer func() { inv <- a }()
			req, _ := http.NewRequest(http.MethodPost, s.URL+"/tools/where", strings.NewReader(`{"input":{},"callId":"pt_1",`+apitest.ThreadCtx+`}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+caller)
			if resp, err := s.client.Do(req); err == nil {
				_ = json.UnmarshalRead(resp.Body, &a)
				resp.Body.Close()
			}
		}()
		if o := pageA.Next(t); o.CallID != "pt_1" {
			t.Fatalf("in_a's page got %+v", o)
		}
		pageB.None(t, 100*time.Millisecond)
		if status, body := s.Claim(t, tokB, "pt_1"); status != http.StatusNotFound {
			t.Errorf("in_b's page claims: %d %s", status, body)
		}
		if status, body := s.PostResult(t, tokA, "pt_1", `{"result":"a"}`); status != http.StatusOK {
			t.Fatalf("in_a's page posts: %d %s", status, body)
		}
		select {
		case a := <-inv:
			if a.Content != "a" || a.IsError {
				t.Errorf("invoke: %+v", a)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the invoke did not answer")
		}
	})

	t.Run("named by the pages", func(t *testing.T) {
		s := start(t, "tenant", "org")
		claims := apitest.PageClaims("u_1", "th_1")
		claims["install"] = "in_a" // not the claim the pages read
		if ps, status, body := apitest.OpenStream(t, s.URL, apitest.SignHS256(t, claims, apitest.PageSecret), "th_1"); ps != nil || status != http.StatusUnauthorized || !strings.Contains(body, `\"org\" claim`) {
			t.Errorf("a token with install but no org: %d %s", status, body)
		}
		claims["org"] = "in_a"
		if ps, status, body := apitest.OpenStream(t, s.URL, apitest.SignHS256(t, claims, apitest.PageSecret), "th_1"); ps == nil {
			t.Errorf("a token with org: %d %s", status, body)
		}
	})

	t.Run("not required", func(t *testing.T) {
		s := start(t, "", "")
		if ps, status, body := apitest.OpenStream(t, s.URL, apitest.PageToken(t, "u_1", "th_1"), "th_1"); ps == nil {
			t.Errorf("callers without install_claim, a page token without install: %d %s", status, body)
		}
	})
}
