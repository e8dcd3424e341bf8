package main

import (
	"bytes"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/toolgate/toolgate/internal/apitest"
)

// clientTool is a pages block and a client tool. startInstance writes its
// ledger line inside the toolgate block, so the test appends these to it.
// The client tool timeout is longer than any wait of the test, so that a
// call that waited again for its page would show as a retry that hangs.
const clientTool = `
		client_tool_timeout 60s
		pages {
			secret ` + apitest.PageSecret + `
			issuer https://app.test
			audience toolgate-pages
		}
		tool where {
			description "Where the video is."
			input_schema ` + "`" + `{"type":"object"}` + "`" + `
			target kazzle video_position
		}`

// openPage opens the stream of th_1 on in. Once it returns, the gateway has
// registered the stream and sent it the calls waiting then.
func openPage(t *testing.T, in *instance, token string) *apitest.PageStream {
	t.Helper()
	s, status, body := apitest.OpenStream(t, in.base, token, "th_1")
	if s == nil {
		t.Fatalf("GET /client/calls: %d %s", status, body)
	}
	return s
}

// pagePost posts to /client/calls/{id}/{action} as the page.
func pagePost(t *testing.T, in *instance, token, id, action, body string) (int, string) {
	t.Helper()
	status, raw, _ := apitest.Client{HTTP: http.DefaultClient, Base: in.base}.PagePost(t, token, "/client/calls/"+id+"/"+action, body)
	return status, raw
}

// quick answers within 10 s, far less than the client tool timeout: a
// call that waits for its page again fails the test rather than hanging.
var quick = &http.Client{Timeout: 10 * time.Second}

// rawDo sends a request to in and returns the status and the answer's bytes.
func rawDo(t *testing.T, in *instance, method, path, body string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, in.base+path, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := quick.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v (a call that waits for its page answers only at the client tool timeout)", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the answer: %v", method, path, err)
	}
	return resp.StatusCode, raw
}

func parse(t *testing.T, raw []byte) answer {
	t.Helper()
	var a answer
	if err := json.Unmarshal(raw, &a); err != nil {
		t.Fatalf("not JSON: %s", raw)
	}
	return a
}

