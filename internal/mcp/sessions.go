package mcp

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/observe"
)

// SessionLimits bound the sessions of the revisions before 2026-07-28,
// which hold memory and goroutines on the gateway between requests.
type SessionLimits struct {
	// IdleTimeout closes a session that has had no request for this long
	// (the SDK's StreamableHTTPOptions.SessionTimeout). Default: 10m.
	IdleTimeout time.Duration
	// PerCaller caps the open sessions of one caller. Default: 64.
	PerCaller int
	// Total caps the open sessions in all. Default: 10000.
	Total int
}

// Default session limits.
const (
	DefaultSessionIdleTimeout   = 10 * time.Minute
	DefaultMaxSessionsPerCaller = 64
	DefaultMaxSessions          = 10000
)

// The caps as they are configured, named in a LimitError.
const (
	optionMaxSessionsPerCaller = "max_sessions_per_caller"
	optionMaxSessions          = "max_sessions"
)

const sessionIDHeader = "Mcp-Session-Id"

func (l SessionLimits) withDefaults() SessionLimits {
	if l.IdleTimeout <= 0 {
		l.IdleTimeout = DefaultSessionIdleTimeout
	}
	if l.PerCaller <= 0 {
		l.PerCaller = DefaultMaxSessionsPerCaller
	}
	if l.Total <= 0 {
		l.Total = DefaultMaxSessions
	}
	return l
}

// LimitError is a new session turned away over a cap, before the SDK
// saw the request.
type LimitError struct {
	// Option names the cap as it is configured: max_sessions_per_caller
	// or max_sessions.
	Option string
	Limit  int
}

func (e *LimitError) Error() string {
	if e.Option == optionMaxSessionsPerCaller {
		return fmt.Sprintf("this caller has %d MCP sessions open, the %s limit: end one (DELETE /mcp with its Mcp-Session-Id) or wait for one to idle out", e.Limit, e.Option)
	}
	return fmt.Sprintf("the gateway has %d MCP sessions open, the %s limit: try again later", e.Limit, e.Option)
}

// sessions counts the open sessions by caller, within the limits, and
// ends each when the token it was opened with stops being accepted.
// Its timers, like the SDK's idle timer, run on the runtime's clock (not
// Options.Clock): tests move it with testing/synctest.
//
// A slot is taken for every POST that may open a session (one without
// Mcp-Session-Id), bound to the session if its initialize succeeds, and
// freed when that session closes (idle timeout, DELETE, token expiry), or
// when the POST ends without opening one.
type sessions struct {
	limits SessionLimits
	obs    observe.Observer

	mu        sync.Mutex
	perCaller map[string]int
	total     int
	byID      map[string]*slot
}

// slot is one session's place, from the POST that may open it until the
// session closes.
type slot struct {
	caller string
	// until is when the session ends: when the latest token its caller
	// sent on it stops being accepted. Zero: never (no token).
	until time.Time
	// json is set, before the session opens, when it is served by the
	// handler that answers a request in JSON (Server.statefulJSON).
	json bool

	// Set once the session is open; guarded by sessions.mu.
	session *sdk.ServerSession
	expiry  *time.Timer
	freed   bool
}

func newSessions(l SessionLimits, obs observe.Observer) *sessions {
	return &sessions{limits: l.withDefaults(), obs: obs, perCaller: map[string]int{}, byID: map[string]*slot{}}
}

// reserve takes a slot for caller, or says which cap is reached.
func (s *sessions) reserve(caller string, until time.Time) (*slot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.perCaller[caller] >= s.limits.PerCaller:
		return nil, &LimitError{Option: optionMaxSessionsPerCaller, Limit: s.limits.PerCaller}
	case s.total >= s.limits.Total:
		return nil, &LimitError{Option: optionMaxSessions, Limit: s.limits.Total}
	}
	s.perCaller[caller]++
	s.total++
	return &slot{caller: caller, until: until}, nil
}

// bind gives sl the session its initialize opened: the session closes
// at sl.until, and frees sl when it closes for any reason. A slot bound
// or freed already is left as it is; freed, its POST ended before the
// initialize did (the client went away), and the session, whose id
// nobody was told, is left to the idle timeout.
func (s *sessions) bind(sl *slot, ss *sdk.ServerSession) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sl.session != nil || sl.freed {
		return
	}
	sl.session = ss
	s.byID[ss.ID()] = sl
	if !sl.until.IsZero() {
		sl.expiry = time.AfterFunc(time.Until(sl.until), func() { _ = ss.Close() })
	}
	s.obs.MCPSession(1)
	// The SDK tells a session's end only to Wait; this goroutine ends
	// with the session, which the idle timeout bounds.
	go func() {
		_ = ss.Wait()
		s.free(sl)
	}()
}

// settle frees sl if the POST that took it opened no session.
func (s *sessions) settle(sl *slot) {
	s.mu.Lock()
	unbound := sl.session == nil
	s.mu.Unlock()
	if unbound {
		s.free(sl)
	}
}

