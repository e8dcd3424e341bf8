package apitest

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// The stream reader passes on call events only, in order, marks data it
// cannot read, and closes Offers when the stream ends.
func TestPageStream(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" || r.URL.Query().Get("threadId") != "th_1" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, ": comment\n\nevent: ping\ndata: {\"callId\":\"not a call\"}\n\n"+
			"event: call\ndata: {\"callId\":\"c1\",\"name\":\"where\",\"input\":{\"q\":1}}\n\n"+
			"data: {\"callId\":\"no event\"}\n\n"+
			"event: call\ndata: {nope\n\n")
	}))
	defer srv.Close()

	if s, status, body := OpenStream(t, srv.URL, "", "th_1"); s != nil || status != 401 || !strings.Contains(body, "no") {
		t.Fatalf("without a token: %v %d %q, want no stream and the 401", s, status, body)
	}
	s, status, body := OpenStream(t, srv.URL, "tok", "th_1")
	if s == nil {
		t.Fatalf("%d %s", status, body)
	}
	if o := s.Next(t); o.CallID != "c1" || o.Name != "where" || string(o.Input) != `{"q":1}` {
		t.Errorf("first offer %+v", o)
	}
	if o := s.Next(t); o.CallID != "unparsable: {nope" {
		t.Errorf("second offer %+v, want the unparsable data marked", o)
	}
	select {
	case o, ok := <-s.Offers:
		if ok {
			t.Errorf("a third offer %+v", o)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Offers is not closed when the stream ends")
	}
	s.None(t, time.Millisecond) // a closed stream offers nothing
	s.Close()
}

// The recorder keeps the last request per path, /items/… and /card/…
// under one key each, and counts them all.
func TestRecorder(t *testing.T) {
	rec := NewRecorder(t)
	c := Client{HTTP: rec.Client(), Base: rec.URL}
	c.Send(t, "POST", rec.URL+"/items/a%2Fb?n=1", "application/json", `{"x":1}`, "X-Note", "hi")
	if got := rec.Get(t, "/items/"); got.Method != "POST" || got.Path != "/items/a%2Fb" || got.Query != "n=1" ||
		got.Header.Get("X-Note") != "hi" || string(got.Body) != `{"x":1}` {
		t.Errorf("recorded %+v", got)
	}
	c.Send(t, "GET", rec.URL+"/items/c", "", "")
	if status, body := c.Send(t, "GET", rec.URL+"/md", "", ""); status != 200 || body != `{"content":"saved","markdown":"**saved**"}` {
		t.Errorf("/md: %d %s", status, body)
	}
	if got := rec.Get(t, "/items/"); got.Method != "GET" || got.Path != "/items/c" {
		t.Errorf("last /items/ request %+v, want GET /items/c", got)
	}
	if n := rec.Count(); n != 3 {
		t.Errorf("Count %d, want 3", n)
	}
}
