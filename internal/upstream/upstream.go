package upstream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"

	"github.com/toolgate/toolgate/internal/dispatch"
	"github.com/toolgate/toolgate/internal/manifest"
)

// Options are what a Server needs from the gateway.
type Options struct {
	// Logger gets the server's state changes and a command's stderr.
	Logger *zap.Logger
	// Authorization returns the Authorization header value that tells the
	// server who a call acts for (Config.Identity): an identity token
	// for user at install with the given audience. An empty user is the
	// gateway's own requests (connecting, listing).
	Authorization func(user, install, audience string) (string, error)
	// Changed is told the server's tools changed after the first list:
	// the server sent notifications/tools/list_changed, or came back.
	Changed func(*Server)
	// Version is the gateway's, told to the server.
	Version string
	// State is told when the server's session comes up or goes down
	// (metrics); never after Close.
	State func(up bool)
}

// Server is one upstream MCP server: its session, kept up while the
// gateway runs, and the tools it lists.
type Server struct {
	cfg    Config
	opts   Options
	impl   *sdk.Implementation
	client *sdk.Client
	http   *http.Client

	ctx     context.Context // ends at Close
	cancel  context.CancelFunc
	started atomic.Bool   // Start was called: run runs
	done    chan struct{} // closed when run returns

	mu      sync.Mutex
	session *sdk.ClientSession
	// fast is the session's protocol version when calls go out through
	// fastCall (the sessionless revision, over HTTP); "" otherwise.
	fast    string
	lastErr error
	// headerTools are the tools whose schemas bind arguments to headers,
	// which the SDK's client writes (never fastCall).
	headerTools map[string]bool
	// up is closed when a session is up, and made anew when it goes.
	up     chan struct{}
	tools  []manifest.Tool
	listed bool
	// told is set once Start returned: a list from then on is a change.
	told atomic.Bool
	// state is what State was last told: -1 nothing yet, 0 down, 1 up.
	state atomic.Int32
	// kick wakes run to reconnect at once (a call found the session gone)
	// or to list again (list_changed, a list's ttl).
	kick chan struct{}
	// relist asks run to list the tools again on the live session.
	relist chan struct{}
}

// New checks cfg and returns its server, not yet connected (Start).
func New(cfg Config, opts Options) (*Server, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	opts.Logger = opts.Logger.With(zap.String("mcp_server", cfg.Name))
	s := &Server{cfg: cfg, opts: opts, done: make(chan struct{}), kick: make(chan struct{}, 1), relist: make(chan struct{}, 1), up: make(chan struct{})}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.state.Store(-1)
	version := opts.Version
	if version == "" {
		version = "dev"
	}
	s.impl = &sdk.Implementation{Name: "toolgate", Version: version}
	s.client = sdk.NewClient(s.impl, &sdk.ClientOptions{
		// No roots, sampling or elicitation: the gateway answers input
		// requests with cards, in the round trips of the sessionless
		// revision, never inside a call.
		Capabilities:           &sdk.ClientCapabilities{},
		MultiRoundTrip:         &sdk.MultiRoundTripOptions{Disabled: true},
		ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) { s.wake(s.relist) },
	})
	if cfg.URL != "" {
		s.http = s.httpClient()
	}
	return s, nil
}

// Name is the server's name in the config (dispatch.MCPServer).
func (s *Server) Name() string { return s.cfg.Name }

// SendsIdentity reports whether calls carry the user's identity.
func (s *Server) SendsIdentity() bool { return s.cfg.Identity }

// Connection names the connection whose token calls carry.
func (s *Server) Connection() string { return s.cfg.Connection }

// Start connects and lists the tools, waiting at most the timeout, and
// keeps the session up from then on: a server that is down now is
// connected when it comes back (Changed then tells its tools), a command
// that exits is started again, with backoff. It returns the error of the
// first attempt, if it failed; the server keeps trying all the same.
func (s *Server) Start() error {
	if s.started.Swap(true) {
		return errors.New("started twice")
	}
	first := make(chan error, 1)
	go s.run(first)
	defer s.told.Store(true)
	select {
	case err := <-first:
		return err
	case <-time.After(s.cfg.Timeout):
		return fmt.Errorf("mcp server %q: no answer within %v", s.cfg.Name, s.cfg.Timeout)
	}
}

