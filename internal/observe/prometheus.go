package observe

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

const namespace = "caddy_toolgate"

// durationBuckets suit calls from a millisecond (an app on loopback) to
// the 30s upstream timeout and the 120s client tool timeout.
var durationBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120}

// Collectors are toolgate's metrics. One set lives as long as the process
// and is registered on each config's registry: Caddy makes a new registry
// per config load, and a reload must not start the counters over.
type Collectors struct {
	calls        *prometheus.CounterVec
	callDuration *prometheus.HistogramVec
	upstream     *prometheus.HistogramVec
	clientEvents *prometheus.CounterVec
	clientWait   prometheus.Histogram
	ledgerOps    *prometheus.CounterVec
	ledgerErrors *prometheus.CounterVec
	cards        *prometheus.CounterVec
	mcpSessions  prometheus.Gauge
	mcpCalls     prometheus.Counter
	refusals     *prometheus.CounterVec
	mcpUp        *prometheus.GaugeVec
	mcpConnects  *prometheus.CounterVec
	approvals    *prometheus.CounterVec
	overLimit    *prometheus.CounterVec
	connections  *prometheus.CounterVec
}

// NewCollectors makes toolgate's metrics, registered nowhere yet.
func NewCollectors() *Collectors {
	return &Collectors{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "calls_total",
			Help: "Tool calls run, by tool, target type and outcome (done, error, action_required, refused).",
		}, []string{"tool", "target_type", "outcome"}),
		callDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Name: "call_duration_seconds",
			Help: "Duration of tool calls run, input checks to answer.", Buckets: durationBuckets,
		}, []string{"tool"}),
		upstream: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Name: "upstream_duration_seconds",
			Help: "Duration of requests to tool targets, answer read.", Buckets: durationBuckets,
		}, []string{"tool"}),
		clientEvents: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "client_tool_events_total",
			Help: "Client tool calls offered to pages, claimed, answered, timed out, and dropped when their caller went away with no page open.",
		}, []string{"event"}),
		clientWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: namespace, Name: "client_tool_wait_seconds",
			Help: "Time from offering a client tool call to its answer or timeout.", Buckets: durationBuckets,
		}),
		ledgerOps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "ledger_operations_total",
			Help: "Call ledger operations, by backend, operation and result.",
		}, []string{"backend", "op", "result"}),
		ledgerErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "ledger_errors_total",
			Help: "Call ledger operations that failed (unavailable or broken), by backend.",
		}, []string{"backend"}),
		cards: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "cards_total",
			Help: "Action-required cards opened, and answered by button, skip or cancel.",
		}, []string{"event"}),
		mcpSessions: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: namespace, Name: "mcp_sessions",
			Help: "MCP sessions open.",
		}),
		mcpCalls: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Name: "mcp_calls_total",
			Help: "MCP tools/call requests.",
		}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "refusals_total",
			Help: "Requests refused, by reason (auth, policy, loopback, limits, quota).",
		}, []string{"reason"}),
		mcpUp: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace, Name: "mcp_server_up",
			Help: "Whether the gateway has a session with the upstream MCP server (1) or not (0).",
		}, []string{"mcp_server"}),
		mcpConnects: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "mcp_server_connects_total",
			Help: "Sessions set up with the upstream MCP server: the first, and each one after a loss.",
		}, []string{"mcp_server"}),
		approvals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "approvals_total",
			Help: "Approval questions asked, and answered: approved, approved with changes (changed), rejected, or timed out.",
		}, []string{"tool", "event"}),
		overLimit: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "quota_refusals_total",
			Help: "Calls refused by a quota (limit), by tool; nothing of them was recorded or sent.",
		}, []string{"tool"}),
		connections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "connection_events_total",
			Help: "Users' connections: cards asked, connections made, denied or failed at the callback, tokens refreshed, dropped (refresh refused), exchanged, and connections removed.",
		}, []string{"connection", "event"}),
	}
}

