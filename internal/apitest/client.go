package apitest

import (
	"crypto/ed25519"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/golang-jwt/jwt/v5"
)

// Who is the envelope's identity when no callers are configured.
const Who = `"identity":{"user":"u_1","install":"in_1"}`

// Answer is what the Tools API answers an invoke or GET /calls/{id}.
type Answer struct {
	CallID   string `json:"callId"`
	Tool     string `json:"tool"`
	Status   string `json:"status"`
	IsError  bool   `json:"isError"`
	Content  string `json:"content"`
	Markdown string `json:"markdown"`
	EmbedURL string `json:"embedUrl"`
	Card     string `json:"card"`
	Error    *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// Client sends test requests to a toolgate mounted at Base (for example
// http://127.0.0.1:9080/toolgate) through HTTP.
type Client struct {
	HTTP *http.Client
	Base string
}

// Invoke posts body to /tools/{tool} with the headers given as name,
// value pairs, and reads the answer, failing the test if it is not JSON.
func (c Client) Invoke(t testing.TB, tool, body string, header ...string) (int, Answer) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, c.Base+"/tools/"+tool, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		t.Fatalf("invoke %s: %v", tool, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var a Answer
	if err := json.Unmarshal(raw, &a); err != nil {
		t.Fatalf("invoke %s: answer is not JSON: %q", tool, raw)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("invoke %s: Content-Type %q", tool, ct)
	}
	return resp.StatusCode, a
}

// Send makes one request to url (a whole URL, not a path) and returns the
// status and body.
func (c Client) Send(t testing.TB, method, url, ctype, body string, header ...string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(raw)
}

// Get fetches url (a whole URL) and returns the response, its body read.
func (c Client) Get(t testing.TB, url string, header ...string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// JWKSKeys reads the identity keys the gateway publishes, checking each is
// an EdDSA key and the answer may be cached.
func (c Client) JWKSKeys(t testing.TB) map[string]ed25519.PublicKey {
	t.Helper()
	resp, err := c.HTTP.Get(c.Base + "/.well-known/jwks.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.Header.Get("Cache-Control") == "" {
		t.Error("jwks has no Cache-Control")
	}
	var set struct {
		Keys []struct {
			Kty string `json:"kty"`
			Crv string `json:"crv"`
			X   string `json:"x"`
			Kid string `json:"kid"`
			Alg string `json:"alg"`
		} `json:"keys"`
	}
	if err := json.UnmarshalRead(resp.Body, &set); err != nil {
		t.Fatal(err)
	}
	out := map[string]ed25519.PublicKey{}
	for _, k := range set.Keys {
		if k.Kty != "OKP" || k.Crv != "Ed25519" || k.Alg != "EdDSA" {
			t.Errorf("jwk %+v", k)
		}
		x, err := base64.RawURLEncoding.DecodeString(k.X)
		if err != nil || len(x) != ed25519.PublicKeySize {
			t.Fatalf("jwk x %q", k.X)
		}
		out[k.Kid] = ed25519.PublicKey(x)
	}
	return out
}

// VerifyWithJWKS verifies an identity token for component api, issued by
// https://tools.test, against the key set the gateway publishes.
func (c Client) VerifyWithJWKS(t testing.TB, token string) jwt.MapClaims {
	t.Helper()
	keys := c.JWKSKeys(t)
	claims := jwt.MapClaims{}
	_, err := jwt.NewParser(jwt.WithValidMethods([]string{"EdDSA"}), jwt.WithIssuer("https://tools.test"), jwt.WithAudience("api")).
		ParseWithClaims(token, claims, func(tok *jwt.Token) (any, error) {
			kid, _ := tok.Header["kid"].(string)
			k, ok := keys[kid]
			if !ok {
				return nil, fmt.Errorf("kid %q not in the JWKS", kid)
			}
			return k, nil
		})
	if err != nil {
		t.Fatalf("identity token does not verify against the served JWKS: %v", err)
	}
	return claims
}

// InvokeResult is the answer of an invoke made in the background.
type InvokeResult struct {
	Status int
	A      Answer
	Raw    string
	Err    error
}

// InvokeAsync invokes a tool in the background, as a runtime waiting on
// a client tool does.
func (c Client) InvokeAsync(tool, body string) <-chan InvokeResult {
	ch := make(chan InvokeResult, 1)
	go func() {
		var r InvokeResult
		defer func() { ch <- r }()
		req, _ := http.NewRequest(http.MethodPost, c.Base+"/tools/"+tool, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := c.HTTP.Do(req)
		if err != nil {
			r.Err = err
			return
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		r.Status, r.Raw = resp.StatusCode, string(raw)
		r.Err = json.Unmarshal(raw, &r.A)
	}()
	return ch
}

// WaitInvoke waits up to 6 s for an InvokeAsync to answer.
func WaitInvoke(t testing.TB, ch <-chan InvokeResult) InvokeResult {
	t.Helper()
	select {
	case r := <-ch:
		if r.Err != nil {
			t.Fatalf("invoke: %v (%s)", r.Err, r.Raw)
		}
		return r
	case <-time.After(6 * time.Second):
		t.Fatal("the invoke did not answer")
	}
	return InvokeResult{}
}

// PagePost posts to a page endpoint: /client/calls/{id}/claim or /result.
func (c Client) PagePost(t testing.TB, token, path, body string, header ...string) (int, string, http.Header) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, c.Base+path, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(raw), resp.Header
}

// Claim claims a client call for the page.
func (c Client) Claim(t testing.TB, token, id string) (int, string) {
	t.Helper()
	status, body, _ := c.PagePost(t, token, "/client/calls/"+id+"/claim", "")
	return status, body
}

// PostResult posts a client call's result for the page.
func (c Client) PostResult(t testing.TB, token, id, body string) (int, string) {
	t.Helper()
	status, raw, _ := c.PagePost(t, token, "/client/calls/"+id+"/result", body)
	return status, raw
}

// GetCall reads GET path (a /calls/{id}) as an Answer.
func (c Client) GetCall(t testing.TB, path string) (int, Answer) {
	t.Helper()
	resp, err := c.HTTP.Get(c.Base + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var a Answer
	raw, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(raw, &a); err != nil {
		t.Fatalf("GET %s: %s", path, raw)
	}
	return resp.StatusCode, a
}

// ErrorBody is a JSON error answer: {"error": {"code", "message"}}.
type ErrorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// ErrCode is the code of a JSON error answer, "" if body is not one.
func ErrCode(body string) string {
	var e ErrorBody
	_ = json.Unmarshal([]byte(body), &e)
	return e.Error.Code
}

// CardAnswer is an Answer whose card may be an action-required card
// object, read into CardObj.
type CardAnswer struct {
	Answer
	CardObj struct {
		Title    string `json:"title"`
		Elements []struct {
			ID string `json:"id"`
		} `json:"elements"`
	}
}

// Call sends body (JSON, none if "") to path and reads the answer as a
// CardAnswer, failing the test if it is not JSON.
func (c Client) Call(t testing.TB, method, path, body string) (int, CardAnswer) {
	t.Helper()
	req, _ := http.NewRequest(method, c.Base+path, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var a CardAnswer
	if err := json.Unmarshal(raw, &a.Answer); err != nil {
		// "card" is an object here, which Answer's Card string cannot hold.
		var loose map[string]jsontext.Value
		if json.Unmarshal(raw, &loose) != nil {
			t.Fatalf("%s %s: not JSON: %s", method, path, raw)
		}
		_ = json.Unmarshal(loose["callId"], &a.CallID)
		_ = json.Unmarshal(loose["status"], &a.Status)
		_ = json.Unmarshal(loose["tool"], &a.Tool)
		_ = json.Unmarshal(loose["card"], &a.CardObj)
	}
	return resp.StatusCode, a
}
