// Package outbound sends the requests of targets (package dispatch builds
// them) and reads their answers: limits on time and size, a transport per
// unix socket, connections never resent, and a toolgate.upstream span
// around each request under a traced call.
package outbound

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"

	"github.com/toolgate/toolgate/internal/tracing"
)

// Defaults for a Client.
const (
	DefaultTimeout         = 30 * time.Second
	DefaultMaxResponseSize = 1 << 20
)

// Response is a complete answer, read within the size limit.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// Error is a failure to get an answer. Its message is written for the model.
type Error struct {
	Kind string // "timeout", "too_large", "unreachable", "cut", "cancelled"
	Msg  string
}

func (e *Error) Error() string { return e.Msg }

// Client sends target requests. Redirects are not followed: a target is the
// address its author wrote. Requests go to the transport directly, as
// reverse_proxy sends them: an http.Client would copy each request's
// headers for redirects that are never followed.
type Client struct {
	transport       *http.Transport
	sockets         sync.Map // socket path → *http.Transport; see transportFor
	timeout         time.Duration
	maxResponseSize int64
}

// NewClient returns a client with a transport tuned for many calls to few
// hosts. Zero values take the defaults.
func NewClient(timeout time.Duration, maxResponseSize int64) *Client {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	if maxResponseSize <= 0 {
		maxResponseSize = DefaultMaxResponseSize
	}
	tr := &http.Transport{
		Proxy: nil,
		DialContext: (&net.Dialer{
			Timeout:   10 * time.Second,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	return &Client{
		transport:       tr,
		timeout:         timeout,
		maxResponseSize: maxResponseSize,
	}
}

// Timeout is the limit for one request, answer included.
func (c *Client) Timeout() time.Duration { return c.timeout }

// MaxResponseSize is the hard limit on an answer's body.
func (c *Client) MaxResponseSize() int64 { return c.maxResponseSize }

// WithTimeout limits ctx to the client's timeout. A request built with it
// is sent by Do as it is; any other gets the limit, and is copied for it.
func (c *Client) WithTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.timeout)
}

// Do sends req and reads the whole answer within the client's timeout.
// Failures are *Error. Under a span in req's context it records the
// request as a toolgate.upstream span, whose traceparent it sends; without
// one it sends none.
func (c *Client) Do(req *http.Request) (*Response, error) {
	ctx, span := tracing.StartClient(req.Context(), tracing.UpstreamSpan)
	if span == nil {
		tracing.Inject(ctx, req.Header)
		return c.do(req)
	}
	defer span.End()
	// The host only: a URL's path and query may hold the input.
	span.SetAttributes(attribute.String("http.request.method", req.Method), attribute.String("server.address", req.URL.Hostname()))
	req = req.WithContext(ctx)
	tracing.Inject(ctx, req.Header)
	resp, err := c.do(req)
	if err != nil {
		// The kind, not the message, which names the address and port.
		kind := "error"
		if e := (*Error)(nil); errors.As(err, &e) {
			kind = e.Kind
		}
		span.SetStatus(codes.Error, kind)
		return nil, err
	}
	span.SetAttributes(attribute.Int("http.response.status_code", resp.Status))
	if resp.Status >= 400 {
		// OpenTelemetry's rule for HTTP client spans (a server span leaves a
		// 4xx unset). Whether the call failed is toolgate.call's status.
		span.SetStatus(codes.Error, "")
	}
	return resp, nil
}

func (c *Client) do(req *http.Request) (*Response, error) {
	ctx := req.Context()
	if d, ok := ctx.Deadline(); !ok || time.Until(d) > c.timeout {
		var cancel context.CancelFunc
		ctx, cancel = c.WithTimeout(ctx)
		defer cancel()
		req = req.WithContext(ctx)
	}
	sendOnce(req)
	resp, err := c.transportFor(req).RoundTrip(req)
	if err != nil {
		return nil, c.classify(ctx, err, false)
	}
	defer resp.Body.Close()
	if resp.ContentLength > c.maxResponseSize {
		return nil, c.tooLarge()
	}
	// Room for the announced length, or at first 64 KiB when none is:
	// the limit may be far larger than most answers.
	size := min(c.maxResponseSize, 64<<10)
	if resp.ContentLength >= 0 {
		size = min(resp.ContentLength, size)
	}
	body, err := ReadAll(io.LimitReader(resp.Body, c.maxResponseSize+1), nil, size)
	if err != nil {
		return nil, c.classify(ctx, err, true)
	}
	if int64(len(body)) > c.maxResponseSize {
		return nil, c.tooLarge()
	}
	return &Response{Status: resp.StatusCode, Header: resp.Header, Body: body}, nil
}

// sendOnce makes req one the transport never sends twice. On a reused
// connection that closes before the answer begins, the transport sends a
// request again on a new one if it deems it idempotent (GET, HEAD, OPTIONS,
// TRACE, or an Idempotency-Key or X-Idempotency-Key header) and can rewind
// its body. The upstream may have run it before the connection closed, and
// a tool call must not run twice; the call ends as an error result instead.
func sendOnce(req *http.Request) {
	// A body that cannot be rewound is not sent again.
	req.GetBody = nil
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		if req.Body == nil || req.Body == http.NoBody {
			// Nor is a request with a body the transport cannot rewind,
			// even an empty one. It reads a byte of such a body first and,
			// finding none, sends the request as it would with no body.
			req.Body = emptyBody{}
		}
	}
	// The transport only reads these two names, as canonical keys; on the
	// wire a header's name is the same in any case.
	for _, k := range [...][2]string{{"Idempotency-Key", "idempotency-key"}, {"X-Idempotency-Key", "x-idempotency-key"}} {
		if v, ok := req.Header[k[0]]; ok {
			delete(req.Header, k[0])
			req.Header[k[1]] = v
		}
	}
}

