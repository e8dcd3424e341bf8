package caddymodule

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddytest"
	"github.com/golang-jwt/jwt/v5"

	"github.com/toolgate/toolgate/internal/clienttools"
)

const (
	pageSecret   = "page-secret-0123456789-abcdefghij-klmnop"
	pageOrigin   = "http://localhost:9090"
	threadCtx    = `"context":{"source":"thread","threadId":"th_1"}`
	pageIdentity = `"identity":{"user":"u_1"}`
)

func pagesConfig(t *testing.T, dataDir string) string {
	return testGlobals(dataDir) + fmt.Sprintf(`http://127.0.0.1:9080 {
	bind 127.0.0.1
	handle_path /toolgate/* {
		toolgate {
			pages {
				secret %[2]s
				issuer https://app.test
				audience toolgate-pages
				origins %[3]s
			}
			client_tool_timeout 2s
			ledger bolt %[1]s/ledger.db
			tool where {
				description "Where the video is."
				input_schema `+"`"+`{"type":"object","properties":{"q":{"type":"string"}}}`+"`"+`
				target kazzle video_position
			}
		}
	}
	respond "next handler" 200
}
`, dataDir, pageSecret, pageOrigin)
}

// pageClaims are a valid page token's claims for a user and thread.
func pageClaims(user, thread string) jwt.MapClaims {
	return jwt.MapClaims{
		"sub": user, "thread": thread,
		"iss": "https://app.test", "aud": "toolgate-pages",
		"exp": time.Now().Add(5 * time.Minute).Unix(),
	}
}

func signPage(t *testing.T, claims jwt.MapClaims, secret string) string {
	t.Helper()
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString([]byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func pageToken(t *testing.T, user, thread string) string {
	return signPage(t, pageClaims(user, thread), pageSecret)
}

// pageStream is a Go "page" reading its thread's client calls.
type pageStream struct {
	offers chan clienttools.Offer
	raw    chan string
}

// streamClient has no timeout: a stream stays open until it is cancelled.
var streamClient = &http.Client{Transport: &http.Transport{}}

// openStream opens GET /client/calls; it returns nil and the status and
// body when the answer is not a stream. Once it returns, the server has
// registered the stream.
func openStream(t *testing.T, token, threadID string, header ...string) (*pageStream, int, string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/client/calls?threadId="+threadID, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := streamClient.Do(req)
	if err != nil {
		cancel()
		t.Fatalf("GET /client/calls: %v", err)
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		return nil, resp.StatusCode, string(body)
	}
	s := &pageStream{offers: make(chan clienttools.Offer, 16), raw: make(chan string, 16)}
	t.Cleanup(cancel)
	go func() {
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		event := ""
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				event = ""
			case strings.HasPrefix(line, "event: "):
				event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: ") && event == "call":
				data := strings.TrimPrefix(line, "data: ")
				var o clienttools.Offer
				if err := json.Unmarshal([]byte(data), &o); err != nil {
					o.CallID = "unparsable: " + data
				}
				s.raw <- data
				s.offers <- o
			}
		}
	}()
	return s, resp.StatusCode, ""
}

func (s *pageStream) next(t *testing.T) clienttools.Offer {
	t.Helper()
	select {
	case o := <-s.offers:
		<-s.raw
		return o
	case <-time.After(5 * time.Second):
		t.Fatal("the page got no call")
	}
	return clienttools.Offer{}
}

type invokeResult struct {
	status int
	a      answer
	raw    string
	err    error
}

// invokeAsync invokes a tool in the background, as a runtime waiting on
// a client tool does.
func invokeAsync(tc *caddytest.Tester, tool, body string) <-chan invokeResult {
	ch := make(chan invokeResult, 1)
	go func() {
		var r invokeResult
		defer func() { ch <- r }()
		req, _ := http.NewRequest(http.MethodPost, base+"/tools/"+tool, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := tc.Client.Do(req)
		if err != nil {
			r.err = err
			return
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		r.status, r.raw = resp.StatusCode, string(raw)
		r.err = json.Unmarshal(raw, &r.a)
	}()
	return ch
}

func waitInvoke(t *testing.T, ch <-chan invokeResult) invokeResult {
	t.Helper()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("invoke: %v (%s)", r.err, r.raw)
		}
		return r
	case <-time.After(6 * time.Second):
		t.Fatal("the invoke did not answer")
	}
	return invokeResult{}
}

type apiErr struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// pagePost posts to a page endpoint: /client/calls/{id}/claim or /result.
func pagePost(t *testing.T, tc *caddytest.Tester, token, path, body string, header ...string) (int, string, http.Header) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+path, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := tc.Client.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(raw), resp.Header
}

func errCode(body string) string {
	var e apiErr
	_ = json.Unmarshal([]byte(body), &e)
	return e.Error.Code
}

func claim(t *testing.T, tc *caddytest.Tester, token, id string) (int, string) {
	t.Helper()
	status, body, _ := pagePost(t, tc, token, "/client/calls/"+id+"/claim", "")
	return status, body
}

func postResult(t *testing.T, tc *caddytest.Tester, token, id, body string) (int, string) {
	t.Helper()
	status, raw, _ := pagePost(t, tc, token, "/client/calls/"+id+"/result", body)
	return status, raw
}

func getCall(t *testing.T, tc *caddytest.Tester, path string) (int, answer) {
	t.Helper()
	resp, err := tc.Client.Get(base + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var a answer
	raw, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(raw, &a); err != nil {
		t.Fatalf("GET %s: %s", path, raw)
	}
	return resp.StatusCode, a
}
