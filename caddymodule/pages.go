package caddymodule

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/toolgate/toolgate/internal/clienttools"
	"github.com/toolgate/toolgate/internal/gateway"
	"github.com/toolgate/toolgate/internal/identity"
	"github.com/toolgate/toolgate/internal/pagecontext"
	"github.com/toolgate/toolgate/internal/web"
)

// Pages configures the page tokens: JWTs the app mints for one user and one
// thread (claims sub and thread), which the browser client sends in
// Authorization to the page endpoints.
//
// KeyFile and Secret may hold Caddy placeholders such as {env.NAME} or
// {file./path}, resolved once at load; an unknown or empty one is a
// config error.
type Pages struct {
	// KeyFile is a PEM file with the app's public key (PKIX "PUBLIC KEY").
	KeyFile string `json:"key_file,omitempty"`

	// Secret is a shared HS256/384/512 secret of at least 32 bytes. The
	// public fallback of Caddyfile.example is refused unless every
	// listener of the http app is on loopback.
	Secret string `json:"secret,omitempty"`

	// Issuer, when set, must equal the token's iss.
	Issuer string `json:"issuer,omitempty"`

	// Audience, when set, must be among the token's aud. Required when
	// callers are configured too, and different from theirs.
	Audience string `json:"audience,omitempty"`

	// Origins are page origins other than the gateway's own site that may
	// use the page endpoints and client.js; toolgate answers CORS for
	// them, preflight included.
	Origins []string `json:"origins,omitempty"`

	// MaxPendingPerThread caps the client tool calls of one user's thread
	// that wait for a page. A new call over it is turned away with 429 and
	// Retry-After before anything is recorded. Default: 64.
	MaxPendingPerThread int `json:"max_pending_per_thread,omitempty"`

	// MaxPending caps the client tool calls that wait for a page in all,
	// across users and threads. A new call over it is turned away with 429
	// and Retry-After before anything is recorded. Default: 10000.
	MaxPending int `json:"max_pending,omitempty"`

	// MaxStreamsPerToken caps the open call streams (GET /client/calls)
	// of one page token. A stream over it is refused with 429 and
	// Retry-After. Default: 16.
	MaxStreamsPerToken int `json:"max_streams_per_token,omitempty"`
}

// limits maps the caps onto the bridge's limits; p may be nil (defaults).
func (p *Pages) limits() (clienttools.Limits, error) {
	if p == nil {
		return clienttools.Limits{}, nil
	}
	for name, n := range map[string]int{
		"max_pending_per_thread": p.MaxPendingPerThread,
		"max_pending":            p.MaxPending,
		"max_streams_per_token":  p.MaxStreamsPerToken,
	} {
		if n < 0 {
			return clienttools.Limits{}, fmt.Errorf("pages: %s must not be negative", name)
		}
	}
	return clienttools.Limits{
		PendingPerThread: p.MaxPendingPerThread,
		Pending:          p.MaxPending,
		StreamsPerToken:  p.MaxStreamsPerToken,
	}, nil
}

// verifier builds the page-token verifier. refuse is the caller tokens'
// audience, which a page token must not name.
func (p *Pages) verifier(ctx caddy.Context, repl *caddy.Replacer, logger *zap.Logger, refuse string) (*identity.Verifier, error) {
	if (p.KeyFile == "") == (p.Secret == "") {
		return nil, errors.New("pages: set exactly one of key_file and secret")
	}
	opts := identity.VerifyOptions{Issuer: p.Issuer, Audience: p.Audience, Leeway: DefaultLeeway}
	if refuse != "" {
		opts.RefuseAudiences = []string{refuse}
	}
	if p.Secret != "" {
		secret, err := resolve(repl, "pages: secret", p.Secret)
		if err != nil {
			return nil, err
		}
		if secret == examplePageSecret {
			if err := loopbackOnly(ctx, repl); err != nil {
				return nil, fmt.Errorf("pages: secret is the example's public fallback, which lets anyone sign page tokens; it is refused unless every listener is on loopback: %w; set TOOLGATE_PAGE_SECRET", err)
			}
			logger.Warn("pages: the secret is the example's public fallback: anyone who reads Caddyfile.example can sign page tokens; accepted only because every listener is on loopback; set TOOLGATE_PAGE_SECRET")
		}
		v, err := identity.NewSecretVerifier([]byte(secret), opts)
		if err != nil {
			return nil, fmt.Errorf("pages: secret: %w", err)
		}
		return v, nil
	}
	path, err := resolve(repl, "pages: key_file", p.KeyFile)
	if err != nil {
		return nil, err
	}
	v, err := keyFileVerifier(path, opts)
	if err != nil {
		return nil, fmt.Errorf("pages: %w", err)
	}
	return v, nil
}

