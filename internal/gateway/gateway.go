// Package gateway is the Caddy-free core of toolgate: the one invoke path
// (find the tool, validate the input, build and send the request, normalize
// the answer) that every front end calls.
package gateway

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/toolgate/toolgate/internal/dispatch"
	"github.com/toolgate/toolgate/internal/identity"
	"github.com/toolgate/toolgate/internal/manifest"
	"github.com/toolgate/toolgate/internal/policy"
	"github.com/toolgate/toolgate/internal/refs"
	"github.com/toolgate/toolgate/internal/result"
)

// Context sources.
const (
	SourceThread = "thread"
	SourceAPI    = "api"
)

// Call statuses.
const (
	StatusDone = "done"
)

// Context says where a call comes from.
type Context struct {
	Source   string `json:"source"`
	ThreadID string `json:"threadId,omitempty"`
}

// Identity is the user and installation a call acts for.
type Identity struct {
	User    string `json:"user"`
	Install string `json:"install,omitempty"`
}

// Call is one tool call.
type Call struct {
	Tool     string
	CallID   string
	Input    json.RawMessage
	Context  Context
	Identity Identity
	// Claims are the verified caller token's claims; nil without callers.
	Claims map[string]any
}

// Answer is what a call answers.
type Answer struct {
	CallID string `json:"callId"`
	Tool   string `json:"tool"`
	Status string `json:"status"`
	result.Result
}

// Errors that are the caller's mistakes, not the tool's failures.
var (
	ErrUnknownTool = errors.New("unknown tool")
	ErrBadRequest  = errors.New("bad request")
	ErrForbidden   = errors.New("forbidden")
)

// RequestError is a caller's mistake with a stable code.
type RequestError struct {
	Code string
	Msg  string
	kind error
}

func (e *RequestError) Error() string { return e.Msg }
func (e *RequestError) Unwrap() error { return e.kind }

func badRequest(code, format string, args ...any) error {
	return &RequestError{Code: code, Msg: fmt.Sprintf(format, args...), kind: ErrBadRequest}
}

// Gateway serves one set of tools.
type Gateway struct {
	tools  *manifest.Set
	issuer *identity.Issuer
	client *dispatch.Client
	logger *zap.Logger
}

// New returns a gateway. logger may be nil.
func New(tools *manifest.Set, issuer *identity.Issuer, client *dispatch.Client, logger *zap.Logger) *Gateway {
	if logger == nil {
		logger = zap.NewNop()
	}
	return &Gateway{tools: tools, issuer: issuer, client: client, logger: logger}
}

// Tools returns the tool set.
func (g *Gateway) Tools() *manifest.Set { return g.tools }

// CheckContext validates a call context, filling the default.
func CheckContext(c *Context) error {
	switch c.Source {
	case "":
		if c.ThreadID != "" {
			return badRequest("invalid_context", `context: threadId needs "source": "thread"`)
		}
		c.Source = SourceAPI
	case SourceAPI:
		if c.ThreadID != "" {
			return badRequest("invalid_context", `context: an "api" call has no threadId`)
		}
	case SourceThread:
		if c.ThreadID == "" {
			return badRequest("invalid_context", `context: a "thread" call needs a threadId`)
		}
	default:
		return badRequest("invalid_context", "context: source %q is not thread or api", c.Source)
	}
	return nil
}

// NewCallID makes a random call id.
func NewCallID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "call_" + base64.RawURLEncoding.EncodeToString(b[:])
}

// Invoke runs one call. It returns an error only for the caller's mistakes
// (an unknown tool, a bad context or identity); every failure of the tool
// itself is an Answer with IsError set, whose content the model reads.
func (g *Gateway) Invoke(ctx context.Context, call Call) (*Answer, error) {
	tool, ok := g.tools.Lookup(call.Tool)
	if !ok {
		return nil, &RequestError{Code: "unknown_tool", Msg: fmt.Sprintf("no tool named %q", call.Tool), kind: ErrUnknownTool}
	}
	if err := CheckContext(&call.Context); err != nil {
		return nil, err
	}
	if call.CallID == "" {
		call.CallID = NewCallID()
	}
	if tool.Target.Spec.Type == dispatch.TypeApp && call.Identity.User == "" {
		return nil, badRequest("identity_required", "tool %q runs on an app component: identity.user is required", call.Tool)
	}
	start := time.Now()
	input, inputErr := decodeInput(call.Input)
	if ok, err := g.Allowed(tool, call, input); !ok {
		msg := fmt.Sprintf("the caller may not call tool %q", call.Tool)
		if err != nil {
			g.logger.Warn("allow expression failed", zap.String("tool", call.Tool), zap.Error(err))
			msg += " (the policy could not be evaluated)"
		}
		return nil, &RequestError{Code: "forbidden", Msg: msg, kind: ErrForbidden}
	}
	var res result.Result
	switch {
	case inputErr != nil:
		res = result.Errorf("invalid input: %v", inputErr)
	default:
		if err := tool.ValidateInput(input); err != nil {
			res = result.Errorf("%v", err)
		} else {
			res = g.Dispatch(ctx, tool.Target, input, call)
		}
	}
	if ce := g.logger.Check(zapcore.DebugLevel, "tool call"); ce != nil {
		ce.Write(zap.String("tool", call.Tool), zap.String("call_id", call.CallID),
			zap.Bool("is_error", res.IsError), zap.Duration("duration", time.Since(start)))
	}
	return &Answer{CallID: call.CallID, Tool: call.Tool, Status: StatusDone, Result: res}, nil
}

