// Package gateway is the Caddy-free core of toolgate: the one invoke path
// (find the tool, validate the input, build and send the request, normalize
// the answer) that every front end calls.
package gateway

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/toolgate/toolgate/internal/clienttools"
	"github.com/toolgate/toolgate/internal/clock"
	"github.com/toolgate/toolgate/internal/dispatch"
	"github.com/toolgate/toolgate/internal/identity"
	"github.com/toolgate/toolgate/internal/ledger"
	"github.com/toolgate/toolgate/internal/manifest"
	"github.com/toolgate/toolgate/internal/observe"
	"github.com/toolgate/toolgate/internal/policy"
	"github.com/toolgate/toolgate/internal/result"
	"github.com/toolgate/toolgate/internal/tracing"
)

// Origin sources.
const (
	SourceThread = "thread"
	SourceAPI    = "api"
)

// Call statuses, as the ledger's states.
const (
	StatusDone           = string(ledger.Done)
	StatusActionRequired = string(ledger.ActionRequired)
	StatusRunning        = string(ledger.Running)
	StatusAwaitingClient = string(ledger.AwaitingClient)
)

// Origin says where a call comes from: a thread of a conversation, with a
// person in it, or the API. It travels as the invoke's "context" member
// and as the Kazzle-Tool-Context header.
type Origin struct {
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
	Origin   Origin
	Identity Identity
	// Claims are the verified caller token's claims; nil without callers.
	Claims map[string]any
}

// Answer is what a call answers now: a result (done), a card
// (action_required), or only its status while it is in flight.
type Answer struct {
	CallID string
	Tool   string
	Status string
	result.Result
	// Card is the action-required card when Status is action_required.
	Card json.RawMessage
}

// answerJSON is a done answer on the wire, callId, tool, status and the
// result's members, or one in flight, without a result.
type answerJSON struct {
	CallID string `json:"callId"`
	Tool   string `json:"tool"`
	Status string `json:"status"`
	// Result is set when done; nil leaves its members out.
	*result.Result
}

// cardAnswerJSON is an action_required answer on the wire. It is a type
// of its own because the result's "card" member (which channel the card
// shows) would shadow this one.
type cardAnswerJSON struct {
	CallID string         `json:"callId"`
	Tool   string         `json:"tool"`
	Status string         `json:"status"`
	Card   jsontext.Value `json:"card"`
}

// answerOptions write every string, invalid UTF-8 as U+FFFD, and a card as
// it was recorded, escapes and all. A card is written when encoding/json
// would find it valid, repeated names included, as it was before json v2.
var answerOptions = jsonv2.JoinOptions(
	jsontext.AllowInvalidUTF8(true),
	jsontext.AllowDuplicateNames(true),
	jsontext.PreserveRawStrings(true),
)

// MarshalJSONTo writes the shape of the status (json.MarshalerTo). It fails
// only when enc's writer does: an invalid card is written as null.
func (a *Answer) MarshalJSONTo(enc *jsontext.Encoder) error {
	if a.Status == StatusActionRequired {
		card := jsontext.Value(a.Card)
		if !card.IsValid(answerOptions) {
			card = jsontext.Value("null")
		}
		return jsonv2.MarshalEncode(enc, &cardAnswerJSON{a.CallID, a.Tool, a.Status, card}, answerOptions)
	}
	w := answerJSON{CallID: a.CallID, Tool: a.Tool, Status: a.Status}
	if a.Status == StatusDone {
		w.Result = &a.Result
	}
	return jsonv2.MarshalEncode(enc, &w, answerOptions)
}

// MarshalJSON is MarshalJSONTo for encoding/json.
func (a *Answer) MarshalJSON() ([]byte, error) {
	return jsonv2.Marshal(a)
}

