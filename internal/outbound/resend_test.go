package outbound_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/outbound"
)

// TestClientNeverResends checks that a request the upstream read and then
// dropped without a word is not sent again. net/http's transport resends
// such a request on a reused connection when it deems it idempotent (a GET,
// or an Idempotency-Key header), which would run a tool call twice.
func TestClientNeverResends(t *testing.T) {
	type seen struct {
		method, contentLength, transferEncoding, key string
		body                                         string
	}
	var (
		mu   sync.Mutex
		runs = map[string]int{}
		last = map[string]seen{}
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		runs[r.URL.Path]++
		last[r.URL.Path] = seen{r.Method, r.Header.Get("Content-Length"), strings.Join(r.TransferEncoding, ","), r.Header.Get("Idempotency-Key"), string(body)}
		mu.Unlock()
		if strings.HasPrefix(r.URL.Path, "/drop") {
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	c := outbound.NewClient(5*time.Second, testLimit)
	defer c.CloseIdleConnections()

	for i, tc := range []struct {
		method, body string
		header       string // an idempotency header to send, if any
		want         seen
	}{
		{"GET", "", "", seen{method: "GET"}},
		{"GET", "", "Idempotency-Key", seen{method: "GET", key: "k"}},
		{"POST", `{"a":1}`, "Idempotency-Key", seen{method: "POST", contentLength: "7", key: "k", body: `{"a":1}`}},
		{"POST", "", "Idempotency-Key", seen{method: "POST", contentLength: "0", key: "k"}},
		{"PUT", `{}`, "X-Idempotency-Key", seen{method: "PUT", contentLength: "2", body: `{}`}},
		{"DELETE", "", "Idempotency-Key", seen{method: "DELETE", key: "k"}},
		{"HEAD", "", "", seen{method: "HEAD"}},
	} {
		t.Run(tc.method+" "+tc.header+" "+tc.body, func(t *testing.T) {
			send := func(path string) (*outbound.Response, error) {
				var body io.Reader
				if tc.body != "" {
					body = strings.NewReader(tc.body)
				}
				req, err := http.NewRequest(tc.method, srv.URL+path, body)
				if err != nil {
					t.Fatal(err)
				}
				if tc.header != "" {
					req.Header.Set(tc.header, "k")
				}
				return c.Do(req)
			}
			// The answered request leaves its connection idle, for the
			// next to reuse; and shows what goes on the wire.
			ok := "/ok" + string(rune('a'+i))
			if _, err := send(ok); err != nil {
				t.Fatal(err)
			}
			drop := "/drop" + string(rune('a'+i))
			_, err := send(drop)
			var de *outbound.Error
			if !errors.As(err, &de) || de.Kind != "cut" || !strings.Contains(de.Msg, "may have run") {
				t.Errorf("Do = %v, want a cut error saying the call may have run", err)
			}
			mu.Lock()
			defer mu.Unlock()
			if n := runs[drop]; n != 1 {
				t.Errorf("the dropped request reached the upstream %d times, want once", n)
			}
			if got := last[ok]; got != tc.want {
				t.Errorf("the upstream saw %+v, want %+v", got, tc.want)
			}
		})
	}
}
