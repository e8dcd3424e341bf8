package httpapi

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/toolgate/toolgate/internal/clienttools"
	"github.com/toolgate/toolgate/internal/jsonread"
	"github.com/toolgate/toolgate/internal/observe"
)

// corsOrigins checks the pages origins, scheme://host[:port] each, and
// returns them as cors matches them: as configured, without a final slash.
func corsOrigins(origins []string) (map[string]bool, error) {
	m := make(map[string]bool, len(origins))
	for _, o := range origins {
		if _, ok := originKey(o); !ok {
			return nil, fmt.Errorf("pages: origin %q must be scheme://host[:port]", o)
		}
		m[strings.TrimSuffix(o, "/")] = true
	}
	return m, nil
}

// cors answers CORS for the allowed page origins, and a preflight itself.
func (a *API) cors(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		if origin == "" || a.pages == nil {
			next(w, r)
			return
		}
		w.Header().Add("Vary", "Origin")
		if !a.corsOrigins[origin] {
			next(w, r)
			return
		}
		w.Header().Set("Access-Control-Allow-Origin", origin)
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			w.Header().Set("Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS")
			w.Header().Set("Access-Control-Allow-Headers", "Authorization, Content-Type")
			w.Header().Set("Access-Control-Max-Age", "600")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		next(w, r)
	}
}

// runtimeCORS is cors on a runtime endpoint: only with callers, whose
// token says who calls. Without callers, a page origin gets no CORS there,
// so its scripts can neither read a call's answer nor resume it (a JSON
// POST needs the preflight this refuses).
func (a *API) runtimeCORS(next http.HandlerFunc) http.HandlerFunc {
	if a.callers == nil {
		return next
	}
	return a.cors(next)
}

// clientThread is the one thread whose client calls a page token's page
// sees: its user's, in its installation (none when the token names none).
func (p Principal) clientThread() clienttools.Thread {
	return clienttools.Thread{User: p.Identity.User, Install: p.Identity.Install, ID: p.Thread}
}

// page authenticates a page token; it writes the refusal itself.
func (a *API) page(next func(http.ResponseWriter, *http.Request, Principal)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if a.pages == nil {
			writeError(w, http.StatusNotFound, "pages_not_configured", "client tools need a pages block in the toolgate config")
			return
		}
		p, err := a.pages.Authenticate(r)
		if err != nil {
			a.refuseToken(w, a.pages, err)
			return
		}
		next(w, r, p)
	}
}

func (a *API) serveClaim(w http.ResponseWriter, r *http.Request, p Principal) {
	if !requireJSON(w, r) {
		return
	}
	err := a.bridge.Claim(p.clientThread(), r.PathValue("id"))
	if err == nil {
		a.obs.ClientTool(observe.ClientClaimed, 0)
	}
	a.answerPage(w, err)
}

func (a *API) servePost(w http.ResponseWriter, r *http.Request, p Principal) {
	var out clienttools.Outcome
	if !a.decodeBody(w, r, &out) {
		return
	}
	a.answerPage(w, a.bridge.Post(p.clientThread(), r.PathValue("id"), out))
}

func (a *API) answerPage(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, clienttools.ErrNotFound):
		writeError(w, http.StatusNotFound, "unknown_call", err.Error())
	case errors.Is(err, clienttools.ErrConflict):
		writeError(w, http.StatusConflict, "conflict", err.Error())
	case errors.Is(err, clienttools.ErrUnavailable):
		writeError(w, http.StatusServiceUnavailable, "unavailable", err.Error())
	case err != nil:
		a.internal(w, "answering a page", err)
	default:
		writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
	}
}

// keepAlive is how often an idle stream gets a comment line, so proxies
// and the browser keep it open.
const keepAlive = 15 * time.Second

// streamKey is what streams are counted by: a digest of the page token's
// signed part (header.payload). The signature is left out because one
// token has several spellings of it — base64's unused low bits, ECDSA's
// (r, n-s) — that all verify.
func streamKey(p Principal) string {
	token := p.token
	if i := strings.LastIndexByte(token, '.'); i >= 0 {
		token = token[:i]
	}
	sum := sha256.Sum256([]byte(token))
	return string(sum[:])
}

// serveStream sends the thread's client calls as Server-Sent Events.
func (a *API) serveStream(w http.ResponseWriter, r *http.Request, p Principal) {
	if q := r.URL.Query().Get("threadId"); q != p.Thread {
		writeError(w, http.StatusNotFound, "unknown_thread", "the page token is for another thread")
		return
	}
	stream, waiting, err := a.bridge.Open(p.clientThread(), streamKey(p))
	var over *clienttools.LimitError
	if errors.As(err, &over) {
		a.refused(observe.RefusedLimits, "too_many_streams")
		w.Header().Set("Retry-After", retryAfter)
		writeError(w, http.StatusTooManyRequests, "too_many_streams", err.Error())
		return
	}
	if errors.Is(err, clienttools.ErrUnavailable) {
		// The page's client reconnects with its backoff.
		writeError(w, http.StatusServiceUnavailable, "unavailable", err.Error())
		return
	}
	if err != nil {
		a.internal(w, "opening a page's stream", err)
		return
	}
	defer stream.Close()
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	send := func(o clienttools.Offer) error {
		data, err := json.Marshal(o, jsonread.Legacy)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(w, "event: call\ndata: %s\n\n", data); err != nil {
			return err
		}
		return rc.Flush()
	}
	if _, err := fmt.Fprint(w, ": toolgate\n\n"); err != nil {
		return
	}
	for _, o := range waiting {
		if send(o) != nil {
			return
		}
	}
	if rc.Flush() != nil {
		return
	}
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case o := <-stream.C:
			if send(o) != nil {
				return
			}
		case <-tick.C:
			if _, err := fmt.Fprint(w, ": ping\n\n"); err != nil || rc.Flush() != nil {
				return
			}
		}
	}
}
