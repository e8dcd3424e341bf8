// Package gateway is the Caddy-free core of toolgate: the one invoke path
// (find the tool, validate the input, build and send the request, normalize
// the answer) that every front end calls.
//
// Its files go by concern: wire.go holds the types callers pass and get
// (Call, Origin, Identity, Answer and its JSON), errors.go what a caller is
// told, admit.go what is checked before a call is recorded, execute.go and
// send.go how a call runs (the dispatch.Executor its target's kind runs
// through), record.go how its end is written to the ledger, calls.go the
// recorded calls (status, cards and their answers).
package gateway

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/toolgate/toolgate/internal/clienttools"
	"github.com/toolgate/toolgate/internal/clock"
	"github.com/toolgate/toolgate/internal/connect"
	"github.com/toolgate/toolgate/internal/identity"
	"github.com/toolgate/toolgate/internal/ledger"
	"github.com/toolgate/toolgate/internal/manifest"
	"github.com/toolgate/toolgate/internal/observe"
	"github.com/toolgate/toolgate/internal/outbound"
	"github.com/toolgate/toolgate/internal/quota"
	"github.com/toolgate/toolgate/internal/result"
)

// Config is what a Gateway serves with.
type Config struct {
	// Tools are the tools served. A card's buttons run on the component of
	// the tool whose handler answered it, never on another.
	Tools  *manifest.Set
	Issuer *identity.Issuer
	Client *outbound.Client
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
	// Limits are quotas over all tools together, beside each tool's own.
	Limits []quota.Rule
	// Audit, when set, is told every call's life (the audit trail);
	// AuditInputs adds each call's input to its entries.
	Audit       Auditor
	AuditInputs bool
	// Connections hand out the users' tokens of the connections targets
	// send; nil when the config declares none.
	Connections *connect.Manager
}

// Gateway serves one set of tools.
type Gateway struct {
	tools       atomic.Pointer[manifest.Set]
	toolsMu     sync.Mutex // orders SetTools and its listeners
	onTools     []func(*manifest.Set)
	issuer      *identity.Issuer
	client      *outbound.Client
	ledger      ledger.Ledger
	logger      *zap.Logger
	instance    string
	bridge      *clienttools.Bridge
	clientWait  time.Duration
	clock       clock.Clock
	obs         observe.Observer
	embeds      map[string]bool // EmbedOrigins
	embedList   []string        // EmbedOrigins, in their order
	allLimits   []quota.Rule
	auditor     Auditor
	auditInputs bool
	conns       *connect.Manager

	// closing is done once Close is called; retries are the goroutines
	// record started, which it ends. mu orders a retry's start after
	// Close (closed) against Close's wait.
	closing   context.Context
	close     context.CancelFunc
	mu        sync.Mutex
	closed    bool
	retries   sync.WaitGroup
	closeWait time.Duration
}

// New returns a gateway.
func New(c Config) *Gateway {
	g := &Gateway{
		issuer: c.Issuer, client: c.Client,
		ledger: c.Ledger, logger: c.Logger, instance: c.Instance, clock: clock.Or(c.Clock),
		bridge: c.Bridge, clientWait: c.ClientTimeout, obs: observe.Or(c.Observer),
		embeds: make(map[string]bool, len(c.EmbedOrigins)), embedList: slices.Clone(c.EmbedOrigins),
		closeWait: closeWait,
		allLimits: c.Limits, auditor: c.Audit, auditInputs: c.AuditInputs, conns: c.Connections,
	}
	g.closing, g.close = context.WithCancel(context.Background())
	g.tools.Store(c.Tools)
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
		g.instance = g.newCallID()[len("call_"):]
	}
	return g
}

// Tools returns the tool set.
func (g *Gateway) Tools() *manifest.Set { return g.tools.Load() }

// SetTools replaces the tools served (an upstream MCP server's list
// changed) and tells those who asked (OnToolsChange). A call already
// admitted runs with the tool it was admitted with.
func (g *Gateway) SetTools(set *manifest.Set) {
	g.toolsMu.Lock()
	defer g.toolsMu.Unlock()
	g.tools.Store(set)
	for _, f := range g.onTools {
		f(set)
	}
}

// OnToolsChange calls f with the new tools each time SetTools replaces
// them, in the order of the changes.
func (g *Gateway) OnToolsChange(f func(*manifest.Set)) {
	g.toolsMu.Lock()
	defer g.toolsMu.Unlock()
	g.onTools = append(g.onTools, f)
}

// SpendOnce marks a one-time token id used until it expires, in the
// gateway's ledger (ledger.Ledger's Spend): it reports whether it was
// unused. A front end's own continuations (MCP request state) are spent
// here, so that one is usable once across instances and restarts.
func (g *Gateway) SpendOnce(ctx context.Context, id string, until time.Time) (bool, error) {
	return g.ledger.Spend(ctx, id, until)
}