// AppendJSON appends the answer's JSON to dst, writing into dst's spare
// capacity: with a buffer large enough, nothing is allocated or copied. It
// cannot fail (see MarshalJSONTo): a panic here is a bug in this file.
func (a *Answer) AppendJSON(dst []byte) []byte {
	buf := answerBuffers.Get().(*bytes.Buffer)
	*buf = *bytes.NewBuffer(dst)
	// Room for the answer and a quarter more, which the encoder keeps free
	// after writing into a bytes.Buffer. Without it, the encoder outgrows
	// the buffer and copies a large answer twice more: a 1 MiB answer
	// allocated 4 MiB, not 1.3.
	n := 64 + len(a.CallID) + len(a.Tool) + len(a.Status) + len(a.Content) + len(a.Markdown) + len(a.EmbedURL) + len(a.Card)
	buf.Grow(n + n/4)
	if err := jsonv2.MarshalWrite(buf, a, answerOptions); err != nil {
		panic("gateway: writing an answer: " + err.Error())
	}
	out := buf.Bytes()
	*buf = bytes.Buffer{} // keep no caller's bytes
	answerBuffers.Put(buf)
	return out
}

// answerBuffers hold the bytes.Buffer that AppendJSON writes through.
var answerBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// Errors that are the caller's mistakes, not the tool's failures.
var (
	ErrUnknownTool = errors.New("unknown tool")
	ErrUnknownCall = errors.New("unknown call")
	ErrBadRequest  = errors.New("bad request")
	ErrForbidden   = errors.New("forbidden")
	ErrConflict    = errors.New("conflict")
	ErrReuse       = errors.New("idempotency key reuse")
	ErrUnavailable = errors.New("unavailable")
	// ErrTooMany: a client tool call over a pages limit; try again later.
	ErrTooMany = errors.New("too many")
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

// unavailable answers a ledger failure. Its detail names the bolt file or
// the Redis address and the call's key, which holds the user: it is logged
// for the operator, and the caller gets a fixed message.
func (g *Gateway) unavailable(err error) error {
	g.logger.Error("the call ledger is unavailable", zap.Error(err))
	return &RequestError{Code: "unavailable", Msg: "the call ledger is unavailable, nothing was run", kind: ErrUnavailable}
}

// Config is what a Gateway serves with.
type Config struct {
	// Tools are the tools served. A card's buttons run on the component of
	// the tool whose handler answered it, never on another.
	Tools  *manifest.Set
	Issuer *identity.Issuer
	Client *dispatch.Client
	// Ledger records calls; one whose Records is false (ledger.Off, which
	// nil means) turns at-most-once execution and cards off.
	Ledger ledger.Ledger
	Logger *zap.Logger
	// Instance names this gateway process in the ledger.
	Instance string
	// Bridge runs client tools in the user's page; ClientTimeout bounds
	// the wait for the page (default clienttools.DefaultTimeout).
	Bridge        *clienttools.Bridge
	ClientTimeout time.Duration
	// Clock stamps calls and their deadlines. Default: the system's.
	Clock clock.Clock
	// Observer counts calls, waits and cards. Default: observe.Nop.
	Observer observe.Observer
	// EmbedOrigins are the origins (as result.EmbedOrigin writes them) a
	// url target's embedUrl may be on: the app's own sites. A url target
	// is someone else's endpoint, and the card frames its embed on the
	// app's page. Default: none, so a url target's embed is refused.
	EmbedOrigins []string
}

// Gateway serves one set of tools.
type Gateway struct {
	tools      *manifest.Set
	issuer     *identity.Issuer
	client     *dispatch.Client
	ledger     ledger.Ledger
	logger     *zap.Logger
	instance   string
	bridge     *clienttools.Bridge
	clientWait time.Duration
	clock      clock.Clock
	obs        observe.Observer
	embeds     map[string]bool // EmbedOrigins
	embedList  []string        // EmbedOrigins, in their order
}

// New returns a gateway.
func New(c Config) *Gateway {
	g := &Gateway{
		tools: c.Tools, issuer: c.Issuer, client: c.Client,
		ledger: c.Ledger, logger: c.Logger, instance: c.Instance, clock: clock.Or(c.Clock),
		bridge: c.Bridge, clientWait: c.ClientTimeout, obs: observe.Or(c.Observer),
		embeds: make(map[string]bool, len(c.EmbedOrigins)), embedList: slices.Clone(c.EmbedOrigins),
	}
	for _, o := range c.EmbedOrigins {
		g.embeds[o] = true
	}
	if g.ledger == nil {
		g.ledger = ledger.Off
	}
	g.ledger = traceLedger(g.ledger)
	if g.bridge == nil {
		g.bridge = clienttools.NewBridge()
	}
	if g.clientWait <= 0 {
		g.clientWait = clienttools.DefaultTimeout
	}
	if g.logger == nil {
		g.logger = zap.NewNop()
	}
	if g.instance == "" {
		g.instance = NewCallID()[len("call_"):]
	}
	return g
}

// Tools returns the tool set.
func (g *Gateway) Tools() *manifest.Set { return g.tools }

// SpendOnce marks a one-time token id used until it expires, in the
// gateway's ledger (ledger.Ledger's Spend): it reports whether it was
// unused. A front end's own continuations (MCP request state) are spent
// here, so that one is usable once across instances and restarts.
func (g *Gateway) SpendOnce(ctx context.Context, id string, until time.Time) (bool, error) {
	return g.ledger.Spend(ctx, id, until)
}

// CheckOrigin validates a call context, filling the default.
func CheckOrigin(c *Origin) error {
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
		// A thread id is stored with the call, keys the page's waiting
		// calls and goes out in Kazzle-Tool-Context: bounded as identities.
		if err := checkIdentityPart(c.ThreadID); err != nil {
			return badRequest("invalid_context", "context: threadId %v", err)
		}
	default:
		return badRequest("invalid_context", "context: source %q is not thread or api", c.Source)
	}
	return nil
}

