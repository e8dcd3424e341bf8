package apitest

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/toolgate/toolgate/internal/clienttools"
)

// PageStream is a Go "page" reading its thread's client calls from
// GET /client/calls (Server-Sent Events).
type PageStream struct {
	// Offers has each call event's offer; Raw has its data line, sent
	// just before the offer. Both are closed when the stream ends.
	Offers chan clienttools.Offer
	Raw    chan string
	cancel context.CancelFunc
	closed chan struct{}
}

// streamClient has no timeout: a stream stays open until it is cancelled.
var streamClient = &http.Client{Transport: &http.Transport{}}

// OpenStream opens GET base/client/calls?threadId=threadID with the page
// token (none if ""); it returns nil and the status and body when the
// answer is not a stream. Once it returns, the server has registered the
// stream. The stream is cancelled when the test ends.
func OpenStream(t testing.TB, base, token, threadID string, header ...string) (*PageStream, int, string) {
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
	ps := &PageStream{Offers: make(chan clienttools.Offer, 16), Raw: make(chan string, 16), cancel: cancel, closed: make(chan struct{})}
	t.Cleanup(cancel)
	go func() {
		defer close(ps.closed)
		defer close(ps.Offers)
		defer close(ps.Raw)
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
				ps.Raw <- data
				ps.Offers <- o
			}
		}
	}()
	return ps, resp.StatusCode, ""
}

// Next is the stream's next call, within 5 s.
func (s *PageStream) Next(t testing.TB) clienttools.Offer {
	t.Helper()
	return s.NextWithin(t, 5*time.Second)
}

// NextWithin is the stream's next call, within d.
func (s *PageStream) NextWithin(t testing.TB, d time.Duration) clienttools.Offer {
	t.Helper()
	select {
	case o, ok := <-s.Offers:
		if !ok {
			t.Fatal("the page stream ended")
		}
		<-s.Raw
		return o
	case <-time.After(d):
		t.Fatal("the page got no call")
	}
	return clienttools.Offer{}
}

// None checks the stream gets no call for d.
func (s *PageStream) None(t testing.TB, d time.Duration) {
	t.Helper()
	select {
	case o, ok := <-s.Offers:
		if ok {
			t.Errorf("unexpected call offered: %+v", o)
		}
	case <-time.After(d):
	}
}

// Close cancels the stream and waits until its reader has stopped.
func (s *PageStream) Close() {
	s.cancel()
	<-s.closed
}
