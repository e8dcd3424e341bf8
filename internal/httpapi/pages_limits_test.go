package httpapi

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/apitest"
	"github.com/toolgate/toolgate/internal/clienttools"
)

// startLimitedPages starts the pages config with small caps and a short
// client tool timeout. It returns the server and its bridge.
func startLimitedPages(t *testing.T, timeout time.Duration) (*server, *clienttools.Bridge) {
	t.Helper()
	o := pagesOptions(t)
	o.limits = clienttools.Limits{PendingPerThread: 2, Pending: 3, StreamsPerToken: 2}
	o.clientTimeout = timeout
	s := startServer(t, o)
	return s, s.bridge
}

// waitCounts polls the bridge until it holds calls and streams, or fails
// after a few seconds: a stream is released when its request ends, which
// the server sees a moment after the client closed it.
func waitCounts(t *testing.T, b *clienttools.Bridge, calls, streams int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, s := b.Waiting()
		if c == calls && s == streams {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("bridge holds %d calls, %d streams; want %d, %d", c, s, calls, streams)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func invokeIn(s *server, thread, callID string) <-chan apitest.InvokeResult {
	return s.InvokeAsync("where", fmt.Sprintf(`{"input":{},"callId":%q,"context":{"source":"thread","threadId":%q},%s}`, callID, thread, apitest.PageIdentity))
}

// TestPendingLimitsHTTP: a client tool call over max_pending_per_thread or
// max_pending is turned away at once with 429 and Retry-After, nothing of
// it is recorded or reaches a page (it is not offered on the thread's
// stream and cannot be claimed), and the same call id runs once there is
// room; a repeat of a call already waiting joins it.
func TestPendingLimitsHTTP(t *testing.T) {
	s, b := startLimitedPages(t, 5*time.Second)
	tok := apitest.PageToken(t, "u_1", "th_1")
	page, status, body := apitest.OpenStream(t, s.URL, tok, "th_1")
	if page == nil {
		t.Fatalf("stream: %d %s", status, body)
	}
	inv1 := invokeIn(s, "th_1", "lim_1")
	inv2 := invokeIn(s, "th_1", "lim_2")
	page.Next(t)
	page.Next(t)
	waitCounts(t, b, 2, 1)

	over := func(thread, callID, want string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, s.URL+"/tools/where", strings.NewReader(
			fmt.Sprintf(`{"input":{},"callId":%q,"context":{"source":"thread","threadId":%q},%s}`, callID, thread, apitest.PageIdentity)))
		req.Header.Set("Content-Type", "application/json")
		resp, err := s.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "10" ||
			!strings.Contains(string(raw), `"code":"too_many_client_calls"`) || !strings.Contains(string(raw), want) {
			t.Errorf("call %s over a limit: %d Retry-After %q %s; want 429 with Retry-After 10 and %q",
				callID, resp.StatusCode, resp.Header.Get("Retry-After"), raw, want)
		}
		// Nothing was recorded: the same call id may be tried again later.
		resp, err = s.client.Get(s.URL + "/calls/" + callID + "?user=u_1")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("the refused %s was recorded: GET /calls answers %d, want 404", callID, resp.StatusCode)
		}
		if status, body := s.Claim(t, apitest.PageToken(t, "u_1", thread), callID); status != http.StatusNotFound {
			t.Errorf("claim of the refused %s: %d %s, want 404", callID, status, body)
		}
	}
	over("th_1", "lim_3", "too many client tool calls waiting in this thread")
	page.None(t, 100*time.Millisecond)
	waitCounts(t, b, 2, 1)

	// A repeat of a call already waiting joins it, full thread or not.
	again := invokeIn(s, "th_1", "lim_1")
	page.None(t, 100*time.Millisecond)

	// Another thread has room of its own, up to max_pending in all.
	inv4 := invokeIn(s, "th_2", "lim_4")
	waitCounts(t, b, 3, 1)
	over("th_3", "lim_5", "too many client tool calls waiting on this gateway")
	page.None(t, 100*time.Millisecond)

	// Answers free the places.
	for id, inv := range map[string]<-chan apitest.InvokeResult{"lim_1": inv1, "lim_2": inv2} {
		if status, body := s.PostResult(t, tok, id, `{"result":"ok"}`); status != http.StatusOK {
			t.Fatalf("%s: %d %s", id, status, body)
		}
		if r := apitest.WaitInvoke(t, inv); r.A.Content != "ok" || r.A.IsError {
			t.Errorf("%s: %s", id, r.Raw)
		}
	}
	if r := apitest.WaitInvoke(t, again); r.A.Content != "ok" || r.A.IsError {
		t.Errorf("the repeat of lim_1: %s", r.Raw)
	}
	tok2 := apitest.PageToken(t, "u_1", "th_2")
	if status, body := s.PostResult(t, tok2, "lim_4", `{"result":"ok"}`); status != http.StatusOK {
		t.Fatalf("lim_4: %d %s", status, body)
	}
	apitest.WaitInvoke(t, inv4)
	waitCounts(t, b, 0, 1)
	// The call id turned away runs now that there is room.
	answerNext(t, s, page, tok, "lim_3", invokeIn(s, "th_1", "lim_3"))
}