// NewCallID makes a call id: "call_" and 26 characters that sort by time,
// a millisecond clock then 80 random bits. Ids made later sort later, so
// the ledger adds new calls at the end of its B+tree rather than all over
// it: about a third of the cost per call of random ids in bbolt.
func NewCallID() string {
	var b [16]byte
	ms := uint64(time.Now().UnixMilli())
	for i := 5; i >= 0; i-- {
		b[i] = byte(ms)
		ms >>= 8
	}
	_, _ = rand.Read(b[6:])
	// Encoded in place after the prefix: one allocation, the string.
	var id [len("call_") + 26]byte
	copy(id[:], "call_")
	callIDEncoding.Encode(id[len("call_"):], b[:])
	return string(id[:])
}

// callIDEncoding is base32hex in lower case, whose digits are in ASCII
// order: the text of ids sorts as their bytes do.
var callIDEncoding = base32.NewEncoding("0123456789abcdefghijklmnopqrstuv").WithPadding(base32.NoPadding)

// Invoke runs one call. It returns an error only for the caller's mistakes
// (an unknown tool, a bad context, identity or call id, all checked before
// anything is recorded); every failure of the tool itself is an Answer
// with IsError set, whose content the model reads.
func (g *Gateway) Invoke(ctx context.Context, call Call) (ans *Answer, err error) {
	tool, ok := g.tools.Lookup(call.Tool)
	if !ok {
		return nil, &RequestError{Code: "unknown_tool", Msg: fmt.Sprintf("no tool named %q", call.Tool), kind: ErrUnknownTool}
	}
	ctx, span := startCall(ctx, tool)
	if span != nil {
		defer func() { endCall(span, ans, err) }()
	}
	if err := CheckOrigin(&call.Origin); err != nil {
		return nil, err
	}
	if err := CheckIdentity(call.Identity); err != nil {
		return nil, err
	}
	if call.CallID == "" {
		call.CallID = NewCallID()
	} else if err := CheckCallID(call.CallID); err != nil {
		return nil, err
	}
	if tool.Target.Spec.Type == dispatch.TypeApp && call.Identity.User == "" {
		return nil, badRequest("identity_required", "tool %q runs on an app component: identity.user is required", call.Tool)
	}
	start := time.Now()
	input, inputErr := decodeInput(call.Input)
	if inputErr != nil {
		input = nil
	}
	if ok, err := g.Allowed(tool, call, input); !ok {
		msg := fmt.Sprintf("the caller may not call tool %q", call.Tool)
		if err != nil {
			g.logger.Warn("allow expression failed", zap.String("tool", call.Tool), zap.Error(err))
			msg += " (the policy could not be evaluated)"
		}
		return nil, g.refused(tool, call, observe.RefusedPolicy, &RequestError{Code: "forbidden", Msg: msg, kind: ErrForbidden})
	}
	if err := g.admitClientCall(ctx, tool, call); err != nil {
		return nil, g.refused(tool, call, observe.RefusedLimits, err)
	}
	off := !g.ledger.Records()
	digest := ""
	if !off {
		// Off keeps no call to compare a repeat's input with.
		digest = inputDigest(call.Input, input, inputErr)
	}
	now := g.clock.Now()
	state, limit := ledger.Running, g.inFlightLimit()
	if tool.Target.Spec.Type == dispatch.TypeClient && call.Origin.Source == SourceThread {
		state, limit = ledger.AwaitingClient, g.clientWait+InFlightMargin
	}
	rec := &ledger.Call{
		Key: ledger.Key(call.Identity.User, call.Identity.Install, call.CallID), CallID: call.CallID, Tool: call.Tool,
		User: call.Identity.User, Install: call.Identity.Install, Source: call.Origin.Source, ThreadID: call.Origin.ThreadID,
		Digest: digest, State: state, Owner: g.instance, Deadline: now.Add(limit),
		Created: now, Updated: now,
	}
	existing, created, err := g.ledger.Create(ctx, rec)
	if err != nil {
		return nil, g.unavailable(err)
	}
	if !created {
		if existing.Tool != call.Tool || existing.Digest != digest {
			return nil, &RequestError{Code: "idempotency_key_reuse", kind: ErrReuse,
				Msg: fmt.Sprintf("call id %q was used for another call (another tool or input); use a new call id", call.CallID)}
		}
		ans, err := g.settle(ctx, existing)
		if err == nil {
			g.logRepeat(tool, existing, ans, start)
		}
		return ans, err
	}

	// A recorded call runs to its end even if its caller goes away (its
	// target may already be running it): a repeat then gets the result,
	// not "cancelled" for a call that ran. The upstream timeout bounds it.
	// With the ledger off there is no repeat, and the call ends with its
	// caller. A client tool call is the bridge's to end (runInPage), so
	// execute gets the caller's own context too.
	runCtx := ctx
	if !off {
		runCtx = context.WithoutCancel(ctx)
	}
	out := g.execute(runCtx, ctx, tool, call, input, inputErr)
	if out.card != nil && off {
		// A card pauses its call in the ledger, which keeps nothing.
		out = outcome{res: result.Failure("the handler answered an action-required card, but cards need the call ledger (ledger off)"), upstream: out.upstream}
	}
	g.logCall(tool, call, out, start)
	if out.card != nil {
		g.obs.Card(observe.CardOpened)
		rec.State, rec.Card = ledger.ActionRequired, jsontext.Value(out.card)
	} else {
		rec.State, rec.Result = ledger.Done, &out.res
	}
	rec.Updated = g.clock.Now()
	g.record(runCtx, rec, state)
	return answerOf(rec), nil
}

