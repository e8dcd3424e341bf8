package outbound_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/toolgate/toolgate/internal/dispatch"
	"github.com/toolgate/toolgate/internal/jsonread"
	"github.com/toolgate/toolgate/internal/outbound"
)

const testLimit = 1024

// stall blocks until the request is given up, or a long time has passed, so
// a handler never outlives its test.
func stall(r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-time.After(10 * time.Second):
	}
}

// writeChunked writes n bytes without a Content-Length, flushing so the
// answer is sent chunked.
func writeChunked(w http.ResponseWriter, n int) {
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(http.StatusOK)
	w.(http.Flusher).Flush()
	chunk := bytes.Repeat([]byte("b"), 256)
	for n > 0 {
		c := chunk
		if n < len(c) {
			c = c[:n]
		}
		if _, err := w.Write(c); err != nil {
			return
		}
		w.(http.Flusher).Flush()
		n -= len(c)
	}
}

// writeSized writes n bytes with a Content-Length.
func writeSized(w http.ResponseWriter, n int) {
	w.Header().Set("Content-Length", strconv.Itoa(n))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(bytes.Repeat([]byte("a"), n))
}

// hijack answers with raw bytes and closes the connection.
func hijack(raw string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		conn, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			panic(err)
		}
		defer conn.Close()
		_, _ = buf.WriteString(raw)
		_ = buf.Flush()
	}
}

func TestNewClientDefaults(t *testing.T) {
	tests := []struct {
		name        string
		timeout     time.Duration
		max         int64
		wantTimeout time.Duration
		wantMax     int64
	}{
		{name: "zero", wantTimeout: outbound.DefaultTimeout, wantMax: outbound.DefaultMaxResponseSize},
		{name: "negative", timeout: -time.Second, max: -1, wantTimeout: outbound.DefaultTimeout, wantMax: outbound.DefaultMaxResponseSize},
		{name: "set", timeout: 3 * time.Second, max: 10, wantTimeout: 3 * time.Second, wantMax: 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := outbound.NewClient(tt.timeout, tt.max)
			defer c.CloseIdleConnections()
			if c.Timeout() != tt.wantTimeout {
				t.Errorf("Timeout() = %v, want %v", c.Timeout(), tt.wantTimeout)
			}
			if c.MaxResponseSize() != tt.wantMax {
				t.Errorf("MaxResponseSize() = %d, want %d", c.MaxResponseSize(), tt.wantMax)
			}
		})
	}
}

