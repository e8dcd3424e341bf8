package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/toolgate/toolgate/apptools"
)

// keyedUpstream answers the tools of startInstance and counts what it runs
// per Idempotency-Key: /slow answers at once, /hold holds until the test
// ends.
type keyedUpstream struct {
	srv      *httptest.Server
	mu       sync.Mutex
	runs     map[string]int
	answered chan string
	held     chan string
	release  chan struct{}
}

func newKeyedUpstream(t *testing.T) *keyedUpstream {
	u := &keyedUpstream{runs: map[string]int{}, answered: make(chan string, 64), held: make(chan string, 64), release: make(chan struct{})}
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("Idempotency-Key")
		u.mu.Lock()
		u.runs[key]++
		u.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/hold":
			u.held <- key
			select {
			case <-u.release:
			case <-r.Context().Done():
			}
		default:
			fmt.Fprintf(w, `{"content":"done %s"}`, key)
			u.answered <- key
		}
	}))
	t.Cleanup(func() {
		close(u.release)
		u.srv.Close()
	})
	return u
}

// count is how many times the upstream ran the call with this id, by u_1
// in in_1 (envelope).
func (u *keyedUpstream) count(callID string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.runs[apptools.IdempotencyKey("u_1", "in_1", callID)]
}

// receiveN receives n values from ch within d.
func receiveN(t *testing.T, ch <-chan string, n int, d time.Duration, what string) {
	t.Helper()
	deadline := time.After(d)
	for i := range n {
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("%s: %d of %d within %s", what, i, n, d)
		}
	}
}

// TestFaultsKillUnderLoad kills the gateway (kill -9) with calls finished
// and calls held by the upstream, all sent at once, and restarts it on the
// same bolt ledger. Every call id then answers exactly one outcome: its
// result if it finished, "outcome unknown" if it was in flight; none is lost,
// and the upstream ran each once.
func TestFaultsKillUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	up := newKeyedUpstream(t)
	data := t.TempDir()
	line := "ledger bolt " + filepath.Join(data, "ledger.db")
	in := startInstance(t, line, up.srv.URL, data)

	const n = 8
	body := func(i int) (string, string) {
		tool := "slow"
		if i >= n {
			tool = "hold"
		}
		return "/tools/" + tool, fmt.Sprintf(`{"input":{},"callId":"kl_%d",%s}`, i, envelope)
	}
	for i := range 2 * n {
		go func() {
			path, b := body(i)
			// The held calls' connections die with the process.
			if resp, err := http.Post(in.base+path, "application/json", strings.NewReader(b)); err == nil {
				resp.Body.Close()
			}
		}()
	}
	receiveN(t, up.answered, n, 10*time.Second, "finished calls")
	receiveN(t, up.held, n, 10*time.Second, "held calls")
	// The upstream has answered the finished calls; the gateway records
	// each before it answers its caller. Wait for those records (bounded),
	// so that the kill meets finished calls and calls in flight.
	for i := range n {
		deadline := time.Now().Add(5 * time.Second)
		for {
			resp, err := http.Get(fmt.Sprintf("%s/calls/kl_%d?user=u_1&install=in_1", in.base, i))
			if err != nil {
				t.Fatal(err)
			}
			var a answer
			_ = json.UnmarshalRead(resp.Body, &a)
			resp.Body.Close()
			if a.Status == "done" || time.Now().After(deadline) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	in.kill()

	in = startInstance(t, line, up.srv.URL, data)
	var wg sync.WaitGroup
	got := make([]answer, 2*n)
	for i := range 2 * n {
		wg.Go(func() {
			path, b := body(i)
			_, got[i] = in.post(t, path, b)
		})
	}
	wg.Wait()
	for i, a := range got {
		key := fmt.Sprintf("kl_%d", i)
		switch {
		case i < n && (a.Status != "done" || a.IsError || a.Content != "done "+apptools.IdempotencyKey("u_1", "in_1", key)):
			t.Errorf("%s finished before the kill; after the restart it answers %+v", key, a)
		case i >= n && (a.Status != "done" || !a.IsError || !strings.Contains(a.Content, "outcome unknown")):
			t.Errorf("%s was in flight at the kill; after the restart it answers %+v, want outcome unknown", key, a)
		}
		if c := up.count(key); c != 1 {
			t.Errorf("the upstream ran %s %d times, want once", key, c)
		}
	}
}