// answerNext checks that the page is offered call id next, answers it
// and waits for the invoke that made it.
func answerNext(t *testing.T, s *server, page *apitest.PageStream, tok, id string, inv <-chan apitest.InvokeResult) {
	t.Helper()
	if o := page.Next(t); o.CallID != id {
		t.Errorf("offered %+v, want %s", o, id)
	}
	if status, body := s.PostResult(t, tok, id, `{}`); status != http.StatusOK {
		t.Fatalf("%s: %d %s", id, status, body)
	}
	apitest.WaitInvoke(t, inv)
}

// TestStreamsPerTokenHTTP: a page token holds at most
// max_streams_per_token streams; the next is 429 with Retry-After, and
// spelling the token's signature another way does not make it another
// token.
func TestStreamsPerTokenHTTP(t *testing.T) {
	s, b := startLimitedPages(t, 5*time.Second)
	tok := apitest.PageToken(t, "u_1", "th_1")
	s1, _, _ := apitest.OpenStream(t, s.URL, tok, "th_1")
	s2, _, _ := apitest.OpenStream(t, s.URL, tok, "th_1")
	if s1 == nil || s2 == nil {
		t.Fatal("the first two streams of a token were refused")
	}

	refused := func(token, what string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, s.URL+"/client/calls?threadId=th_1", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := s.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "10" ||
			resp.Header.Get("Content-Type") != "application/json" || apitest.ErrCode(string(body)) != "too_many_streams" {
			t.Errorf("%s: %d, Retry-After %q, %s; want 429, Retry-After 10, too_many_streams",
				what, resp.StatusCode, resp.Header.Get("Retry-After"), body)
		}
	}
	refused(tok, "a third stream")

	// The signature's last character carries 2 unused bits: flipping one
	// gives a token that still verifies.
	sig := tok[strings.LastIndexByte(tok, '.')+1:]
	raw, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || base64.RawURLEncoding.EncodeToString(raw) != sig {
		t.Fatalf("the test token's signature is not canonical base64: %v", err)
	}
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	last := strings.IndexByte(alphabet, sig[len(sig)-1])
	respelled := tok[:len(tok)-1] + string(alphabet[last^1])
	if _, status, _ := apitest.OpenStream(t, s.URL, respelled, "th_1"); status == http.StatusOK {
		t.Error("the token with its signature spelled another way opened a third stream")
	} else if status == http.StatusTooManyRequests {
		refused(respelled, "the token respelled")
	}
	waitCounts(t, b, 0, 2)

	// Another token of the same user and thread has places of its own.
	claims := apitest.PageClaims("u_1", "th_1")
	claims["jti"] = "second"
	other, _, _ := apitest.OpenStream(t, s.URL, apitest.SignHS256(t, claims, apitest.PageSecret), "th_1")
	if other == nil {
		t.Fatal("another token's stream was refused")
	}
	waitCounts(t, b, 0, 3)

	// A closed stream frees its place.
	s1.Close()
	waitCounts(t, b, 0, 2)
	s3, status, body := apitest.OpenStream(t, s.URL, tok, "th_1")
	if s3 == nil {
		t.Fatalf("after a close: %d %s", status, body)
	}
	for _, ps := range []*apitest.PageStream{s2, s3, other} {
		ps.Close()
	}
	waitCounts(t, b, 0, 0)
}