func TestClientDo(t *testing.T) {
	var followed atomic.Int32
	tests := []struct {
		name       string
		handler    http.HandlerFunc
		timeout    time.Duration
		wantStatus int
		wantBody   string
		wantHeader map[string]string
		wantKind   string // the *outbound.Error kind; "" for an answer
	}{
		{
			name: "200 body read",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("X-Upstream", "yes")
				_, _ = io.WriteString(w, `{"ok":true}`)
			},
			wantStatus: 200, wantBody: `{"ok":true}`,
			wantHeader: map[string]string{"Content-Type": "application/json", "X-Upstream": "yes"},
		},
		{
			name:       "empty body",
			handler:    func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) },
			wantStatus: 204, wantBody: "",
		},
		{
			name: "error status is an answer",
			handler: func(w http.ResponseWriter, r *http.Request) {
				http.Error(w, "no such user", http.StatusNotFound)
			},
			wantStatus: 404, wantBody: "no such user\n",
		},
		{
			name: "500 is an answer",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusInternalServerError)
				_, _ = io.WriteString(w, "boom")
			},
			wantStatus: 500, wantBody: "boom",
		},
		{
			name:       "exactly the limit with Content-Length",
			handler:    func(w http.ResponseWriter, r *http.Request) { writeSized(w, testLimit) },
			wantStatus: 200, wantBody: strings.Repeat("a", testLimit),
		},
		{
			name:       "exactly the limit chunked",
			handler:    func(w http.ResponseWriter, r *http.Request) { writeChunked(w, testLimit) },
			wantStatus: 200, wantBody: strings.Repeat("b", testLimit),
		},
		{
			name:     "one over the limit with Content-Length",
			handler:  func(w http.ResponseWriter, r *http.Request) { writeSized(w, testLimit+1) },
			wantKind: "too_large",
		},
		{
			name:     "far over the limit with Content-Length",
			handler:  func(w http.ResponseWriter, r *http.Request) { writeSized(w, 1<<20) },
			wantKind: "too_large",
		},
		{
			name: "Content-Length over the limit, never sent",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Length", strconv.Itoa(1<<30))
				w.WriteHeader(http.StatusOK)
				w.(http.Flusher).Flush()
				stall(r)
			},
			wantKind: "too_large",
		},
		{
			name:     "one over the limit chunked",
			handler:  func(w http.ResponseWriter, r *http.Request) { writeChunked(w, testLimit+1) },
			wantKind: "too_large",
		},
		{
			name:     "far over the limit chunked",
			handler:  func(w http.ResponseWriter, r *http.Request) { writeChunked(w, 1<<20) },
			wantKind: "too_large",
		},
		{
			name: "over the limit chunked then stalls",
			handler: func(w http.ResponseWriter, r *http.Request) {
				writeChunked(w, testLimit+1)
				stall(r)
			},
			wantKind: "too_large",
		},
		{
			name: "no answer before the timeout",
			handler: func(w http.ResponseWriter, r *http.Request) {
				stall(r)
			},
			timeout:  100 * time.Millisecond,
			wantKind: "timeout",
		},
		{
			name: "headers then a stalled body",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Length", "10")
				w.WriteHeader(http.StatusOK)
				_, _ = io.WriteString(w, "12345")
				w.(http.Flusher).Flush()
				stall(r)
			},
			timeout:  100 * time.Millisecond,
			wantKind: "timeout",
		},
		{
			name: "chunked body stalls",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusOK)
				_, _ = io.WriteString(w, "partial")
				w.(http.Flusher).Flush()
				stall(r)
			},
			timeout:  100 * time.Millisecond,
			wantKind: "timeout",
		},
		{
			name:     "cut before Content-Length is reached",
			handler:  hijack("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 100\r\n\r\npartial"),
			wantKind: "cut",
		},
		{
			name:     "cut mid chunk",
			handler:  hijack("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10\r\nonly-five"),
			wantKind: "cut",
		},
		{
			name:     "cut before the last chunk",
			handler:  hijack("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n"),
			wantKind: "cut",
		},
		{
			name: "302 is not followed",
			handler: func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/elsewhere" {
					followed.Add(1)
					_, _ = io.WriteString(w, "followed")
					return
				}
				http.Redirect(w, r, "/elsewhere", http.StatusFound)
			},
			wantStatus: 302, wantHeader: map[string]string{"Location": "/elsewhere"},
		},
		{
			name: "301 is not followed",
			handler: func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/elsewhere" {
					followed.Add(1)
					return
				}
				http.Redirect(w, r, "/elsewhere", http.StatusMovedPermanently)
			},
			wantStatus: 301, wantHeader: map[string]string{"Location": "/elsewhere"},
		},
		{
			name: "307 is not followed",
			handler: func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/elsewhere" {
					followed.Add(1)
					return
				}
				w.Header().Set("Location", "http://169.254.169.254/latest/meta-data/")
				w.WriteHeader(http.StatusTemporaryRedirect)
			},
			wantStatus: 307, wantHeader: map[string]string{"Location": "http://169.254.169.254/latest/meta-data/"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(tt.handler)
			defer srv.Close()
			timeout := tt.timeout
			if timeout == 0 {
				timeout = 5 * time.Second
			}
			c := outbound.NewClient(timeout, testLimit)
			defer c.CloseIdleConnections()
			req, err := http.NewRequest("GET", srv.URL+"/x", nil)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			resp, err := c.Do(req)
			elapsed := time.Since(start)
			if tt.wantKind != "" {
				if err == nil {
					t.Fatalf("Do = status %d, %d bytes; want a %q error", resp.Status, len(resp.Body), tt.wantKind)
				}
				var de *outbound.Error
				if !errors.As(err, &de) {
					t.Fatalf("Do error %v (%T), want a *outbound.Error", err, err)
				}
				if de.Kind != tt.wantKind {
					t.Fatalf("Kind = %q (%s), want %q", de.Kind, de.Msg, tt.wantKind)
				}
				if de.Error() == "" {
					t.Errorf("the error has no message")
				}
				if tt.wantKind == "timeout" && (elapsed < timeout || elapsed > timeout+3*time.Second) {
					t.Errorf("timed out after %v, want about %v", elapsed, timeout)
				}
				return
			}
			if err != nil {
				t.Fatalf("Do: %v", err)
			}
			if resp.Status != tt.wantStatus {
				t.Errorf("Status = %d, want %d", resp.Status, tt.wantStatus)
			}
			if tt.wantStatus < 300 || tt.wantStatus >= 400 {
				if string(resp.Body) != tt.wantBody {
					t.Errorf("Body = %q, want %q", resp.Body, tt.wantBody)
				}
			}
			for k, v := range tt.wantHeader {
				if got := resp.Header.Get(k); got != v {
					t.Errorf("header %s = %q, want %q", k, got, v)
				}
			}
			if n := followed.Load(); n != 0 {
				t.Errorf("the redirect was followed %d times", n)
			}
		})
	}
}