// recordRetry bounds the pause between tries to record a finished call
// while the ledger is unavailable.
const recordRetry = time.Second

// record writes a call that ran, even if the caller went away: a repeat must
// find it, so ctx is one the caller's going away does not cancel
// (context.WithoutCancel; ledger.Off, which writes nothing, takes any). While the ledger is unavailable (Redis restarting) it tries again
// in the background until the call's deadline, so that a repeat, which waits
// for the call meanwhile, gets its result rather than "outcome unknown".
func (g *Gateway) record(ctx context.Context, c *ledger.Call, from ledger.State) {
	_, err := g.ledger.Update(ctx, c, from)
	if err == nil {
		return
	}
	fields := []zap.Field{zap.String("tool", c.Tool), zap.String("call_id", c.CallID)}
	if !errors.Is(err, ledger.ErrUnavailable) {
		g.logger.Error("recording a finished call", append(fields, zap.Error(err))...)
		return
	}
	g.logger.Warn("recording a finished call: the ledger is unavailable; trying again until the call's deadline",
		append(fields, zap.Time("deadline", c.Deadline), zap.Error(err))...)
	done := *c
	go func() {
		var cur *ledger.Call
		pause := recordRetry / 10
		for g.clock.Now().Add(pause).Before(done.Deadline) {
			time.Sleep(pause)
			cur, err = g.ledger.Update(ctx, &done, from)
			if !errors.Is(err, ledger.ErrUnavailable) {
				break
			}
			pause = min(2*pause, recordRetry)
		}
		switch {
		case err == nil:
			g.logger.Info("recorded a finished call after the ledger returned", fields...)
		case errors.Is(err, ledger.ErrConflict) && cur != nil && cur.State == done.State && cur.Result != nil && done.Result != nil && *cur.Result == *done.Result:
			// An earlier try was written, though its reply was lost.
		case errors.Is(err, ledger.ErrConflict):
			// A waiter closed it as outcome unknown at its deadline: the
			// first outcome recorded stands.
			g.logger.Error("recording a finished call: it was closed as outcome unknown first", fields...)
		default:
			g.logger.Error("recording a finished call: giving up at its deadline", append(fields, zap.Error(err))...)
		}
	}()
}

