package connect

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/go-json-experiment/json"
	"go.uber.org/zap"
	"golang.org/x/oauth2"

	"github.com/toolgate/toolgate/internal/clock"
)

// Times of a connection's life.
const (
	// FlowTTL is how long an authorization started from a card may take:
	// its state is refused after it.
	FlowTTL = 10 * time.Minute
	// refreshEarly is how long before its expiry a token is refreshed.
	refreshEarly = time.Minute
	// lockTTL bounds a refresh's hold on its token; refreshWait how long
	// a caller waits for another's refresh (another instance's);
	// refreshTimeout bounds the refresh's request, so that it ends, and
	// what it got is stored, before its lock does.
	lockTTL        = 30 * time.Second
	refreshWait    = 25 * time.Second
	refreshTimeout = 20 * time.Second
	// endpointTimeout bounds each request to a token endpoint.
	endpointTimeout = 30 * time.Second
)

// The events Options.Event is told, as observe names them.
const (
	eventRefreshed = "refreshed"
	eventDropped   = "dropped"
	eventExchanged = "exchanged"
)

// Who is whom a token acts for: the identity of the call.
type Who struct {
	User, Install string
}

// Options are what a Manager needs from the gateway.
type Options struct {
	// Store keeps the sealed tokens and the flows in progress.
	Store Store
	// Keys seal them.
	Keys *Keys
	// Client sends the token endpoints' requests. Default: one that
	// follows no redirect, bounded by endpointTimeout.
	Client *http.Client
	// Clock stamps expiries. Default: the system's.
	Clock clock.Clock
	// Logger is told of refreshes refused and tokens dropped; never of a
	// token.
	Logger *zap.Logger
	// IdentityToken signs the gateway's identity token for user at
	// install with audience aud: what an exchange connection exchanges.
	IdentityToken func(user, install, aud string) (string, error)
	// Event, when set, is told of tokens refreshed, dropped (a refresh
	// refused) and exchanged: observe's Connection* events.
	Event func(name, event string)
}

// Manager makes, keeps and hands out the connections' tokens.
type Manager struct {
	conns  map[string]*Config
	names  []string
	store  Store
	keys   *Keys
	client *http.Client
	clock  clock.Clock
	logger *zap.Logger
	sign   func(user, install, aud string) (string, error)
	event  func(name, event string)
}