// closeWait bounds how long Close waits for the retries it stops.
const closeWait = 5 * time.Second

// Close stops the gateway's background work: no retry to record a call
// starts after it, and those running stop their next try and end. It waits
// for them at most closeWait, so that a retry cannot write to a ledger its
// owner releases after Close returns; past that it says so. Calls may still
// be served while it runs; a call that ends after it is recorded at once or
// not at all. Close may be called more than once.
func (g *Gateway) Close() error {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	g.close()
	done := make(chan struct{})
	go func() {
		g.retries.Wait()
		close(done)
	}()
	timer := time.NewTimer(g.closeWait)
	defer timer.Stop()
	select {
	case <-done:
		return nil
	case <-timer.C:
		return errors.New("gateway: retries to record calls did not end in time")
	}
}

// newCallID is NewCallID on the gateway's clock.
func (g *Gateway) newCallID() string { return newCallID(g.clock.Now()) }

// Invoke runs one call. It returns an error only for the caller's mistakes
// (an unknown tool, a bad context, identity or call id, all checked before
// anything is recorded); every failure of the tool itself is an Answer
// with IsError set, whose content the model reads.
func (g *Gateway) Invoke(ctx context.Context, call Call) (ans *Answer, err error) {
	tool, ok := g.Tools().Lookup(call.Tool)
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
		call.CallID = g.newCallID()
	} else if err := CheckCallID(call.CallID); err != nil {
		return nil, err
	}
	kind := tool.Target.Kind()
	if tool.Target.NeedsUser() && call.Identity.User == "" {
		return nil, badRequest("identity_required", "tool %q is sent the user's identity (%s): identity.user is required", call.Tool, tool.Target.Describe())
	}
	start := g.clock.Now()
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
		g.auditRefusal(tool, call, "forbidden", "")
		return nil, g.refused(tool, call, observe.RefusedPolicy, &RequestError{Code: "forbidden", Msg: msg, kind: ErrForbidden})
	}
	if err := g.admitClientCall(ctx, tool, call); err != nil {
		return nil, g.refused(tool, call, observe.RefusedLimits, err)
	}
	off := !g.ledger.Records()
	// An approval is asked in a thread, and waits in the ledger: without
	// either, nothing is recorded, counted or sent.
	approval := g.needsApproval(tool, call, input)
	switch {
	case approval && call.Origin.Source != SourceThread:
		return g.cannotAsk(tool, call, "this call has no thread to ask in (its source is api): call it from a conversation"), nil
	case approval && off:
		return g.cannotAsk(tool, call, "approvals wait in the call ledger, which is off"), nil
	}
	digest := ""
	if !off {
		// Off keeps no call to compare a repeat's input with.
		digest = inputDigest(call.Input, input, inputErr)
	}
	now := g.clock.Now()
	state, limit := ledger.Running, g.inFlightLimit()
	if kind.InPage() && call.Origin.Source == SourceThread {
		state, limit = ledger.AwaitingClient, g.clientWait+InFlightMargin
	}
	rec := &ledger.Call{
		Key: ledger.Key(call.Identity.User, call.Identity.Install, call.CallID), CallID: call.CallID, Tool: call.Tool,
		User: call.Identity.User, Install: call.Identity.Install, Source: call.Origin.Source, ThreadID: call.Origin.ThreadID,
		Digest: digest, State: state, Owner: g.instance, Deadline: now.Add(limit),
		Created: now, Updated: now, Limits: g.limits(tool, call),
	}
	existing, created, err := g.ledger.Create(ctx, rec)
	if over := (*ledger.OverLimitError)(nil); errors.As(err, &over) {
		return nil, g.overLimit(tool, call, over)
	}
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
	if approval {
		return g.askApproval(runCtx, tool, call, input, inputErr, rec, state, start), nil
	}
	out := g.execute(runCtx, ctx, tool, call, input, inputErr)
	if out.card != nil && off {
		// A card pauses its call in the ledger, which keeps nothing.
		out = outcome{res: result.Failure("the handler answered an action-required card, but cards need the call ledger (ledger off)"), upstream: out.upstream}
	}
	g.logCall(tool, call, out, start)
	if out.card != nil {
		g.obs.Card(observe.CardOpened)
		rec.State, rec.Card, rec.Connect = ledger.ActionRequired, out.card, out.connect
	} else {
		rec.State, rec.Result = ledger.Done, &out.res
	}
	rec.Updated = g.clock.Now()
	g.record(runCtx, rec, state)
	g.auditCall(tool, call, out, start)
	return answerOf(rec), nil
}