// admitClientCall turns away a new client tool call over a pages limit
// (pending calls per thread, per user, or in all) before anything is
// recorded, so that the same call id may be tried again later. A repeat of
// a call already recorded is answered as usual, waiting or recorded.
func (g *Gateway) admitClientCall(ctx context.Context, tool *manifest.Compiled, call Call) error {
	if tool.Target.Spec.Type != dispatch.TypeClient || call.Origin.Source != SourceThread {
		return nil
	}
	err := g.bridge.Admit(clientThread(call))
	if err == nil {
		return nil
	}
	if _, gerr := g.ledger.Get(ctx, ledger.Key(call.Identity.User, call.Identity.Install, call.CallID)); gerr == nil {
		return nil
	}
	return &RequestError{Code: "too_many_client_calls", kind: ErrTooMany,
		Msg: fmt.Sprintf("client tool %s: %v; try again later", tool.Target.Spec.Name, err)}
}

// InFlightMargin is added to a call's time limit (the upstream timeout, or
// the client tool timeout) to form its deadline in the ledger, after which
// a waiter gives it up as "outcome unknown": room for the answer to be
// recorded once the limit cut the call short.
const InFlightMargin = 15 * time.Second

// inFlightLimit is how long a call may stay in flight before a waiter
// gives it up as "outcome unknown": the upstream timeout and a margin.
func (g *Gateway) inFlightLimit() time.Duration {
	return g.client.Timeout() + InFlightMargin
}

// outcome is what running a tool gave: a result, or a card.
type outcome struct {
	res  result.Result
	card json.RawMessage
	// upstream is the target's HTTP status; 0 when none answered.
	upstream int
}

// execute validates the input and runs the tool's target. ctx runs it;
// caller is the caller's request, which only a client tool call heeds.
func (g *Gateway) execute(ctx, caller context.Context, tool *manifest.Compiled, call Call, input any, inputErr error) outcome {
	if inputErr != nil {
		return outcome{res: result.Failure("invalid input: %v", inputErr)}
	}
	if err := tool.ValidateInput(input); err != nil {
		return outcome{res: result.Failure("%v", err)}
	}
	if tool.Target.Spec.Type == dispatch.TypeClient {
		return outcome{res: g.runInPage(caller, tool, call)}
	}
	resp, res, isCard := g.send(ctx, tool.Target, input, call)
	if resp == nil {
		return outcome{res: res}
	}
	if !isCard {
		return outcome{res: res, upstream: resp.Status}
	}
	if tool.Target.Spec.Type != dispatch.TypeApp {
		return outcome{res: result.Failure("the target answered an action-required card: %v", result.ErrCardNotFromApp), upstream: resp.Status}
	}
	if call.Origin.Source != SourceThread {
		return outcome{res: result.Failure("the handler answered an action-required card to an api call; a handler must answer a domain error when no person is in the conversation"), upstream: resp.Status}
	}
	card, err := checkCard(tool.Target.Component, resp.Body)
	if err != nil {
		return outcome{res: result.Failure("the handler answered an %v", err), upstream: resp.Status}
	}
	return outcome{res: res, card: card, upstream: resp.Status}
}

// clientThread is whose pages see a client tool call: its user's thread
// in its installation.
func clientThread(call Call) clienttools.Thread {
	return clienttools.Thread{User: call.Identity.User, Install: call.Identity.Install, ID: call.Origin.ThreadID}
}