// New checks the connections and returns their Manager.
func New(conns []Config, o Options) (*Manager, error) {
	if o.Store == nil || o.Keys == nil {
		return nil, errors.New("connect: a store and keys are required")
	}
	m := &Manager{conns: map[string]*Config{}, store: o.Store, keys: o.Keys, client: o.Client,
		clock: clock.Or(o.Clock), logger: o.Logger, sign: o.IdentityToken, event: o.Event}
	if m.event == nil {
		m.event = func(string, string) {}
	}
	for i := range conns {
		c := conns[i]
		if err := c.Check(); err != nil {
			return nil, err
		}
		if _, dup := m.conns[c.Name]; dup {
			return nil, fmt.Errorf("connection %q is declared twice", c.Name)
		}
		if c.Exchanges() && m.sign == nil {
			return nil, fmt.Errorf("connection %q: exchange needs the gateway's identity tokens", c.Name)
		}
		m.conns[c.Name] = &c
		m.names = append(m.names, c.Name)
	}
	slices.Sort(m.names)
	if m.client == nil {
		m.client = &http.Client{
			Timeout:       endpointTimeout,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	if m.logger == nil {
		m.logger = zap.NewNop()
	}
	return m, nil
}

// Lookup returns the connection named name; a nil Manager has none.
func (m *Manager) Lookup(name string) (*Config, bool) {
	if m == nil { // a gateway that declares none
		return nil, false
	}
	c, ok := m.conns[name]
	return c, ok
}

// Names lists the connections, sorted.
func (m *Manager) Names() []string { return m.names }

// ErrNotConnected is the error of a token the user has not made, or
// that the service no longer honours: the user must connect (again).
var ErrNotConnected = errors.New("not connected")

// NotConnectedError says which connection the user must make, and why.
type NotConnectedError struct {
	Name, Title string
	// Reason says why a token that was made is gone; empty when none was.
	Reason string
}

func (e *NotConnectedError) Error() string {
	if e.Reason != "" {
		return fmt.Sprintf("connection %s is not made: %s", e.Name, e.Reason)
	}
	return fmt.Sprintf("connection %s is not made", e.Name)
}

func (e *NotConnectedError) Is(target error) bool { return target == ErrNotConnected }

// token is what the store keeps of a token, sealed.
type token struct {
	Access  string    `json:"access"`
	Refresh string    `json:"refresh,omitempty"`
	Type    string    `json:"type,omitempty"`
	Scope   string    `json:"scope,omitempty"`
	Expiry  time.Time `json:"expiry,omitzero"`
	Created time.Time `json:"created"`
}

// fresh reports whether t is good for a call at now: it does not expire
// within refreshEarly.
func (t *token) fresh(now time.Time) bool {
	return t.Expiry.IsZero() || now.Add(refreshEarly).Before(t.Expiry)
}

// Store keys. Identities hold no control character (the gateway checks
// them), so \x1f separates their parts unambiguously.
func tokenKey(name string, w Who) string {
	return "token\x1f" + name + "\x1f" + w.User + "\x1f" + w.Install
}

func lockKey(tokenKey string) string { return "lock\x1f" + tokenKey }

// flowKey is where a flow's state is kept: under its hash, so that the
// store does not hold what a callback must show.
func flowKey(state string) string {
	sum := sha256.Sum256([]byte(state))
	return "flow\x1f" + hex.EncodeToString(sum[:])
}

// Token returns the access token of connection name for w: stored, and
// refreshed first when it is about to expire; or, for an exchange
// connection, exchanged. An authorization connection not made (or whose
// refresh the service refused) is a *NotConnectedError. An unknown name
// is the author's mistake, refused at load; here it is an error too.
func (m *Manager) Token(ctx context.Context, name string, w Who) (string, error) {
	c, ok := m.conns[name]
	if !ok {
		return "", fmt.Errorf("connection %q is not declared", name)
	}
	if w.User == "" {
		// One token for every call that names no user would be anyone's.
		return "", fmt.Errorf("connection %s is a user's, and the call names no user", name)
	}
	key := tokenKey(name, w)
	t, err := m.load(ctx, key)
	switch {
	case errors.Is(err, ErrNotFound):
		if c.Exchanges() {
			return m.exchange(ctx, c, w, key)
		}
		return "", &NotConnectedError{Name: name, Title: c.Title}
	case err != nil:
		return "", err
	case t.fresh(m.clock.Now()):
		return t.Access, nil
	case c.Exchanges():
		return m.exchange(ctx, c, w, key)
	}
	return m.refresh(ctx, c, w, key)
}

// load reads and opens the token under key. A value that does not open is
// as good as none, and the user connects again. One damaged or moved from
// another place is deleted; one sealed by a key this process does not
// have is left: another instance may have it (keys being changed one
// instance at a time), and a new connection replaces it.
func (m *Manager) load(ctx context.Context, key string) (*token, error) {
	raw, err := m.store.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	plain, err := m.keys.Open(raw, []byte(key))
	if err == nil {
		var t token
		if err = json.Unmarshal(plain, &t); err == nil {
			return &t, nil
		}
	}
	if errors.Is(err, ErrUnknownKey) {
		m.logger.Warn("a stored connection token is sealed by a key not configured here; the user connects again", zap.Error(err))
		return nil, ErrNotFound
	}
	m.logger.Warn("a stored connection token does not open; dropping it", zap.Error(err))
	if err := m.store.Delete(ctx, key); err != nil {
		return nil, err
	}
	return nil, ErrNotFound
}

func (m *Manager) save(ctx context.Context, key string, t *token) error {
	plain, err := json.Marshal(t)
	if err != nil {
		return err
	}
	return m.store.Put(ctx, key, m.keys.Seal(plain, []byte(key)), 0)
}

// refresh refreshes the token under key, once across every instance on
// the store: the holder of its lock refreshes it, the others wait for
// it and read what it stored.
func (m *Manager) refresh(ctx context.Context, c *Config, w Who, key string) (string, error) {
	wait := time.NewTimer(refreshWait)
	defer wait.Stop()
	for {
		unlock, ok, err := m.store.Lock(ctx, lockKey(key), lockTTL)
		if err != nil {
			return "", err
		}
		if ok {
			defer unlock()
			return m.refreshHeld(ctx, c, w, key)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-wait.C:
			return "", fmt.Errorf("connection %s: another refresh of this token did not end in %v", c.Name, refreshWait)
		case <-time.After(50 * time.Millisecond):
		}
		t, err := m.load(ctx, key)
		switch {
		case errors.Is(err, ErrNotFound):
			return "", &NotConnectedError{Name: c.Name, Title: c.Title, Reason: "its refresh was refused"}
		case err != nil:
			return "", err
		case t.fresh(m.clock.Now()):
			return t.Access, nil
		}
	}
}

// refreshHeld refreshes with the lock held: the token is read again
// first, as another may have refreshed it since.
//
// It runs to its end even if the call that asked goes away: a service
// that rotates refresh tokens has spent the old one once it answered, and
// only the new one, stored, refreshes again.
func (m *Manager) refreshHeld(ctx context.Context, c *Config, w Who, key string) (string, error) {
	ctx = context.WithoutCancel(ctx)
	t, err := m.load(ctx, key)
	switch {
	case errors.Is(err, ErrNotFound):
		return "", &NotConnectedError{Name: c.Name, Title: c.Title, Reason: "its refresh was refused"}
	case err != nil:
		return "", err
	case t.fresh(m.clock.Now()):
		return t.Access, nil
	case t.Refresh == "":
		if err := m.store.Delete(ctx, key); err != nil {
			return "", err
		}
		return "", &NotConnectedError{Name: c.Name, Title: c.Title, Reason: "its token expired, and the service gave no refresh token"}
	}
	reqCtx, cancel := context.WithTimeout(ctx, refreshTimeout)
	defer cancel()
	src := c.oauth("").TokenSource(m.oauthContext(reqCtx), &oauth2.Token{RefreshToken: t.Refresh})
	got, err := src.Token()
	if err != nil {
		if refused(err) {
			if cur, lerr := m.load(ctx, key); lerr == nil && cur.Refresh != t.Refresh {
				// The user connected again while the refresh ran: the
				// new token stands.
				return cur.Access, nil
			}
			m.logger.Info("a connection's refresh was refused; the user connects again",
				zap.String("connection", c.Name), zap.String("user", w.User), zap.String("install", w.Install), zap.String("why", endpointError(err)))
			if err := m.store.Delete(ctx, key); err != nil {
				return "", err
			}
			m.event(c.Name, eventDropped)
			return "", &NotConnectedError{Name: c.Name, Title: c.Title, Reason: "its refresh was refused (" + endpointError(err) + ")"}
		}
		return "", fmt.Errorf("connection %s: refreshing the token failed: %s", c.Name, endpointError(err))
	}
	next := m.tokenOf(got)
	if next.Refresh == "" {
		next.Refresh = t.Refresh // the service kept the one it had
	}
	if err := m.save(ctx, key, next); err != nil {
		return "", err
	}
	m.event(c.Name, eventRefreshed)
	return next.Access, nil
}

// refused reports whether a token endpoint refused a grant for good (it
// is invalid, expired or revoked): invalid_grant, or another 400. A
// refusal of the gateway's own client (invalid_client,
// unauthorized_client, a 401) says nothing of the user's grant: the
// config is wrong, and every user's token would go with it. That, a 5xx
// or a failure on the way may pass, and the token is kept.
func refused(err error) bool {
	var re *oauth2.RetrieveError
	if !errors.As(err, &re) || re.Response == nil {
		return false
	}
	switch {
	case re.ErrorCode == "invalid_grant":
		return true
	case re.ErrorCode == "invalid_client", re.ErrorCode == "unauthorized_client", re.Response.StatusCode == http.StatusUnauthorized:
		return false
	}
	return re.Response.StatusCode == http.StatusBadRequest
}

// endpointError says why a token endpoint's request failed, from its
// status and OAuth error only: the answer's body is never repeated.
func endpointError(err error) string {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) && re.Response != nil {
		s := fmt.Sprintf("HTTP %d", re.Response.StatusCode)
		if re.ErrorCode != "" {
			s += " " + clip(re.ErrorCode, 64)
		}
		if re.ErrorDescription != "" {
			s += ": " + clip(re.ErrorDescription, 200)
		}
		return s
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err.Error()
	}
	return err.Error()
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// tokenOf is what is kept of a token endpoint's answer. Its expiry is
// counted on the gateway's clock from expires_in.
func (m *Manager) tokenOf(t *oauth2.Token) *token {
	now := m.clock.Now()
	out := &token{Access: t.AccessToken, Refresh: t.RefreshToken, Type: t.TokenType, Created: now}
	if s, ok := t.Extra("scope").(string); ok {
		out.Scope = s
	}
	if t.ExpiresIn > 0 {
		out.Expiry = now.Add(time.Duration(t.ExpiresIn) * time.Second)
	}
	return out
}

// oauthContext carries the Manager's client to golang.org/x/oauth2.
func (m *Manager) oauthContext(ctx context.Context) context.Context {
	return context.WithValue(ctx, oauth2.HTTPClient, m.client)
}

// oauth is c as golang.org/x/oauth2 takes it, for the redirect given.
func (c *Config) oauth(redirect string) *oauth2.Config {
	style := oauth2.AuthStyleInHeader
	if c.ClientAuth == ClientAuthPost {
		style = oauth2.AuthStyleInParams
	}
	return &oauth2.Config{
		ClientID: c.ClientID, ClientSecret: c.ClientSecret, Scopes: c.Scopes, RedirectURL: redirect,
		Endpoint: oauth2.Endpoint{AuthURL: c.AuthorizeURL, TokenURL: c.TokenURL, AuthStyle: style},
	}
}

// Flow is an authorization in progress: what the callback needs to end
// it, kept sealed in the store under its state until it is used once or
// FlowTTL passes.
type Flow struct {
	Connection string    `json:"connection"`
	User       string    `json:"user"`
	Install    string    `json:"install"`
	CallID     string    `json:"callId,omitempty"`
	Redirect   string    `json:"redirect"`
	Verifier   string    `json:"verifier"`
	Expires    time.Time `json:"expires"`
}

// Begin starts an authorization of connection name for w, on call callID
// (which the callback resumes), and returns the service's authorization
// URL, which the user opens, and when its state expires. redirect is the
// callback's URL derived from the request, used when the connection
// names none.
func (m *Manager) Begin(ctx context.Context, name string, w Who, callID, redirect string) (string, time.Time, error) {
	c, ok := m.conns[name]
	if !ok || c.Exchanges() {
		return "", time.Time{}, fmt.Errorf("connection %q has no authorization flow", name)
	}
	if w.User == "" {
		return "", time.Time{}, fmt.Errorf("connection %s is a user's, and the call names no user", name)
	}
	if c.RedirectURL != "" {
		redirect = c.RedirectURL
	}
	if u, err := url.Parse(redirect); err != nil || !u.IsAbs() || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return "", time.Time{}, fmt.Errorf("connection %s: no callback URL to send the service back to (set redirect_url)", name)
	}
	state := randomText(32)
	f := Flow{Connection: name, User: w.User, Install: w.Install, CallID: callID, Redirect: redirect,
		Verifier: oauth2.GenerateVerifier(), Expires: m.clock.Now().Add(FlowTTL)}
	plain, err := json.Marshal(&f)
	if err != nil {
		return "", time.Time{}, err
	}
	key := flowKey(state)
	if err := m.store.Put(ctx, key, m.keys.Seal(plain, []byte(key)), FlowTTL); err != nil {
		return "", time.Time{}, err
	}
	opts := []oauth2.AuthCodeOption{oauth2.S256ChallengeOption(f.Verifier)}
	for _, k := range slices.Sorted(maps.Keys(c.Params)) {
		opts = append(opts, oauth2.SetAuthURLParam(k, c.Params[k]))
	}
	return c.oauth(redirect).AuthCodeURL(state, opts...), f.Expires, nil
}

// ErrBadState is a callback whose state is unknown, used, expired or
// another connection's: nothing is exchanged or stored.
var ErrBadState = errors.New("the authorization's state is unknown, already used, expired, or another connection's")

// DeniedError is a callback on which the service says the user did not
// grant access (its error parameter).
type DeniedError struct{ Code string }

func (e *DeniedError) Error() string { return "the service answered " + e.Code }

// Complete ends the flow of state on connection name's callback: the
// state is spent (once, whatever follows), the code exchanged with the
// flow's PKCE verifier, and the token stored for the flow's user. It
// returns the flow, for the call to resume, with a *DeniedError when the
// service answered denied (errCode) or an error when the exchange failed;
// a bad state returns no flow and ErrBadState.
func (m *Manager) Complete(ctx context.Context, name, state, code, errCode string) (*Flow, error) {
	if state == "" || len(state) > 512 {
		return nil, ErrBadState
	}
	key := flowKey(state)
	raw, err := m.store.Take(ctx, key)
	if errors.Is(err, ErrNotFound) {
		return nil, ErrBadState
	}
	if err != nil {
		return nil, err
	}
	plain, err := m.keys.Open(raw, []byte(key))
	if err != nil {
		return nil, ErrBadState
	}
	var f Flow
	if err := json.Unmarshal(plain, &f); err != nil || f.Connection != name || !m.clock.Now().Before(f.Expires) {
		return nil, ErrBadState
	}
	c, ok := m.conns[name]
	if !ok || c.Exchanges() {
		return nil, ErrBadState
	}
	if errCode != "" {
		return &f, &DeniedError{Code: clip(errCode, 64)}
	}
	if code == "" {
		return &f, errors.New("the service sent no code")
	}
	got, err := c.oauth(f.Redirect).Exchange(m.oauthContext(ctx), code, oauth2.VerifierOption(f.Verifier))
	if err != nil {
		return &f, fmt.Errorf("the code exchange failed: %s", endpointError(err))
	}
	if got.AccessToken == "" {
		return &f, errors.New("the service answered no access token")
	}
	if err := m.save(ctx, tokenKey(name, Who{f.User, f.Install}), m.tokenOf(got)); err != nil {
		return &f, err
	}
	return &f, nil
}

// Disconnect deletes w's token of connection name. The service is not
// told; the user revokes the grant there.
func (m *Manager) Disconnect(ctx context.Context, name string, w Who) error {
	if _, ok := m.conns[name]; !ok {
		return fmt.Errorf("connection %q is not declared", name)
	}
	return m.store.Delete(ctx, tokenKey(name, w))
}

// Status is what GET /connections tells of one connection: never a token.
type Status struct {
	Name  string `json:"name"`
	Title string `json:"title"`
	// Exchange connections are made by the gateway, without a person.
	Exchange  bool      `json:"exchange,omitzero"`
	Connected bool      `json:"connected"`
	Scope     string    `json:"scope,omitempty"`
	Since     time.Time `json:"since,omitzero"`
	Expires   time.Time `json:"expires,omitzero"`
}

// List says which connections w has made.
func (m *Manager) List(ctx context.Context, w Who) ([]Status, error) {
	out := make([]Status, 0, len(m.names))
	for _, name := range m.names {
		c := m.conns[name]
		s := Status{Name: name, Title: c.Title, Exchange: c.Exchanges()}
		t, err := m.load(ctx, tokenKey(name, w))
		switch {
		case err == nil:
			s.Connected, s.Scope, s.Since, s.Expires = true, t.Scope, t.Created, t.Expiry
		case !errors.Is(err, ErrNotFound):
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

func randomText(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}