// TestClientChunkedHandlers checks that the chunked handlers above really
// answer without a Content-Length, so the too_large cases test the read
// limit and not the Content-Length check.
func TestClientChunkedHandlers(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { writeChunked(w, testLimit+1) }))
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.ContentLength != -1 || len(resp.TransferEncoding) == 0 || resp.TransferEncoding[0] != "chunked" {
		t.Fatalf("ContentLength = %d, TransferEncoding = %v; want a chunked answer", resp.ContentLength, resp.TransferEncoding)
	}
}

func TestClientUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	c := outbound.NewClient(5*time.Second, testLimit)
	defer c.CloseIdleConnections()
	req, err := http.NewRequest("GET", "http://"+addr+"/x", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err == nil {
		t.Fatalf("Do = status %d, want an error: nothing listens on %s", resp.Status, addr)
	}
	var de *outbound.Error
	if !errors.As(err, &de) || de.Kind != "unreachable" {
		t.Fatalf("Do error %v (%T), want a *outbound.Error of kind unreachable", err, err)
	}
	// The model reads where the call went and why it failed.
	if !strings.Contains(de.Msg, addr) || !strings.Contains(de.Msg, "refused") {
		t.Errorf("message %q: want the address %s and the cause", de.Msg, addr)
	}
}

// A call ends at the earlier of the client's timeout and the caller's
// deadline, whatever deadline the request's context has: a later one, none,
// the client's own from WithTimeout, or an earlier one.
func TestClientTimeoutAndCallerDeadline(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { stall(r) }))
	defer srv.Close()
	short := outbound.NewClient(100*time.Millisecond, testLimit)
	defer short.CloseIdleConnections()
	long := outbound.NewClient(5*time.Second, testLimit)
	defer long.CloseIdleConnections()
	deadline := func(d time.Duration) func() (context.Context, context.CancelFunc) {
		return func() (context.Context, context.CancelFunc) { return context.WithTimeout(context.Background(), d) }
	}
	for _, tc := range []struct {
		name   string
		client *outbound.Client
		ctx    func() (context.Context, context.CancelFunc)
	}{
		{"later caller deadline", short, deadline(10 * time.Second)},
		{"no caller deadline", short, func() (context.Context, context.CancelFunc) { return context.Background(), func() {} }},
		{"WithTimeout", short, func() (context.Context, context.CancelFunc) { return short.WithTimeout(context.Background()) }},
		{"earlier caller deadline", long, deadline(100 * time.Millisecond)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := tc.ctx()
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, "GET", srv.URL, nil)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			_, err = tc.client.Do(req)
			var de *outbound.Error
			if !errors.As(err, &de) || de.Kind != "timeout" {
				t.Fatalf("Do error %v, want a *outbound.Error of kind timeout", err)
			}
			if elapsed := time.Since(start); elapsed < 90*time.Millisecond || elapsed > 3*time.Second {
				t.Errorf("Do took %v, want about 100ms", elapsed)
			}
		})
	}
}