// Close ends the session and stops a command; it waits for them.
func (s *Server) Close() error {
	s.cancel()
	if s.started.Load() {
		<-s.done
	}
	return nil
}

// Tools are the server's tools as the gateway serves them, the prefix
// put on; known reports whether it has listed them yet.
func (s *Server) Tools() (tools []manifest.Tool, known bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tools, s.listed
}

func (s *Server) wake(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// Backoff between attempts to connect.
const (
	minBackoff = 250 * time.Millisecond
	maxBackoff = 30 * time.Second
)

// run keeps a session up until Close. first gets the outcome of the
// first attempt.
func (s *Server) run(first chan<- error) {
	defer close(s.done)
	backoff := minBackoff
	for s.ctx.Err() == nil {
		cs, ttl, err := s.connect()
		if first != nil {
			first <- err
			first = nil
		}
		if err != nil {
			s.setDown(nil, err)
			s.opts.Logger.Warn("mcp server unavailable", zap.Error(err), zap.Duration("retry_in", backoff))
			select {
			case <-s.ctx.Done():
				return
			case <-time.After(backoff):
			case <-s.kick:
			}
			backoff = min(backoff*2, maxBackoff)
			continue
		}
		s.opts.Logger.Info("mcp server connected", zap.String("protocol_version", cs.InitializeResult().ProtocolVersion))
		since := time.Now()
		s.serve(cs, ttl)
		_ = cs.Close()
		if time.Since(since) >= stableSession {
			backoff = minBackoff
			continue
		}
		// A session that ended soon after it began (a command that
		// exits at once, a server that drops every session): the next
		// waits, longer each time, as a failed connect does.
		select {
		case <-s.ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, maxBackoff)
	}
}

// stableSession is how long a session must last for the backoff to start
// over.
const stableSession = 30 * time.Second

// serve watches a live session: it lists the tools again when told to
// (or when a list's ttl ends) and returns when the session ends or the
// server closes.
func (s *Server) serve(cs *sdk.ClientSession, ttl time.Duration) {
	ended := make(chan struct{})
	go func() {
		_ = cs.Wait()
		close(ended)
	}()
	for {
		var expire <-chan time.Time
		if ttl > 0 {
			expire = time.After(ttl)
		}
		select {
		case <-s.ctx.Done():
			return
		case <-ended:
			s.setDown(cs, errors.New("the session ended"))
			s.opts.Logger.Warn("mcp server session ended; reconnecting")
			return
		case <-s.kick:
			s.setDown(cs, errors.New("the session failed"))
			return
		case <-s.relist:
		case <-expire:
		}
		var err error
		if ttl, err = s.list(cs); err != nil {
			s.opts.Logger.Warn("listing the tools again failed; reconnecting", zap.Error(err))
			s.setDown(cs, err)
			return
		}
	}
}

// connect opens a session and lists the tools, within the timeout.
func (s *Server) connect() (*sdk.ClientSession, time.Duration, error) {
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.Timeout)
	defer cancel()
	var t sdk.Transport
	if s.cfg.URL != "" {
		endpoint, _ := s.cfg.endpoint()
		t = &sdk.StreamableClientTransport{Endpoint: endpoint, HTTPClient: s.http, MaxRetries: -1, MaxEventSize: int(s.cfg.MaxResultSize)}
	} else {
		t = &sdk.CommandTransport{Command: s.command(), TerminateDuration: 2 * time.Second}
	}
	// The session outlives ctx: Connect's context bounds the handshake.
	cs, err := s.client.Connect(ctx, t, nil)
	if err != nil {
		return nil, 0, s.failure("connecting", err)
	}
	ttl, err := s.list(cs)
	if err != nil {
		_ = cs.Close()
		return nil, 0, err
	}
	fast := ""
	if v := cs.InitializeResult().ProtocolVersion; s.cfg.URL != "" && v >= sessionless {
		fast = v
	}
	s.mu.Lock()
	s.session, s.fast, s.lastErr = cs, fast, nil
	close(s.up)
	s.mu.Unlock()
	s.report(true)
	return cs, ttl, nil
}