// emptyBody is a request body without bytes that cannot be rewound.
type emptyBody struct{}

func (emptyBody) Read([]byte) (int, error) { return 0, io.EOF }
func (emptyBody) Close() error             { return nil }

func (c *Client) tooLarge() *Error {
	return &Error{Kind: "too_large", Msg: fmt.Sprintf("the answer is larger than max_response_size (%d bytes)", c.maxResponseSize)}
}

func (c *Client) classify(ctx context.Context, err error, reading bool) *Error {
	if errors.Is(ctx.Err(), context.Canceled) {
		return &Error{Kind: "cancelled", Msg: "the call was cancelled before the upstream answered"}
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return &Error{Kind: "timeout", Msg: fmt.Sprintf("the upstream did not answer within %s", c.timeout)}
	}
	if reading {
		return &Error{Kind: "cut", Msg: fmt.Sprintf("the upstream connection broke while reading the answer: %v", err)}
	}
	if op := (*net.OpError)(nil); errors.As(err, &op) && op.Op == "dial" {
		return &Error{Kind: "unreachable", Msg: fmt.Sprintf("the upstream could not be reached: %v", err)}
	}
	// Connected, and the request may have been sent and run.
	return &Error{Kind: "cut", Msg: fmt.Sprintf("the upstream connection broke before an answer arrived; the call may have run: %v", err)}
}

// ReadAll appends all of r to buf. It first makes room in buf for size
// bytes and one more, so a body of the announced size is read without
// growing buf and its end is seen without a copy; past that buf grows as
// append grows it.
func ReadAll(r io.Reader, buf []byte, size int64) ([]byte, error) {
	if size > 0 && int(size)+1 > cap(buf)-len(buf) {
		buf = slices.Grow(buf, int(size)+1)
	}
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// CloseIdleConnections closes the idle upstream connections.
func (c *Client) CloseIdleConnections() {
	c.transport.CloseIdleConnections()
	c.closeIdleSockets()
}