// runInPage offers a client tool call to the pages of its thread and waits
// for one to answer, at most the client tool timeout. ctx is the caller's:
// when the caller goes away while no page of the thread is streaming, the
// call is dropped and frees its place (its result says so); while one is,
// the wait goes on and the page's answer is still recorded.
func (g *Gateway) runInPage(ctx context.Context, tool *manifest.Compiled, call Call) result.Result {
	if call.Origin.Source != SourceThread {
		return result.Failure("client tools need a thread")
	}
	input := json.RawMessage("{}")
	if len(bytes.TrimSpace(call.Input)) > 0 {
		var buf bytes.Buffer
		if err := json.Compact(&buf, call.Input); err == nil {
			input = buf.Bytes()
		}
	}
	offer := clienttools.Offer{CallID: call.CallID, Name: tool.Target.Spec.Name, Input: jsontext.Value(input), Traceparent: tracing.Traceparent(ctx)}
	g.obs.ClientTool(observe.ClientOffered, 0)
	offered := time.Now()
	out, err := g.bridge.Run(ctx, clientThread(call), offer, g.clientWait)
	switch {
	case errors.Is(err, clienttools.ErrTimeout):
		g.obs.ClientTool(observe.ClientTimedOut, time.Since(offered))
		return result.Failure("client tool timed out")
	case errors.Is(err, clienttools.ErrCallerGone):
		g.obs.ClientTool(observe.ClientDropped, time.Since(offered))
		return result.Failure("client tool %s was not run: %v", tool.Target.Spec.Name, err)
	case err != nil:
		return result.Failure("client tool %s: %v", tool.Target.Spec.Name, err)
	}
	g.obs.ClientTool(observe.ClientAnswered, time.Since(offered))
	// A page's value is text for the model, even one shaped like a card:
	// it is never read as a card, so nothing pauses on it.
	return out.ToolResult()
}

// Allowed evaluates the tool's allow policy for a call; input may be nil.
// A policy that fails to evaluate denies.
func (g *Gateway) Allowed(tool *manifest.Compiled, call Call, input any) (bool, error) {
	if tool.Policy == nil {
		return true, nil
	}
	in, err := tool.Policy.Input(input)
	if err != nil {
		return false, err
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
		Context: policy.Context{Source: call.Origin.Source, ThreadID: call.Origin.ThreadID},
		Input:   in,
	})
}