// free gives sl's place back, once.
func (s *sessions) free(sl *slot) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sl.freed {
		return
	}
	sl.freed = true
	s.total--
	if s.perCaller[sl.caller]--; s.perCaller[sl.caller] <= 0 {
		delete(s.perCaller, sl.caller)
	}
	if sl.session != nil {
		delete(s.byID, sl.session.ID())
		if sl.expiry != nil {
			sl.expiry.Stop()
		}
		s.obs.MCPSession(-1)
	}
}

// request looks up session id for a request on it, and reports whether
// its answers are JSON (slot.json). With a token (until not zero) it
// moves the end of the session to until, when caller, whose token is
// accepted until then, is its own caller and the session has not ended
// yet: a client that renews its token keeps its session. A token of
// another caller changes nothing (the SDK refuses it, 403).
func (s *sessions) request(id, caller string, until time.Time) (json bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sl := s.byID[id]
	if sl == nil {
		return false
	}
	if !until.IsZero() {
		s.refresh(sl, caller, until)
	}
	return sl.json
}

// refresh moves the end of sl to until, as request says; s.mu is held.
func (s *sessions) refresh(sl *slot, caller string, until time.Time) {
	if sl.caller != caller || sl.expiry == nil || !until.After(sl.until) {
		return
	}
	if !time.Now().Before(sl.until) || !sl.expiry.Stop() {
		return // ended, or ending: the timer has fired
	}
	sl.until = until
	sl.expiry.Reset(time.Until(until))
}

// slotKey keys, in the context of the POST that may open a session, the
// slot it took. The SDK runs a session's handlers in a context derived
// from that POST's, where bindSessions finds it.
type slotKey struct{}

// sessionCaller is whom a request's session counts for, and until when
// its token is accepted: with callers, the verified caller (user and
// installation); in loopback mode, the one local caller, named by the
// local identity if any, with no end.
func (s *Server) sessionCaller(r *http.Request) (string, time.Time) {
	if info := auth.TokenInfoFromContext(r.Context()); info != nil {
		return info.UserID, info.Expiration
	}
	return s.local.User + "\x1f" + s.local.Install, time.Time{}
}

// serveSession serves a request of the revisions with sessions. A POST
// without Mcp-Session-Id may open a session: it takes a slot first, or
// is refused over a cap. A request on a session renews its end with its
// token, and goes to the handler that holds the session.
//
// A session whose client declared no elicitation is served by the SDK's
// handler that answers a request in JSON rather than in an event stream
// (both are the transport's, for a client that accepts both, as every
// POST must): toolgate asks such a client nothing during a call (a card
// asks by elicitation), and sends no notifications, so the stream would
// only carry the answer, framed and flushed. Other sessions keep the
// stream, which carries a card's elicitation/create during the call.
func (s *Server) serveSession(w http.ResponseWriter, r *http.Request) {
	id := r.Header.Get(sessionIDHeader)
	if id != "" || r.Method != http.MethodPost {
		h := s.stateful
		if id != "" {
			if caller, until := s.sessionCaller(r); s.sessions.request(id, caller, until) {
				h = s.statefulJSON
			}
		}
		h.ServeHTTP(w, r)
		return
	}
	sl, err := s.sessions.reserve(s.sessionCaller(r))
	if err != nil {
		s.refuse(w, err)
		return
	}
	defer s.sessions.settle(sl)
	h := s.stateful
	if s.initializeWithoutElicitation(r) {
		sl.json, h = true, s.statefulJSON
	}
	h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), slotKey{}, sl)))
}

// initializeWithoutElicitation reports whether r's body is an initialize
// whose client capabilities have no elicitation member, read strictly
// (names as they are, none twice, valid UTF-8), as the SDK reads it. Any
// other body, or one it cannot read, is left as it was (false).
func (s *Server) initializeWithoutElicitation(r *http.Request) bool {
	body, ok := s.readFast(r)
	if !ok {
		return false
	}
	var msg struct {
		Method string `json:"method"`
		Params struct {
			Capabilities map[string]jsontext.Value `json:"capabilities"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &msg) != nil || msg.Method != "initialize" || msg.Params.Capabilities == nil {
		return false
	}
	_, elicitation := msg.Params.Capabilities["elicitation"]
	return !elicitation
}

// bindSessions binds a session to the slot of the POST that opened it
// once its initialize succeeded.
func (s *Server) bindSessions(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		res, err := next(ctx, method, req)
		if method != "initialize" || err != nil {
			return res, err
		}
		sl, ok := ctx.Value(slotKey{}).(*slot)
		ss, isServer := req.GetSession().(*sdk.ServerSession)
		if ok && isServer && ss.ID() != "" {
			s.sessions.bind(sl, ss)
		}
		return res, err
	}
}

// refuseLimit is the default answer to a new session over a cap.
func refuseLimit(w http.ResponseWriter, err error) {
	http.Error(w, err.Error(), http.StatusTooManyRequests)
}