func (c *Collectors) all() []prometheus.Collector {
	return []prometheus.Collector{
		c.calls, c.callDuration, c.upstream, c.clientEvents, c.clientWait,
		c.ledgerOps, c.ledgerErrors, c.cards, c.mcpSessions, c.mcpCalls, c.refusals,
		c.mcpUp, c.mcpConnects, c.approvals, c.overLimit, c.connections,
	}
}

// Register registers the metrics on reg. Registering them again on the
// same registry (two toolgate handlers in one config) is not an error;
// another collector of the same name is.
func (c *Collectors) Register(reg prometheus.Registerer) error {
	for _, col := range c.all() {
		err := reg.Register(col)
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) && are.ExistingCollector == col {
			continue
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// Tool is a tool as its metrics are labelled. Approval and Limited say
// whether it has an approval rule and quotas, whose series are made only
// then.
type Tool struct {
	Name, TargetType  string
	Approval, Limited bool
}

// Metrics is the Prometheus Observer of one config's tools.
type Metrics struct {
	c *Collectors
	// tools hold each tool's label children, resolved once here rather
	// than per call: WithLabelValues hashes its labels and takes a lock.
	// Track replaces the map, never changes it.
	tools     atomic.Pointer[map[string]*toolMetrics]
	trackMu   sync.Mutex
	client    map[string]prometheus.Counter
	cards     map[string]prometheus.Counter
	refusals  map[string]prometheus.Counter
	ledger    map[ledgerLabels]prometheus.Counter
	ledgerErr map[string]prometheus.Counter
}

type ledgerLabels struct{ backend, op, result string }

type toolMetrics struct {
	// outcomes are in the order of outcomeIndex.
	outcomes [4]prometheus.Counter
	duration prometheus.Observer
	upstream prometheus.Observer
	// approvals (by event, in approvalEvents' order) and overLimit are
	// nil for a tool without an approval rule or quotas.
	approvals map[string]prometheus.Counter
	overLimit prometheus.Counter
}

func outcomeIndex(outcome string) int {
	switch outcome {
	case OutcomeDone:
		return 0
	case OutcomeError:
		return 1
	case OutcomeActionRequired:
		return 2
	}
	return 3
}

// Observer returns the Observer of a config's tools and ledger backend
// (bolt, redis, or off). A tool not among them (a card of a tool no
// longer served) is not counted, so that the tool label only ever holds
// names from the config. Every series it can touch is made here, at zero:
// a rate over it then starts at the first scrape, not at the first event.
func (c *Collectors) Observer(backend string, tools []Tool) *Metrics {
	m := &Metrics{
		c:        c,
		client:   children(c.clientEvents, ClientOffered, ClientClaimed, ClientAnswered, ClientTimedOut, ClientDropped),
		cards:    children(c.cards, CardOpened, CardButton, CardSkip, CardCancel),
		refusals: children(c.refusals, RefusedAuth, RefusedPolicy, RefusedLoopback, RefusedLimits, RefusedQuota),
	}
	m.ledger = map[ledgerLabels]prometheus.Counter{}
	m.ledgerErr = map[string]prometheus.Counter{}
	if backend != "" && backend != "off" {
		for _, op := range ledgerOps {
			for _, r := range ledgerResults {
				m.ledger[ledgerLabels{backend, op, r}] = c.ledgerOps.WithLabelValues(backend, op, r)
			}
		}
		m.ledgerErr[backend] = c.ledgerErrors.WithLabelValues(backend)
	}
	m.tools.Store(&map[string]*toolMetrics{})
	m.Track(tools)
	return m
}

// MCPServer records whether the gateway has a session with the upstream
// MCP server name; each time it gets one counts as a connect.
func (m *Metrics) MCPServer(name string, up bool) {
	v := 0.0
	if up {
		v = 1
		m.c.mcpConnects.WithLabelValues(name).Inc()
	}
	m.c.mcpUp.WithLabelValues(name).Set(v)
}

// Track counts tools too from now on: tools an upstream MCP server lists
// after the config loaded. A tool it tracks already keeps its series.
func (m *Metrics) Track(tools []Tool) {
	m.trackMu.Lock()
	defer m.trackMu.Unlock()
	old := *m.tools.Load()
	next := make(map[string]*toolMetrics, len(old)+len(tools))
	for k, v := range old {
		next[k] = v
	}
	c := m.c
	for _, t := range tools {
		if _, ok := next[t.Name]; ok {
			continue
		}
		tm := &toolMetrics{
			duration: c.callDuration.WithLabelValues(t.Name),
			upstream: c.upstream.WithLabelValues(t.Name),
		}
		for i, o := range []string{OutcomeDone, OutcomeError, OutcomeActionRequired, OutcomeRefused} {
			tm.outcomes[i] = c.calls.WithLabelValues(t.Name, t.TargetType, o)
		}
		if t.Approval {
			tm.approvals = make(map[string]prometheus.Counter, len(approvalEvents))
			for _, e := range approvalEvents {
				tm.approvals[e] = c.approvals.WithLabelValues(t.Name, e)
			}
		}
		if t.Limited {
			tm.overLimit = c.overLimit.WithLabelValues(t.Name)
		}
		next[t.Name] = tm
	}
	m.tools.Store(&next)
}

func children(v *prometheus.CounterVec, values ...string) map[string]prometheus.Counter {
	m := make(map[string]prometheus.Counter, len(values))
	for _, s := range values {
		m[s] = v.WithLabelValues(s)
	}
	return m
}

// Call implements Observer. A refused call was not run: it is counted,
// but its duration is not.
func (m *Metrics) Call(c Call) {
	t := (*m.tools.Load())[c.Tool]
	if t == nil {
		return
	}
	i := outcomeIndex(c.Outcome)
	t.outcomes[i].Inc()
	if c.Outcome != OutcomeRefused {
		t.duration.Observe(c.Duration.Seconds())
	}
}

// Upstream implements Observer.
func (m *Metrics) Upstream(tool string, d time.Duration) {
	if t := (*m.tools.Load())[tool]; t != nil {
		t.upstream.Observe(d.Seconds())
	}
}

// Connection implements Observer. Connections are few, named in the
// config, and their events rare: the series is looked up each time.
func (m *Metrics) Connection(name, event string) {
	m.c.connections.WithLabelValues(name, event).Inc()
}

// Approval implements Observer.
func (m *Metrics) Approval(tool, event string) {
	if t := (*m.tools.Load())[tool]; t != nil {
		if c := t.approvals[event]; c != nil {
			c.Inc()
		}
	}
}

// OverLimit implements Observer. A tool tracked without quotas of its
// own (one the gateway's limits over all tools refused) gets its series
// now: a refusal is rare, and its labels' hash is worth it.
func (m *Metrics) OverLimit(tool string) {
	t := (*m.tools.Load())[tool]
	switch {
	case t == nil:
	case t.overLimit != nil:
		t.overLimit.Inc()
	default:
		m.c.overLimit.WithLabelValues(tool).Inc()
	}
}

// Refused implements Observer.
func (m *Metrics) Refused(reason string) {
	if c := m.refusals[reason]; c != nil {
		c.Inc()
	}
}

// ClientTool implements Observer.
func (m *Metrics) ClientTool(event string, wait time.Duration) {
	if c := m.client[event]; c != nil {
		c.Inc()
	}
	if event == ClientAnswered || event == ClientTimedOut {
		m.c.clientWait.Observe(wait.Seconds())
	}
}

// Card implements Observer.
func (m *Metrics) Card(event string) {
	if c := m.cards[event]; c != nil {
		c.Inc()
	}
}

// LedgerOp implements Observer.
func (m *Metrics) LedgerOp(backend, op, result string) {
	if c := m.ledger[ledgerLabels{backend, op, result}]; c != nil {
		c.Inc()
	}
	if result == ResultUnavailable || result == ResultError {
		if c := m.ledgerErr[backend]; c != nil {
			c.Inc()
		}
	}
}

// MCPSession implements Observer.
func (m *Metrics) MCPSession(delta int) { m.c.mcpSessions.Add(float64(delta)) }

// MCPCall implements Observer.
func (m *Metrics) MCPCall() { m.c.mcpCalls.Inc() }

var _ Observer = (*Metrics)(nil)