// Allowed evaluates the tool's allow policy for a call; input may be nil.
// A policy that fails to evaluate denies.
func (g *Gateway) Allowed(tool *manifest.Compiled, call Call, input any) (bool, error) {
	if tool.Policy == nil {
		return true, nil
	}
	in, _ := policy.Plain(input).(map[string]any)
	if in == nil {
		in = map[string]any{}
	}
	claims := call.Claims
	if claims == nil {
		claims = map[string]any{}
	}
	return tool.Policy.Eval(policy.Env{
		Claims:  claims,
		User:    call.Identity.User,
		Install: call.Identity.Install,
		Tool:    tool.Name,
		Context: policy.Context{Source: call.Context.Source, ThreadID: call.Context.ThreadID},
		Input:   in,
	})
}

// Visible returns the tools the caller may call, for the tool list. The
// input is not known yet: a policy that needs it and fails without it
// keeps its tool listed, and is enforced when the call comes.
func (g *Gateway) Visible(call Call) []*manifest.Compiled {
	if call.Context.Source == "" {
		call.Context.Source = SourceAPI
	}
	var out []*manifest.Compiled
	for _, t := range g.tools.List() {
		if ok, err := g.Allowed(t, call, nil); ok || err != nil {
			out = append(out, t)
		}
	}
	return out
}

// Dispatch sends one target with the given input and normalizes the answer.
// A card button's target takes the same path.
func (g *Gateway) Dispatch(ctx context.Context, t *dispatch.Target, input any, call Call) result.Result {
	if t.Spec.Type == dispatch.TypeKazzle {
		return result.Errorf("tool %s runs in the user's page, and this gateway does not serve client tools yet", t.Spec.Name)
	}
	req, err := t.Request(ctx, input)
	if err != nil {
		var me *refs.MissingError
		if errors.As(err, &me) {
			return result.Errorf("the call could not be built: %v", me)
		}
		return result.Errorf("the call could not be built: %v", err)
	}
	if t.Spec.Type == dispatch.TypeApp {
		tok, err := g.issuer.Token(call.Identity.User, call.Identity.Install, t.Component.Name)
		if err != nil {
			g.logger.Error("signing identity token", zap.Error(err))
			return result.Errorf("the gateway could not sign the identity token")
		}
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Kazzle-Tool-Context", contextHeader(call.Context))
	}
	resp, err := g.client.Do(req)
	if err != nil {
		return result.Errorf("%s %s failed: %v", t.Spec.Method, describe(t), err)
	}
	if t.Mapping != nil {
		return t.Mapping.Apply(resp.Status, resp.Header, resp.Body)
	}
	return result.Normalize(resp.Status, resp.Header.Get("Content-Type"), resp.Body)
}

// describe names a target without its resolved values, which may be secret.
func describe(t *dispatch.Target) string {
	if t.Spec.Type == dispatch.TypeApp {
		return t.Spec.Component + " " + t.Spec.Path
	}
	return t.Spec.URL
}

func contextHeader(c Context) string {
	if c.Source == SourceThread {
		b, _ := json.Marshal(c)
		return string(b)
	}
	return `{"source":"api"}`
}

// decodeInput decodes the input keeping numbers exact; absent means {}.
func decodeInput(raw json.RawMessage) (any, error) {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return map[string]any{}, nil
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	return v, nil
}

// StatusOf maps a caller's mistake to its HTTP status.
func StatusOf(err error) int {
	switch {
	case errors.Is(err, ErrUnknownTool):
		return http.StatusNotFound
	case errors.Is(err, ErrBadRequest):
		return http.StatusBadRequest
	case errors.Is(err, ErrForbidden):
		return http.StatusForbidden
	}
	return http.StatusInternalServerError
}