// list reads the server's tools, every page, and tells Changed when the
// list is not the first. It returns the list's ttl, 0 for none.
func (s *Server) list(cs *sdk.ClientSession) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.Timeout)
	defer cancel()
	var tools []manifest.Tool
	headerTools := map[string]bool{}
	ttl := time.Duration(0)
	params := &sdk.ListToolsParams{}
	for pages := 0; ; pages++ {
		if pages == maxPages {
			return 0, fmt.Errorf("mcp server %q: more than %d pages of tools", s.cfg.Name, maxPages)
		}
		res, err := cs.ListTools(ctx, params)
		if err != nil {
			return 0, s.failure("listing tools", err)
		}
		for _, t := range res.Tools {
			if t != nil && s.cfg.wants(t.Name) {
				tool := s.tool(t)
				tools = append(tools, tool)
				if bytes.Contains(tool.InputSchema, []byte("x-mcp-header")) {
					headerTools[t.Name] = true
				}
			}
		}
		if len(tools) > maxTools {
			return 0, fmt.Errorf("mcp server %q: more than %d tools", s.cfg.Name, maxTools)
		}
		if res.TTLMs > 0 {
			ttl = max(time.Duration(res.TTLMs)*time.Millisecond, time.Second)
		}
		if res.NextCursor == "" {
			break
		}
		params = &sdk.ListToolsParams{Cursor: res.NextCursor}
	}
	s.mu.Lock()
	s.tools, s.listed, s.headerTools = tools, true, headerTools
	s.mu.Unlock()
	if s.told.Load() && s.opts.Changed != nil {
		s.opts.Changed(s)
	}
	return ttl, nil
}

// maxPages bounds a tool list's pages, and maxTools the tools taken from
// one server: a server that pages forever, or lists without end, must not
// hold the gateway or fill its memory.
const (
	maxPages = 100
	maxTools = 1000
)

// setDown drops the session cs (nil: whichever is up), if it is still
// the live one, and says why.
func (s *Server) setDown(cs *sdk.ClientSession, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.session == nil || cs != nil && s.session != cs {
		if s.session == nil {
			s.lastErr = err
			s.report(false)
		}
		return
	}
	s.session, s.fast, s.lastErr = nil, "", err
	s.up = make(chan struct{})
	s.report(false)
}

// report tells State of a change, while the server runs: a config being
// replaced must not mark down the server its successor has up.
func (s *Server) report(up bool) {
	v := int32(0)
	if up {
		v = 1
	}
	if s.opts.State == nil || s.ctx.Err() != nil {
		return
	}
	// Each session up is told (a connect); down only when it was not.
	if prev := s.state.Swap(v); !up && prev == 0 {
		return
	}
	s.opts.State(up)
}

// ProtocolVersion is the revision of MCP the live session speaks; ""
// while there is none.
func (s *Server) ProtocolVersion() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.session == nil {
		return ""
	}
	return s.session.InitializeResult().ProtocolVersion
}

// Connected reports whether the server has a session now.
func (s *Server) Connected() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.session != nil
}

// reconnectWait bounds how long a call waits for a session that is being
// set up again.
const reconnectWait = 2 * time.Second

// current is the live session, waiting a little for one being set up, or
// why there is none.
func (s *Server) current(ctx context.Context) (*sdk.ClientSession, error) {
	cs, _, err := s.currentFor(ctx, "")
	return cs, err
}

