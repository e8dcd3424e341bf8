package httpapi

import (
	"bytes"
	"fmt"
	"net/http"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/toolgate/toolgate/internal/gateway"
	"github.com/toolgate/toolgate/internal/jsonread"
	"github.com/toolgate/toolgate/internal/manifest"
	"github.com/toolgate/toolgate/internal/observe"
	"github.com/toolgate/toolgate/internal/pagecontext"
)

// caller is who a runtime request comes from.
type caller struct {
	Principal
	// verified is true when the identity comes from a verified token; the
	// envelope's identity is then ignored.
	verified bool
}

// runtime authenticates a runtime call: with callers configured, by its
// token; without, only straight from this machine (the loopback rules).
func (a *API) runtime(next func(http.ResponseWriter, *http.Request, caller)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if c, ok := a.authenticate(w, r); ok {
			next(w, r, c)
		}
	}
}

// authenticate checks a runtime caller; it writes the refusal itself.
func (a *API) authenticate(w http.ResponseWriter, r *http.Request) (caller, bool) {
	if a.callers == nil {
		if why := a.loopback.refusal(r); why != "" {
			a.refused(observe.RefusedLoopback, "forbidden")
			writeError(w, http.StatusForbidden, "forbidden", why)
			return caller{}, false
		}
		return caller{}, true
	}
	p, err := a.callers.Authenticate(r)
	if err != nil {
		a.refuseToken(w, a.callers, err)
		return caller{}, false
	}
	return caller{Principal: p, verified: true}, true
}

// toolList is GET /tools: each tool's entry encoded once, at load, in
// each format; a list is then only joined per request, filtered by the
// caller's policies.
type toolList struct {
	entries [numFormats]map[string][]byte
	full    [numFormats][]byte // the whole lists, when no tool has a policy
}

// listFormat is a shape of the tool list: toolgate's own, or the shape a
// model API takes its tools in, so that a runtime passes the list on as it
// is.
type listFormat int

const (
	// formatToolgate: {name, displayName, description, input_schema}.
	formatToolgate listFormat = iota
	// formatOpenAI: OpenAI's Chat Completions function tools,
	// {type: "function", function: {name, description, parameters}}.
	formatOpenAI
	// formatAnthropic: Anthropic's Messages API tools, {name, description,
	// input_schema}, which refuses members it does not know.
	formatAnthropic
	numFormats
)

// listFormats are the values of GET /tools?format=.
var listFormats = map[string]listFormat{"": formatToolgate, "toolgate": formatToolgate, "openai": formatOpenAI, "anthropic": formatAnthropic}

type listedTool struct {
	Name        string         `json:"name"`
	DisplayName string         `json:"displayName"`
	Description string         `json:"description"`
	InputSchema jsontext.Value `json:"input_schema"`
}

type anthropicTool struct {
	Name        string         `json:"name"`
	Description string         `json:"description"`
	InputSchema jsontext.Value `json:"input_schema"`
}

type openAITool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string         `json:"name"`
		Description string         `json:"description"`
		Parameters  jsontext.Value `json:"parameters"`
	} `json:"function"`
}

func newToolList(set *manifest.Set) (toolList, error) {
	tools := set.List()
	var l toolList
	for f := range l.entries {
		l.entries[f] = make(map[string][]byte, len(tools))
	}
	policies := false
	for _, t := range tools {
		// Compact works in place: the schema is the manifest's.
		schema := jsontext.Value(bytes.Clone(t.InputSchema))
		if err := schema.Compact(); err != nil {
			return toolList{}, fmt.Errorf("tool %q: input_schema: %w", t.Name, err)
		}
		fn := openAITool{Type: "function"}
		fn.Function.Name, fn.Function.Description, fn.Function.Parameters = t.Name, t.Description, schema
		for f, v := range [numFormats]any{
			formatToolgate:  listedTool{t.Name, t.DisplayName, t.Description, schema},
			formatOpenAI:    fn,
			formatAnthropic: anthropicTool{t.Name, t.Description, schema},
		} {
			b, err := json.Marshal(v, jsonread.Legacy)
			if err != nil {
				return toolList{}, err
			}
			l.entries[f][t.Name] = b
		}
		policies = policies || t.Policy != nil
	}
	if !policies {
		for f := range l.full {
			l.full[f] = l.join(listFormat(f), tools)
		}
	}
	return l, nil
}