// bridges holds the client-tool bridges across config reloads: calls
// waiting for their page and the pages' open streams outlive a reload.
var bridges = caddy.NewUsagePool()

type openBridge struct{ *clienttools.Bridge }

func (openBridge) Destruct() error { return nil }

// cors answers CORS for the allowed page origins. It reports false when it
// answered the request itself (a preflight).
func (h *Handler) cors(w http.ResponseWriter, r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" || h.Pages == nil {
		return true
	}
	allowed := false
	for _, o := range h.Pages.Origins {
		allowed = allowed || strings.TrimSuffix(o, "/") == origin
	}
	w.Header().Add("Vary", "Origin")
	if !allowed {
		return true
	}
	w.Header().Set("Access-Control-Allow-Origin", origin)
	if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
		w.Header().Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
		w.Header().Set("Access-Control-Allow-Headers", "Authorization, Content-Type")
		w.Header().Set("Access-Control-Max-Age", "600")
		w.WriteHeader(http.StatusNoContent)
		return false
	}
	return true
}

func (h *Handler) serveClientJS(w http.ResponseWriter, r *http.Request) error {
	if !h.cors(w, r) || !allowMethod(w, r, http.MethodGet) {
		return nil
	}
	w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("ETag", web.ClientETag)
	if r.Header.Get("If-None-Match") == web.ClientETag {
		w.WriteHeader(http.StatusNotModified)
		return nil
	}
	_, err := w.Write(web.ClientJS)
	return err
}

// page is the user and thread a page token names.
type page struct{ user, thread string }