// TestCallerGoneHTTP: a runtime that hangs up while a page of the thread
// streams does not end its client tool call: the call waits for that page
// until client_tool_timeout, then ends as timed out and frees its place;
// nothing is offered afterwards.
func TestCallerGoneHTTP(t *testing.T) {
	s, b := startLimitedPages(t, 400*time.Millisecond)
	tok := apitest.PageToken(t, "u_1", "th_1")
	page, _, _ := apitest.OpenStream(t, s.URL, tok, "th_1")

	cancel, errc := invokeToLeave(s, apitest.PageIdentity)
	if o := page.Next(t); o.CallID != "gone_1" {
		t.Fatalf("offered %+v", o)
	}
	begin := time.Now()
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("the request was not cancelled")
	}
	c, _ := b.Waiting()
	if c != 1 && time.Since(begin) < 300*time.Millisecond {
		t.Errorf("right after the caller left, %d calls wait; want 1 until the timeout", c)
	}
	waitCounts(t, b, 0, 1)
	if d := time.Since(begin); d < 250*time.Millisecond {
		t.Errorf("the call ended %v after its caller left, before the 400ms timeout", d)
	}
	// The call frees its place, then records its end: with fsync that
	// takes a disk flush or two, so GET /calls may see it waiting a
	// moment longer.
	status, a := s.GetCall(t, "/calls/gone_1?user=u_1")
	for deadline := time.Now().Add(2 * time.Second); status == 200 && a.Status == "awaiting_client" && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
		status, a = s.GetCall(t, "/calls/gone_1?user=u_1")
	}
	if status != 200 || a.Status != "done" || !a.IsError || a.Content != "client tool timed out" {
		t.Errorf("GET /calls: %d %+v", status, a)
	}
	if status, body := s.Claim(t, tok, "gone_1"); status != http.StatusConflict {
		t.Errorf("claim after the timeout: %d %s, want 409", status, body)
	}
	page.None(t, 100*time.Millisecond)
	page.Close()
	waitCounts(t, b, 0, 0)
}

// overLimit invokes where for a user of an installation in a thread and
// checks that it is turned away with 429, Retry-After and a message naming
// option.
func overLimit(t *testing.T, s *server, user, install, thread, callID, option string) {
	t.Helper()
	r := apitest.WaitInvoke(t, invokeAs(s, user, install, thread, callID))
	if r.Status != http.StatusTooManyRequests || apitest.ErrCode(r.Raw) != "too_many_client_calls" || !strings.Contains(r.Raw, option) {
		t.Errorf("call %s over %s: %d %s; want 429 too_many_client_calls naming it", callID, option, r.Status, r.Raw)
	}
}