// Visible returns the tools the caller may call, for the tool list. The
// input is not known yet: a policy that needs it and fails without it
// keeps its tool listed, and is enforced when the call comes.
func (g *Gateway) Visible(call Call) []*manifest.Compiled {
	if call.Origin.Source == "" {
		call.Origin.Source = SourceAPI
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
	_, res, _ := g.send(ctx, t, input, call)
	return res
}

// send is Dispatch that also returns the raw answer, when there is one,
// and whether it is an action-required card.
func (g *Gateway) send(ctx context.Context, t *dispatch.Target, input any, call Call) (*dispatch.Response, result.Result, bool) {
	if t.Spec.Type == dispatch.TypeClient {
		return nil, result.Failure("client tool %s runs in the user's page, not over HTTP", t.Spec.Name), false
	}
	ctx, cancel := g.client.WithTimeout(ctx)
	defer cancel()
	req, err := t.Request(ctx, input)
	if err != nil {
		return nil, result.Failure("the call could not be built: %v", err), false
	}
	if t.Spec.Type == dispatch.TypeApp {
		auth, err := g.issuer.Authorization(call.Identity.User, call.Identity.Install, t.Component.Name)
		if err != nil {
			g.logger.Error("signing identity token", zap.Error(err))
			return nil, result.Failure("the gateway could not sign the identity token"), false
		}
		// The three values share one array (Header.Set makes a slice for
		// each); each slice's capacity is its length, so that an append to
		// one copies it rather than overwriting the next.
		v := []string{auth, contextHeader(call.Origin), identity.IdempotencyKey(call.Identity.User, call.Identity.Install, call.CallID)}
		req.Header["Authorization"] = v[0:1:1]
		req.Header["Kazzle-Tool-Context"] = v[1:2:2]
		req.Header["Idempotency-Key"] = v[2:3:3]
	}
	sent := time.Now()
	resp, err := g.client.Do(req)
	g.obs.Upstream(call.Tool, time.Since(sent))
	if err != nil {
		return nil, result.Failure("%s %s failed: %v", t.Spec.Method, describe(t), err), false
	}
	if resp.Status < 200 || resp.Status > 299 {
		g.logFailure(call, t, resp)
	}
	if t.Mapping != nil {
		return resp, g.checkEmbed(t, t.Mapping.Apply(resp.Status, resp.Header, resp.Body)), false
	}
	res, isCard := result.NormalizeOrCard(resp.Status, resp.Header.Get("Content-Type"), resp.Body)
	return resp, g.checkEmbed(t, res), isCard
}

// maxLoggedBody bounds what the log keeps of a failing answer's body.
const maxLoggedBody = 4 << 10

// logFailure keeps a failing answer's body in the log: the model reads
// only its first line or its page's text, at most 200 characters
// (result.ErrorText), and whoever runs the gateway may need the rest, such
// as the stack trace.
func (g *Gateway) logFailure(call Call, t *dispatch.Target, resp *dispatch.Response) {
	ce := g.logger.Check(zapcore.InfoLevel, "upstream answered an error")
	if ce == nil {
		return
	}
	body := resp.Body[:min(len(resp.Body), maxLoggedBody)]
	ce.Write(zap.String("tool", call.Tool), zap.String("call_id", call.CallID), zap.String("target", describe(t)),
		zap.Int("status", resp.Status), zap.String("content_type", resp.Header.Get("Content-Type")),
		zap.ByteString("body", body), zap.Bool("body_truncated", len(body) < len(resp.Body)))
}

// EmbedOrigins are the origins besides the components' whose pages may
// be shown as embeds (Config.EmbedOrigins): a url target's, and the MCP
// Apps view's frameDomains.
func (g *Gateway) EmbedOrigins() []string { return g.embedList }

// checkEmbed refuses a url target's embedUrl on an origin that is not in
// embed_origins: the card frames it on the app's page, and a url target's
// answer is not the app's to vouch for (an app target's is: its
// component is the app's own).
func (g *Gateway) checkEmbed(t *dispatch.Target, res result.Result) result.Result {
	if res.EmbedURL == "" || t.Spec.Type != dispatch.TypeURL {
		return res
	}
	if o := result.OriginOf(res.EmbedURL); !g.embeds[o] {
		return result.Failure("%s %s answered an embedUrl on %s, which is not one of embed_origins: the embed was dropped", t.Spec.Method, describe(t), o)
	}
	return res
}

// describe names a target without its resolved values, which may be secret.
func describe(t *dispatch.Target) string {
	if t.Spec.Type == dispatch.TypeApp {
		return t.Spec.Component + " " + t.Spec.Path
	}
	return t.Spec.URL
}

// contextOptions escape <, > and & and U+2028/9 as encoding/json did:
// components get the Kazzle-Tool-Context text they got before json v2.
var contextOptions = jsonv2.JoinOptions(jsontext.EscapeForHTML(true), jsontext.EscapeForJS(true))

// apiContext is the Kazzle-Tool-Context of every API call, encoded once.
var apiContext = func() string {
	b, _ := jsonv2.Marshal(&Origin{Source: SourceAPI}, contextOptions)
	return string(b)
}()

// contextHeader is the Kazzle-Tool-Context header of a call from c, which
// CheckOrigin checked.
func contextHeader(c Origin) string {
	if c.Source == SourceAPI {
		return apiContext
	}
	// Only invalid UTF-8 could fail, and a thread id is valid UTF-8.
	b, _ := jsonv2.Marshal(&c, contextOptions)
	return string(b)
}

// Told returns what a caller may be told of an error of Invoke, Status or
// Resume, and whether the error belongs in the log. A caller's mistake (a
// RequestError) is told as it is. Any other error may name the ledger's
// file, a key or a user: the caller is told only that the gateway failed,
// and the error is logged, unless the caller went away (context.Canceled).
func Told(err error) (msg string, logIt bool) {
	var re *RequestError
	if errors.As(err, &re) {
		return err.Error(), false
	}
	return "the gateway failed to answer; the error is in its log", !errors.Is(err, context.Canceled)
}
