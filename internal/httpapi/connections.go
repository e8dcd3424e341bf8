package httpapi

import (
	"errors"
	"html/template"
	"net/http"
	"strings"

	"go.uber.org/zap"

	"github.com/toolgate/toolgate/internal/connect"
	"github.com/toolgate/toolgate/internal/gateway"
)

// connectionsJSON is the body of GET /connections.
type connectionsJSON struct {
	Connections []connect.Status `json:"connections"`
}

// serveConnections lists the connections and which the caller has made;
// never a token.
func (a *API) serveConnections(w http.ResponseWriter, r *http.Request, c caller) {
	list, err := a.gw.Connections(r.Context(), readerOf(r, c))
	if err != nil {
		a.writeAnswer(w, nil, err)
		return
	}
	writeJSON(w, http.StatusOK, connectionsJSON{Connections: list})
}

// serveDisconnect deletes the caller's own token of a connection.
func (a *API) serveDisconnect(w http.ResponseWriter, r *http.Request, c caller) {
	if err := a.gw.Disconnect(r.Context(), readerOf(r, c), r.PathValue("name")); err != nil {
		a.writeAnswer(w, nil, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// serveCallback is where a service sends the user's browser back after
// its authorization page: a navigation from another site, which no
// runtime caller makes. Neither callers' tokens nor the loopback and
// Origin rules apply; the state does: made for one user, install, call
// and connection, spent on its first use, ten minutes long. The page says
// what happened, and never shows the code, the state or a token.
func (a *API) serveCallback(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	name := r.PathValue("name")
	done, err := a.gw.CompleteConnection(r.Context(), name, q.Get("state"), q.Get("code"), q.Get("error"), a.baseURL(r))
	page := callbackPage{Title: "Connection"}
	status := http.StatusOK
	switch {
	case errors.Is(err, gateway.ErrBadState):
		status = http.StatusBadRequest
		page.Heading = "This link no longer works"
		page.Detail = "It was used already, it is more than ten minutes old, or it was not made for this connection. Nothing was connected. Go back to the conversation and press the connect button again."
	case err != nil:
		a.logger.Error("a connection's callback", zap.String("connection", name), zap.Error(err))
		status = http.StatusServiceUnavailable
		page.Heading = "Not connected"
		page.Detail = "The gateway could not keep the connection now. Go back to the conversation and try again."
	case done.Err != nil:
		status = http.StatusBadGateway
		page.Title = done.Title
		page.Heading = done.Title + " was not connected"
		page.Detail = done.Err.Error() + "."
		if done.Call != nil {
			page.Detail += " The call that waited for it ended without sending anything."
		}
	default:
		page.Title = done.Title
		page.Heading = done.Title + " is connected"
		page.Detail = "You can close this window."
		if done.Call != nil {
			page.Detail = "The call that waited for it went on. You can close this window."
		}
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	// The page's URL holds the code and the state: no other site learns
	// it, nothing keeps the page, and it runs nothing.
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	if err := callbackTemplate.Execute(w, page); err != nil {
		a.logger.Debug("writing the callback page", zap.Error(err))
	}
}

type callbackPage struct {
	Title, Heading, Detail string
}

var callbackTemplate = template.Must(template.New("callback").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<title>{{.Title}} · toolgate</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:32rem;margin:4rem auto;padding:0 1rem;color:#222}h1{font-size:1.4rem}</style>
</head><body><h1 id="heading">{{.Heading}}</h1><p id="detail">{{.Detail}}</p></body></html>
`))

// baseURL is the gateway's own URL as the request reached it: scheme,
// Host and the path the API is mounted on.
func (a *API) baseURL(r *http.Request) string {
	mount, _ := strings.CutSuffix(a.originalPath(r), r.URL.Path)
	return requestOrigin(r) + mount
}