// TestPendingPerUserHTTP: alice fills max_pending_per_user across threads
// of her choice; her next call, in yet another thread, is refused naming
// max_pending_per_user, and nothing of it reaches a page. bob's call still
// goes through and bob's page answers it; so does alice's of another
// installation. An answer frees alice's place.
func TestPendingPerUserHTTP(t *testing.T) {
	o := pagesOptions(t)
	o.limits = clienttools.Limits{PendingPerUser: 3}
	o.clientTimeout = time.Hour
	s := startServer(t, o)
	alice := apitest.InstallPageToken(t, "alice", "in_1", "th_1")
	page, _, _ := apitest.OpenStream(t, s.URL, alice, "th_1")
	var waiting []<-chan apitest.InvokeResult
	for i, thread := range []string{"th_1", "th_2", "th_3"} {
		waiting = append(waiting, invokeAs(s, "alice", "in_1", thread, fmt.Sprint("al_", i)))
	}
	page.Next(t)
	waitCounts(t, s.bridge, 3, 1)
	overLimit(t, s, "alice", "in_1", "th_4", "al_4", "max_pending_per_user")
	overLimit(t, s, "alice", "in_1", "th_1", "al_5", "max_pending_per_user")
	page.None(t, 100*time.Millisecond)
	if status, body := s.Claim(t, apitest.InstallPageToken(t, "alice", "in_1", "th_4"), "al_4"); status != http.StatusNotFound {
		t.Errorf("claim of the refused call: %d %s", status, body)
	}

	for _, who := range []struct{ user, install string }{{"bob", "in_1"}, {"alice", "in_2"}} {
		tok := apitest.InstallPageToken(t, who.user, who.install, "th_1")
		ps, _, _ := apitest.OpenStream(t, s.URL, tok, "th_1")
		inv := invokeAs(s, who.user, who.install, "th_1", "other_1")
		if o := ps.Next(t); o.CallID != "other_1" {
			t.Fatalf("%s's page got %+v", who.user, o)
		}
		if status, body := s.Claim(t, tok, "other_1"); status != http.StatusOK {
			t.Fatalf("%s claims: %d %s", who.user, status, body)
		}
		if status, body := s.PostResult(t, tok, "other_1", `{"result":"`+who.user+`"}`); status != http.StatusOK {
			t.Fatalf("%s posts: %d %s", who.user, status, body)
		}
		if r := apitest.WaitInvoke(t, inv); r.A.Content != who.user || r.A.IsError {
			t.Errorf("%s of %s: %s", who.user, who.install, r.Raw)
		}
		ps.Close()
	}

	if status, body := s.PostResult(t, alice, "al_0", `{"result":"ok"}`); status != http.StatusOK {
		t.Fatalf("al_0: %d %s", status, body)
	}
	apitest.WaitInvoke(t, waiting[0])
	// After an answer, alice's page gets her next call.
	answerNext(t, s, page, alice, "al_4", invokeAs(s, "alice", "in_1", "th_1", "al_4"))
}

// TestCallerGoneFreesPlaceHTTP: with no page of the thread streaming, a
// runtime that hangs up frees its call's place at once: with a client
// tool timeout of an hour, the count drops to zero as soon as the request
// is cancelled, and alice, at max_pending_per_user, can call again. The
// call is recorded as not run, and a page that opens afterwards never
// gets it.
func TestCallerGoneFreesPlaceHTTP(t *testing.T) {
	o := pagesOptions(t)
	o.limits = clienttools.Limits{PendingPerUser: 1}
	o.clientTimeout = time.Hour
	s := startServer(t, o)

	cancel, errc := invokeToLeave(s, `"identity":{"user":"alice","install":"in_1"}`)
	waitCounts(t, s.bridge, 1, 0)
	overLimit(t, s, "alice", "in_1", "th_2", "gone_2", "max_pending_per_user")
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("the request was not cancelled")
	}
	waitCounts(t, s.bridge, 0, 0)
	if status, a := s.GetCall(t, "/calls/gone_1?user=alice&install=in_1"); status != 200 || a.Status != "done" || !a.IsError ||
		!strings.Contains(a.Content, "the caller went away") {
		t.Errorf("GET /calls/gone_1: %d %+v", status, a)
	}

	tok := apitest.InstallPageToken(t, "alice", "in_1", "th_1")
	page, _, _ := apitest.OpenStream(t, s.URL, tok, "th_1")
	page.None(t, 100*time.Millisecond)
	if status, body := s.Claim(t, tok, "gone_1"); status != http.StatusConflict {
		t.Errorf("claim of the dropped call: %d %s, want 409", status, body)
	}
	inv := invokeAs(s, "alice", "in_1", "th_1", "gone_2")
	if o := page.Next(t); o.CallID != "gone_2" {
		t.Fatalf("alice's next call: offered %+v", o)
	}
	if status, body := s.PostResult(t, tok, "gone_2", `{"result":"again"}`); status != http.StatusOK {
		t.Fatalf("gone_2: %d %s", status, body)
	}
	if r := apitest.WaitInvoke(t, inv); r.A.Content != "again" {
		t.Errorf("gone_2: %s", r.Raw)
	}
}

