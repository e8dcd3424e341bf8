package httpapi

import (
	"net/http"
	"path"
	"slices"

	"github.com/toolgate/toolgate/internal/web"
)

// scripts are the ES modules served at /{name}, to any page (with CORS
// for the page origins): code, no data.
var scripts = func() []string {
	var names []string
	for name := range web.Files {
		if path.Ext(name) == ".js" {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}()

// serveFile serves a static file, revalidated by its entity tag.
func serveFile(f web.File) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Type", f.ContentType)
		h.Set("Cache-Control", "no-cache")
		h.Set("ETag", f.ETag)
		h.Set("X-Content-Type-Options", "nosniff")
		if r.Header.Get("If-None-Match") == f.ETag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		_, _ = w.Write(f.Body)
	}
}

// playgroundPolicy is the playground's Content-Security-Policy. The page
// runs tools with whatever the runtime may do, so nothing but its own
// code may run in it: no inline script, no other origin's script, no
// framing by another page (a framed playground could be clicked through
// by a hostile site). Embeds are any http(s) page, sandboxed by the card.
const playgroundPolicy = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; " +
	"connect-src 'self'; frame-src http: https:; img-src 'self' data:; base-uri 'none'; form-action 'none'; " +
	"frame-ancestors 'none'"

// servePlayground serves the playground where runtime calls are allowed:
// in loopback mode only to this machine, by the loopback rules; with
// callers, to anyone, as the page holds nothing and every call it makes
// needs a caller token typed into it.
func (a *API) servePlayground(w http.ResponseWriter, r *http.Request) {
	if a.callers == nil {
		if why := a.loopback.refusal(r); why != "" {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte("toolgate playground: " + why + "\n"))
			return
		}
	}
	w.Header().Set("Content-Security-Policy", playgroundPolicy)
	w.Header().Set("X-Frame-Options", "DENY")
	w.Header().Set("Referrer-Policy", "no-referrer")
	serveFile(web.Files["playground.html"])(w, r)
}