// TestClientTargetRequest sends compiled targets to a server and checks
// what the server receives.
func TestClientTargetRequest(t *testing.T) {
	type seen struct {
		Method, RequestURI, ContentType, Body, Host string
		ContentLength                               int64
		TransferEncoding                            []string
		Header                                      http.Header
	}
	got := make(chan seen, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{r.Method, r.RequestURI, r.Header.Get("Content-Type"), string(b), r.Host, r.ContentLength, r.TransferEncoding, r.Header}
		_, _ = io.WriteString(w, "ok")
	}))
	defer srv.Close()
	comp, err := dispatch.NewComponent("svc", srv.URL+"/base", map[string]string{"TOKEN": "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	comps := map[string]*dispatch.Component{"svc": comp}
	host := strings.TrimPrefix(srv.URL, "http://")

	tests := []struct {
		name     string
		spec     dispatch.Spec
		input    map[string]any
		wantURI  string
		wantBody string // "" means no body
		header   map[string]string
	}{
		{
			name:    "GET sends no body",
			spec:    dispatch.Spec{Type: "app", Component: "svc", Method: "GET", Path: "/u/${input.id}", Query: map[string]string{"q": "${input.q}"}},
			input:   map[string]any{"id": "a b", "q": "a&b"},
			wantURI: "/base/u/a%20b?q=a%26b",
		},
		{
			name:    "DELETE without body sends none",
			spec:    dispatch.Spec{Type: "app", Component: "svc", Method: "DELETE", Path: "/u/${input.id}"},
			input:   map[string]any{"id": "b1"},
			wantURI: "/base/u/b1",
		},
		{
			name:     "POST whole input",
			spec:     dispatch.Spec{Type: "app", Component: "svc", Method: "POST", Path: "/u", Body: jsontext.Value(`"${input}"`)},
			input:    map[string]any{"name": "Ada", "age": jsonread.Number("36")},
			wantURI:  "/base/u",
			wantBody: `{"age":36,"name":"Ada"}`,
		},
		{
			name:     "url target with env header",
			spec:     dispatch.Spec{Type: "url", Component: "svc", Method: "PUT", URL: srv.URL + "/ext/${input.id}?k=${input.k}", Headers: map[string]string{"X-Key": "${env.TOKEN}"}, Body: jsontext.Value(`{"v":"${input.k}"}`)},
			input:    map[string]any{"id": "a b", "k": "x y"},
			wantURI:  "/ext/a%20b?k=x+y",
			wantBody: `{"v":"x y"}`,
			header:   map[string]string{"X-Key": "s3cret"},
		},
	}
	c := outbound.NewClient(5*time.Second, testLimit)
	defer c.CloseIdleConnections()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tgt, err := dispatch.Compile(tt.spec, dispatch.Env{Components: comps})
			if err != nil {
				t.Fatal(err)
			}
			req, err := tgt.Request(context.Background(), tt.input, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Status != 200 || string(resp.Body) != "ok" {
				t.Fatalf("answer %d %q, want 200 ok", resp.Status, resp.Body)
			}
			s := <-got
			if s.Method != tt.spec.Method {
				t.Errorf("method = %q, want %q", s.Method, tt.spec.Method)
			}
			if s.Host != host {
				t.Errorf("Host = %q, want %q", s.Host, host)
			}
			if s.RequestURI != tt.wantURI {
				t.Errorf("request URI = %q, want %q", s.RequestURI, tt.wantURI)
			}
			if tt.wantBody == "" {
				if s.Body != "" || s.ContentLength != 0 || len(s.TransferEncoding) != 0 || s.ContentType != "" {
					t.Errorf("got body %q (length %d, encoding %v, type %q), want none", s.Body, s.ContentLength, s.TransferEncoding, s.ContentType)
				}
			} else {
				if s.Body != tt.wantBody {
					t.Errorf("body = %q, want %q", s.Body, tt.wantBody)
				}
				if s.ContentType != "application/json" {
					t.Errorf("Content-Type = %q, want application/json", s.ContentType)
				}
			}
			for k, v := range tt.header {
				if s.Header.Get(k) != v {
					t.Errorf("header %s = %q, want %q", k, s.Header.Get(k), v)
				}
			}
		})
	}
}

func TestReadAll(t *testing.T) {
	body := strings.Repeat("x", 5000)
	for _, c := range []struct {
		name string
		size int64
	}{
		{"announced", 5000}, {"none announced", 0}, {"announced short", 100}, {"announced long", 9000}, {"unknown", -1},
	} {
		t.Run(c.name, func(t *testing.T) {
			// One byte a read: the loop, not a lucky single read, must
			// gather it all, after what buf already held.
			got, err := outbound.ReadAll(iotest.OneByteReader(strings.NewReader(body)), []byte("head:"), c.size)
			if err != nil || string(got) != "head:"+body {
				t.Fatalf("ReadAll = %d bytes, %v; want head: and the %d-byte body", len(got), err, len(body))
			}
		})
	}
	_, err := outbound.ReadAll(iotest.ErrReader(errors.New("cut")), nil, 10)
	if err == nil || err.Error() != "cut" {
		t.Fatalf("ReadAll of a failing reader: %v, want its error", err)
	}
}