// openStreamTokens opens a stream of (user, thread) with a page token of
// its own, so that only the thread's and the total caps apply.
func openStreamTokens(t *testing.T, s *server, user, thread string, n int) (*apitest.PageStream, int, string) {
	t.Helper()
	claims := apitest.PageClaims(user, thread)
	claims["jti"] = fmt.Sprint("stream-", n)
	return apitest.OpenStream(t, s.URL, apitest.SignHS256(t, claims, apitest.PageSecret), thread)
}

// streamRefused checks a stream answer: 429, Retry-After, too_many_streams
// and a message naming option.
func streamRefused(t *testing.T, ps *apitest.PageStream, status int, body, option string) {
	t.Helper()
	if ps != nil || status != http.StatusTooManyRequests || apitest.ErrCode(body) != "too_many_streams" || !strings.Contains(body, option) {
		t.Errorf("stream over %s: %d %s; want 429 too_many_streams naming it", option, status, body)
	}
}

// TestStreamsPerThreadHTTP: a thread holds at most max_streams_per_thread
// (default 16) streams whatever tokens they use: the 17th is refused
// naming it, another thread's stream still opens, and a close frees a
// place.
func TestStreamsPerThreadHTTP(t *testing.T) {
	s := startPages(t)
	var streams []*apitest.PageStream
	for i := range clienttools.DefaultStreamsPerThread {
		ps, status, body := openStreamTokens(t, s, "u_1", "th_1", i)
		if ps == nil {
			t.Fatalf("stream %d: %d %s", i+1, status, body)
		}
		streams = append(streams, ps)
	}
	ps, status, body := openStreamTokens(t, s, "u_1", "th_1", 99)
	streamRefused(t, ps, status, body, "max_streams_per_thread")
	if ps, status, body := openStreamTokens(t, s, "u_1", "th_2", 99); ps == nil {
		t.Errorf("another thread's stream: %d %s", status, body)
	}
	waitCounts(t, s.bridge, 0, clienttools.DefaultStreamsPerThread+1)
	streams[0].Close()
	waitCounts(t, s.bridge, 0, clienttools.DefaultStreamsPerThread)
	if ps, status, body := openStreamTokens(t, s, "u_1", "th_1", 99); ps == nil {
		t.Errorf("after a close: %d %s", status, body)
	}
}

// TestStreamsTotalHTTP: at most max_streams streams are open in all,
// across users and threads.
func TestStreamsTotalHTTP(t *testing.T) {
	o := pagesOptions(t)
	o.limits = clienttools.Limits{Streams: 3}
	s := startServer(t, o)
	var streams []*apitest.PageStream
	for i := range 3 {
		ps, status, body := openStreamTokens(t, s, fmt.Sprint("u_", i), "th_1", i)
		if ps == nil {
			t.Fatalf("stream %d: %d %s", i+1, status, body)
		}
		streams = append(streams, ps)
	}
	ps, status, body := openStreamTokens(t, s, "u_9", "th_9", 9)
	streamRefused(t, ps, status, body, "max_streams")
	streams[1].Close()
	waitCounts(t, s.bridge, 0, 2)
	if ps, status, body := openStreamTokens(t, s, "u_9", "th_9", 9); ps == nil {
		t.Errorf("after a close: %d %s", status, body)
	}
}

// invokeToLeave calls the client tool where as call gone_1 of th_1 for
// identity (an envelope member) in the background; cancel hangs up, and
// errc gets what the request ended with.
func invokeToLeave(s *server, identity string) (cancel context.CancelFunc, errc <-chan error) {
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/tools/where",
		strings.NewReader(`{"input":{},"callId":"gone_1",`+apitest.ThreadCtx+`,`+identity+`}`))
	req.Header.Set("Content-Type", "application/json")
	ch := make(chan error, 1)
	go func() {
		resp, err := s.client.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		ch <- err
	}()
	return cancel, ch
}