// currentFor is current, and the protocol version to call tool through
// fastCall with; "" for the SDK's client.
func (s *Server) currentFor(ctx context.Context, tool string) (*sdk.ClientSession, string, error) {
	s.mu.Lock()
	cs, up, fast := s.session, s.up, s.fastFor(tool)
	s.mu.Unlock()
	if cs != nil {
		return cs, fast, nil
	}
	t := time.NewTimer(reconnectWait)
	defer t.Stop()
	select {
	case <-up:
	case <-t.C:
	case <-ctx.Done():
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.session == nil {
		err := s.lastErr
		if err == nil {
			err = errors.New("not connected yet")
		}
		return nil, "", err
	}
	return s.session, s.fastFor(tool), nil
}

// fastFor is the version fastCall calls tool with, "" for none; s.mu
// is held.
func (s *Server) fastFor(tool string) string {
	if tool == "" || s.headerTools[tool] {
		return ""
	}
	return s.fast
}

// failure names the server and what failed, never a header or token.
func (s *Server) failure(doing string, err error) error {
	return fmt.Errorf("mcp server %q: %s: %v", s.cfg.Name, doing, err)
}

// command builds the command to start, with its own environment.
func (s *Server) command() *exec.Cmd {
	cmd := exec.Command(s.cfg.Command[0], s.cfg.Command[1:]...)
	cmd.Dir = s.cfg.Dir
	env := []string{}
	for _, k := range []string{"PATH", "HOME", "LANG"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	for k, v := range s.cfg.Env {
		env = append(env, k+"="+v)
	}
	cmd.Env = env
	cmd.Stderr = &lineLogger{log: s.opts.Logger}
	return cmd
}

// lineLogger writes a command's stderr to the log, a line an entry.
type lineLogger struct {
	log *zap.Logger
	buf []byte
}

// maxStderrLine bounds a logged line of a command's stderr.
const maxStderrLine = 4 << 10

func (l *lineLogger) Write(p []byte) (int, error) {
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			if len(l.buf) > maxStderrLine {
				l.log.Info("stderr", zap.ByteString("line", l.buf[:maxStderrLine]))
				l.buf = l.buf[:0]
			}
			return len(p), nil
		}
		line := l.buf[:i]
		if len(line) > maxStderrLine {
			line = line[:maxStderrLine]
		}
		l.log.Info("stderr", zap.ByteString("line", line))
		l.buf = l.buf[i+1:]
	}
}

// callKey carries a call's *callState to the HTTP transport.
type callKey struct{}

// callState is what a call's requests share with the transport: the
// Authorization they carry, and whether an answer was too large (the SDK
// reports a failed read as the call ending without an answer).
type callState struct {
	auth     string
	tooLarge atomic.Bool
}

// httpClient sends the server's requests: the static headers and the
// identity on each, no redirect followed, and the answer to a call
// bounded by MaxResultSize.
func (s *Server) httpClient() *http.Client {
	_, socket := s.cfg.endpoint()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if socket != "" {
		d := &net.Dialer{Timeout: 10 * time.Second}
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			return d.DialContext(ctx, "unix", socket)
		}
	}
	tr.Proxy = nil
	// Calls at once each hold a connection; kept idle, they are not
	// dialled again for the next calls (the default keeps two).
	tr.MaxIdleConnsPerHost = 256
	return &http.Client{
		Transport: &sender{s: s, next: tr},
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

type sender struct {
	s    *Server
	next http.RoundTripper
}

func (t *sender) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	for k, v := range t.s.cfg.Headers {
		req.Header.Set(k, v)
	}
	st, _ := req.Context().Value(callKey{}).(*callState)
	if t.s.cfg.Identity {
		auth := ""
		if st != nil {
			auth = st.auth
		}
		if auth == "" {
			var err error
			if auth, err = t.s.opts.Authorization("", "", t.s.cfg.Name); err != nil {
				return nil, fmt.Errorf("signing the gateway's identity token: %v", err)
			}
		}
		req.Header.Set("Authorization", auth)
	}
	if t.s.cfg.Connection != "" && st != nil && st.auth != "" {
		req.Header.Set("Authorization", st.auth)
	}
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if req.Method == http.MethodPost {
		resp.Body = &limitedBody{r: resp.Body, left: t.s.cfg.MaxResultSize, st: st}
	}
	return resp, nil
}

// errTooLarge is an answer past MaxResultSize.
var errTooLarge = errors.New("the answer is larger than max_result_size")

// limitedBody fails a read past its limit, rather than cutting the
// answer short into something that still parses.
type limitedBody struct {
	r    io.ReadCloser
	left int64
	st   *callState // the call's, if the request is one
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		var one [1]byte
		if n, _ := b.r.Read(one[:]); n > 0 {
			if b.st != nil {
				b.st.tooLarge.Store(true)
			}
			return 0, errTooLarge
		}
		return 0, io.EOF
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *limitedBody) Close() error { return b.r.Close() }

var _ dispatch.MCPServer = (*Server)(nil)