// TestFaultsKillClientCall kills the gateway (kill -9) while two client
// tool calls of one thread wait for their page, one offered but not claimed
// and one claimed but not answered, and restarts it on the same bolt
// ledger.
//
// Both end as "outcome unknown", the same as an app call in flight at a
// crash, and are never offered again: claims live in the gateway's memory,
// so after a crash an unclaimed call cannot be told from one whose function
// ran in the page, and offering either again could run it twice (each call
// id runs once: docs/http-api.md, "Each call runs once"). A claim lapsing on
// a closed stream (docs/http-api.md, "Client tools") is
// for a gateway that saw every stream close; one that died saw nothing.
func TestFaultsKillClientCall(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	up := newUpstream(t)
	data := t.TempDir()
	line := "ledger bolt " + filepath.Join(data, "ledger.db")
	in := startInstance(t, line+clientTool, up.srv.URL, data)
	tok := apitest.InstallPageToken(t, "u_1", "in_1", "th_1")
	page := openPage(t, in, tok)

	body := func(id string) string {
		return `{"input":{"q":"` + id + `"},"callId":"` + id + `",` + envelope + `}`
	}
	for _, id := range []string{"kc_unclaimed", "kc_claimed"} {
		// The runtime's request dies with the process.
		go func() {
			if resp, err := http.Post(in.base+"/tools/where", "application/json", strings.NewReader(body(id))); err == nil {
				resp.Body.Close()
			}
		}()
		if o := page.NextWithin(t, 10*time.Second); o.CallID != id {
			t.Fatalf("the page was offered %+v, want %s", o, id)
		}
	}
	if status, msg := pagePost(t, in, tok, "kc_claimed", "claim", ""); status != 200 {
		t.Fatalf("claim before the kill: %d %s", status, msg)
	}
	in.kill()
	select {
	case o, ok := <-page.Offers:
		if ok {
			t.Errorf("the page was offered %+v as the gateway died", o)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the page stream outlived the gateway")
	}

	in = startInstance(t, line+clientTool, up.srv.URL, data)
	// A page opened after the restart, before anything else is asked.
	page = openPage(t, in, tok)

	// The page that ran kc_claimed during the crash posts its result; the
	// other tries to claim. Both are refused: nothing waits for them.
	refused := func(when string) {
		t.Helper()
		for _, c := range []struct{ id, action, body string }{
			{"kc_claimed", "result", `{"result":"ran"}`},
			{"kc_claimed", "claim", ""},
			{"kc_unclaimed", "claim", ""},
			{"kc_unclaimed", "result", `{"result":"ran"}`},
		} {
			if status, msg := pagePost(t, in, tok, c.id, c.action, c.body); status != 404 && status != 409 {
				t.Errorf("%s %s %s: %d %s, want 404 or 409", when, c.action, c.id, status, msg)
			}
		}
	}
	refused("after the restart")

	first := map[string][]byte{}
	for _, id := range []string{"kc_unclaimed", "kc_claimed"} {
		status, raw := rawDo(t, in, http.MethodPost, "/tools/where", body(id))
		if a := parse(t, raw); status != 200 || a.Status != "done" || !a.IsError || !strings.Contains(a.Content, "outcome unknown") {
			t.Errorf("the retry of %s: %d %s, want outcome unknown", id, status, raw)
		}
		first[id] = raw
		if status, g := rawDo(t, in, http.MethodGet, "/calls/"+id+"?user=u_1&install=in_1", ""); status != 200 || !bytes.Equal(g, raw) {
			t.Errorf("GET /calls/%s: %d %s, want %s", id, status, g, raw)
		}
	}
	refused("after the retries")

	// A fresh call runs end to end. It is the first offer the page gets:
	// neither call of before the kill was offered when the page opened nor
	// on its retry.
	fresh := make(chan []byte, 1)
	go func() {
		_, raw := rawDo(t, in, http.MethodPost, "/tools/where", body("kc_fresh"))
		fresh <- raw
	}()
	if o := page.NextWithin(t, 10*time.Second); o.CallID != "kc_fresh" || o.Name != "video_position" || string(o.Input) != `{"q":"kc_fresh"}` {
		t.Fatalf("the page was offered %+v, want kc_fresh", o)
	}
	if status, msg := pagePost(t, in, tok, "kc_fresh", "claim", ""); status != 200 {
		t.Fatalf("claim kc_fresh: %d %s", status, msg)
	}
	if status, msg := pagePost(t, in, tok, "kc_fresh", "result", `{"result":{"positionSeconds":83}}`); status != 200 {
		t.Fatalf("result of kc_fresh: %d %s", status, msg)
	}
	var raw []byte
	select {
	case raw = <-fresh:
	case <-time.After(10 * time.Second):
		t.Fatal("kc_fresh did not answer")
	}
	if a := parse(t, raw); a.Status != "done" || a.IsError || a.Content != `{"positionSeconds":83}` {
		t.Errorf("kc_fresh: %s", raw)
	}
	if status, g := rawDo(t, in, http.MethodGet, "/calls/kc_fresh?user=u_1&install=in_1", ""); status != 200 || !bytes.Equal(g, raw) {
		t.Errorf("GET /calls/kc_fresh: %d %s, want %s", status, g, raw)
	}
	if status, again := rawDo(t, in, http.MethodPost, "/tools/where", body("kc_fresh")); status != 200 || !bytes.Equal(again, raw) {
		t.Errorf("the retry of kc_fresh: %d %s, want %s", status, again, raw)
	}
	if status, msg := pagePost(t, in, tok, "kc_fresh", "claim", ""); status != 409 {
		t.Errorf("a second claim of kc_fresh: %d %s, want 409", status, msg)
	}

	// The calls of before the kill answer as they did.
	for id, want := range first {
		if status, raw := rawDo(t, in, http.MethodPost, "/tools/where", body(id)); status != 200 || !bytes.Equal(raw, want) {
			t.Errorf("%s at the end: %d %s, want %s", id, status, raw, want)
		}
	}
	select {
	case o := <-page.Offers:
		t.Errorf("the page was offered %+v after kc_fresh", o)
	default:
	}
	if n := up.hits.Load(); n != 0 {
		t.Errorf("the component was sent %d requests; client tools run in the page", n)
	}
}