func (l *toolList) join(f listFormat, tools []*manifest.Compiled) []byte {
	entries := l.entries[f]
	size := 2
	for _, t := range tools {
		size += len(entries[t.Name]) + 1
	}
	buf := make([]byte, 0, size)
	buf = append(buf, '[')
	for _, t := range tools {
		e, ok := entries[t.Name]
		if !ok {
			continue // a tool listed while the list changes
		}
		if len(buf) > 1 {
			buf = append(buf, ',')
		}
		buf = append(buf, e...)
	}
	return append(buf, ']')
}

// serveList writes the tools the caller may call, in the format asked for.
func (a *API) serveList(w http.ResponseWriter, r *http.Request, c caller) {
	f, ok := listFormats[r.URL.Query().Get("format")]
	if !ok {
		writeError(w, http.StatusBadRequest, "unknown_format", "format must be toolgate (the default), openai or anthropic")
		return
	}
	l := a.list.Load()
	list := l.full[f]
	if list == nil {
		list = l.join(f, a.gw.Visible(gateway.Call{Identity: c.Identity, Claims: c.Claims}))
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(list)
}

// envelope is the body of an invoke.
type envelope struct {
	Input    jsontext.Value    `json:"input"`
	CallID   string            `json:"callId"`
	Context  *gateway.Origin   `json:"context"`
	Identity *gateway.Identity `json:"identity"`
}

func (a *API) serveInvoke(w http.ResponseWriter, r *http.Request, c caller) {
	var env envelope
	if !a.decodeBody(w, r, &env) {
		return
	}
	call := gateway.Call{Tool: r.PathValue("name"), CallID: env.CallID, Input: env.Input, Surface: gateway.SurfaceAPI, BaseURL: a.baseURL(r)}
	if env.Context != nil {
		call.Origin = *env.Context
	}
	switch {
	case c.verified:
		call.Identity, call.Claims = c.Identity, c.Claims
	case env.Identity != nil:
		call.Identity = *env.Identity
	}
	ans, err := a.gw.Invoke(r.Context(), call)
	a.writeAnswer(w, ans, err)
}

func (a *API) serveStatus(w http.ResponseWriter, r *http.Request, c caller) {
	ans, err := a.gw.Status(r.Context(), readerOf(r, c), r.PathValue("id"))
	a.writeAnswer(w, ans, err)
}

// readerOf is whose calls a GET reads: a verified caller's own, else
// those of the user and install its query names.
func readerOf(r *http.Request, c caller) gateway.Identity {
	if c.verified {
		return c.Identity
	}
	return gateway.Identity{User: r.URL.Query().Get("user"), Install: r.URL.Query().Get("install")}
}

// resumeBody is the body of POST /calls/{callId}/resume.
type resumeBody struct {
	ButtonID string            `json:"buttonId"`
	Action   string            `json:"action"`
	Device   string            `json:"device"`
	Identity *gateway.Identity `json:"identity"`
	// Input is the changed input of an approval approved with changes.
	Input jsontext.Value `json:"input"`
}

func (a *API) serveResume(w http.ResponseWriter, r *http.Request, c caller) {
	var body resumeBody
	if !a.decodeBody(w, r, &body) {
		return
	}
	req := gateway.ResumeRequest{CallID: r.PathValue("id"), Identity: c.Identity, ButtonID: body.ButtonID, Action: body.Action, Device: body.Device,
		Input: body.Input, Surface: gateway.SurfaceAPI, BaseURL: a.baseURL(r)}
	if c.verified {
		// The device is the token's, never the body's.
		req.Device = c.Device
	} else if body.Identity != nil {
		req.Identity = *body.Identity
	}
	ans, err := a.gw.Resume(r.Context(), req)
	a.writeAnswer(w, ans, err)
}

// waitingJSON is the body of GET /waiting.
type waitingJSON struct {
	Calls []*gateway.Answer `json:"calls"`
}

// serveWaiting lists the calls that wait for the caller: approval
// questions and apps' cards, oldest first.
func (a *API) serveWaiting(w http.ResponseWriter, r *http.Request, c caller) {
	calls, err := a.gw.Waiting(r.Context(), readerOf(r, c))
	if err != nil {
		a.writeAnswer(w, nil, err)
		return
	}
	writeJSON(w, http.StatusOK, waitingJSON{Calls: calls})
}

// servePageContext renders a readables snapshot for the runtime.
func (a *API) servePageContext(w http.ResponseWriter, r *http.Request, _ caller) {
	var body struct {
		Items []pagecontext.Item `json:"items"`
	}
	if !a.decodeBody(w, r, &body) {
		return
	}
	snap, err := pagecontext.Render(body.Items)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_items", err.Error())
		return
	}
	writeJSON(w, http.StatusOK, snap)
}