// authenticatePage checks a page token; it writes the refusal itself.
func (h *Handler) authenticatePage(w http.ResponseWriter, r *http.Request) (page, bool) {
	if h.pageVerifier == nil {
		writeError(w, http.StatusNotFound, "pages_not_configured", "client tools need a pages block in the toolgate config")
		return page{}, false
	}
	token, ok := bearerToken(w, r, "toolgate-page", "page")
	if !ok {
		return page{}, false
	}
	claims, err := h.pageVerifier.Verify(r.Context(), token)
	if err == nil {
		p := page{}
		p.user, _ = claims["sub"].(string)
		p.thread, _ = claims["thread"].(string)
		if p.user != "" && p.thread != "" {
			return p, true
		}
		err = errors.New("the page token needs string sub and thread claims")
	}
	w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer realm="toolgate-page", error="invalid_token", error_description=%q`, err.Error()))
	writeError(w, http.StatusUnauthorized, "invalid_token", err.Error())
	return page{}, false
}

// serveClient answers the page endpoints under /client/.
func (h *Handler) serveClient(w http.ResponseWriter, r *http.Request, rest string) error {
	if !h.cors(w, r) {
		return nil
	}
	if rest == "calls" {
		if !allowMethod(w, r, http.MethodGet) {
			return nil
		}
		p, ok := h.authenticatePage(w, r)
		if !ok {
			return nil
		}
		return h.serveStream(w, r, p)
	}
	callID, action, ok := strings.Cut(strings.TrimPrefix(rest, "calls/"), "/")
	if !ok || !strings.HasPrefix(rest, "calls/") || (action != "claim" && action != "result") || gateway.CheckCallID(callID) != nil {
		writeError(w, http.StatusNotFound, "not_found", "no such page endpoint")
		return nil
	}
	if !allowMethod(w, r, http.MethodPost) {
		return nil
	}
	p, ok := h.authenticatePage(w, r)
	if !ok {
		return nil
	}
	var err error
	if action == "claim" {
		if !requireJSON(w, r) {
			return nil
		}
		err = h.bridge.Claim(p.user, p.thread, callID)
	} else {
		var out clienttools.Outcome
		if !h.decodeBody(w, r, &out) {
			return nil
		}
		err = h.bridge.Post(p.user, p.thread, callID, out)
	}
	switch {
	case errors.Is(err, clienttools.ErrNotFound):
		writeError(w, http.StatusNotFound, "unknown_call", err.Error())
	case errors.Is(err, clienttools.ErrConflict):
		writeError(w, http.StatusConflict, "conflict", err.Error())
	case err != nil:
		return err
	default:
		return writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
	}
	return nil
}

// keepAlive is how often an idle stream gets a comment line, so proxies
// and the browser keep it open.
const keepAlive = 15 * time.Second

// retryAfter is the Retry-After of a request refused over a pages limit:
// a stream over max_streams_per_token (streams are freed only as pages
// leave, so asking sooner is pointless; it is also where the browser
// client's backoff tops out), or a client tool call over max_pending or
// max_pending_per_thread (freed as pages answer).
const retryAfter = "10"

// streamKey is what streams are counted by: a digest of the page token's
// signed part (header.payload). The signature is left out because one
// token has several spellings of it — base64's unused low bits, ECDSA's
// (r, n-s) — that all verify.
func streamKey(r *http.Request) string {
	token := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	if i := strings.LastIndexByte(token, '.'); i >= 0 {
		token = token[:i]
	}
	sum := sha256.Sum256([]byte(token))
	return string(sum[:])
}

// serveStream sends the thread's client calls as Server-Sent Events.
func (h *Handler) serveStream(w http.ResponseWriter, r *http.Request, p page) error {
	if q := r.URL.Query().Get("threadId"); q != p.thread {
		writeError(w, http.StatusNotFound, "unknown_thread", "the page token is for another thread")
		return nil
	}
	stream, waiting, err := h.bridge.Open(p.user, p.thread, streamKey(r))
	if errors.Is(err, clienttools.ErrTooManyStreams) {
		w.Header().Set("Retry-After", retryAfter)
		writeError(w, http.StatusTooManyRequests, "too_many_streams", err.Error())
		return nil
	}
	if err != nil {
		return err
	}
	defer stream.Close()
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	send := func(o clienttools.Offer) error {
		data, err := json.Marshal(o)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(w, "event: call\ndata: %s\n\n", data); err != nil {
			return err
		}
		return rc.Flush()
	}
	if _, err := fmt.Fprint(w, ": toolgate\n\n"); err != nil {
		return nil
	}
	for _, o := range waiting {
		if send(o) != nil {
			return nil
		}
	}
	if rc.Flush() != nil {
		return nil
	}
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	for {
		select {
		case <-r.Context().Done():
			return nil
		case o := <-stream.C:
			if send(o) != nil {
				return nil
			}
		case <-tick.C:
			if _, err := fmt.Fprint(w, ": ping\n\n"); err != nil || rc.Flush() != nil {
				return nil
			}
		}
	}
}

// servePageContext renders a readables snapshot for the runtime.
func (h *Handler) servePageContext(w http.ResponseWriter, r *http.Request) error {
	if !allowMethod(w, r, http.MethodPost) {
		return nil
	}
	if _, ok := h.authenticate(w, r); !ok {
		return nil
	}
	var body struct {
		Items []pagecontext.Item `json:"items"`
	}
	if !h.decodeBody(w, r, &body) {
		return nil
	}
	snap, err := pagecontext.Render(body.Items)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_items", err.Error())
		return nil
	}
	return writeJSON(w, http.StatusOK, snap)
}
