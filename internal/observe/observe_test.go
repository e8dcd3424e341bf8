package observe

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/toolgate/toolgate/internal/ledger"
)

// A reload makes a new registry while the old config still serves: the
// same collectors register on both, twice on one is no error, and the
// counts go on from where they were.
func TestRegisterAcrossReloads(t *testing.T) {
	c := NewCollectors()
	tools := []Tool{{Name: "save", TargetType: "app"}}
	first := prometheus.NewPedanticRegistry()
	if err := c.Register(first); err != nil {
		t.Fatal(err)
	}
	if err := c.Register(first); err != nil {
		t.Fatalf("registering again on the same registry: %v", err)
	}
	c.Observer("bolt", tools).Call(Call{Tool: "save", TargetType: "app", Outcome: OutcomeDone, Duration: time.Millisecond})

	second := prometheus.NewPedanticRegistry()
	if err := c.Register(second); err != nil {
		t.Fatalf("registering on the reload's registry: %v", err)
	}
	c.Observer("bolt", tools).Call(Call{Tool: "save", TargetType: "app", Outcome: OutcomeDone, Duration: time.Millisecond})

	want := `
# HELP caddy_toolgate_calls_total Tool calls run, by tool, target type and outcome (done, error, action_required, refused).
# TYPE caddy_toolgate_calls_total counter
caddy_toolgate_calls_total{outcome="action_required",target_type="app",tool="save"} 0
caddy_toolgate_calls_total{outcome="done",target_type="app",tool="save"} 2
caddy_toolgate_calls_total{outcome="error",target_type="app",tool="save"} 0
caddy_toolgate_calls_total{outcome="refused",target_type="app",tool="save"} 0
`
	if err := testutil.GatherAndCompare(second, strings.NewReader(want), "caddy_toolgate_calls_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(c.callDuration); n != 1 {
		t.Errorf("%d duration series, want 1", n)
	}
}

// Another collector under one of toolgate's names is a real conflict.
func TestRegisterConflict(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "caddy_toolgate_mcp_calls_total", Help: "another"}))
	if err := NewCollectors().Register(reg); err == nil {
		t.Fatal("registered over another collector")
	}
}

// A tool the config does not declare never becomes a label, nor does an
// unknown reason, event or operation.
func TestLabelsStayBounded(t *testing.T) {
	c := NewCollectors()
	reg := prometheus.NewPedanticRegistry()
	if err := c.Register(reg); err != nil {
		t.Fatal(err)
	}
	m := c.Observer("bolt", []Tool{{Name: "save", TargetType: "app"}})
	before, err := testutil.GatherAndCount(reg)
	if err != nil {
		t.Fatal(err)
	}
	const bogus = "u_1@example.com"
	m.Call(Call{Tool: bogus, Outcome: OutcomeDone})
	m.Upstream(bogus, time.Second)
	m.Refused(bogus)
	m.Card(bogus)
	m.ClientTool(bogus, 0)
	m.LedgerOp(bogus, OpGet, ResultOK)
	m.LedgerOp("bolt", bogus, ResultOK)
	m.Approval(bogus, ApprovalAsked)
	m.Approval("save", bogus)
	m.OverLimit(bogus)
	after, err := testutil.GatherAndCount(reg)
	if err != nil {
		t.Fatal(err)
	}
	if after != before {
		t.Errorf("%d series after unknown labels, %d before", after, before)
	}
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if strings.Contains(mf.String(), bogus) {
			t.Errorf("%s holds %q", mf.GetName(), bogus)
		}
	}
}

// TestApprovalsAndQuotas: a tool with an approval rule has its five
// series from the start; a quota refusal counts by tool, also for a tool
// refused by a limit over all tools, whose series comes with it.
func TestApprovalsAndQuotas(t *testing.T) {
	c := NewCollectors()
	reg := prometheus.NewPedanticRegistry()
	if err := c.Register(reg); err != nil {
		t.Fatal(err)
	}
	m := c.Observer("bolt", []Tool{{Name: "pay", TargetType: "url", Approval: true, Limited: true}, {Name: "save", TargetType: "app"}})
	for _, e := range []string{ApprovalAsked, ApprovalAsked, ApprovalChanged, ApprovalTimedOut} {
		m.Approval("pay", e)
	}
	m.Approval("save", ApprovalAsked) // no rule: no series
	m.OverLimit("pay")
	m.OverLimit("save")
	m.OverLimit("save")
	for _, tc := range []struct {
		name, tool, event string
		want              float64
	}{
		{"approvals_total", "pay", ApprovalAsked, 2},
		{"approvals_total", "pay", ApprovalChanged, 1},
		{"approvals_total", "pay", ApprovalApproved, 0},
		{"approvals_total", "pay", ApprovalTimedOut, 1},
		{"quota_refusals_total", "pay", "", 1},
		{"quota_refusals_total", "save", "", 2},
	} {
		var got float64
		if tc.event != "" {
			got = testutil.ToFloat64(c.approvals.WithLabelValues(tc.tool, tc.event))
		} else {
			got = testutil.ToFloat64(c.overLimit.WithLabelValues(tc.tool))
		}
		if got != tc.want {
			t.Errorf("%s{%s,%s} = %v, want %v", tc.name, tc.tool, tc.event, got, tc.want)
		}
	}
	if n := testutil.CollectAndCount(c.approvals); n != 5 {
		t.Errorf("approvals_total has %d series, want pay's five", n)
	}
}

// faultLedger fails every operation as configured.
type faultLedger struct {
	ledger.Ledger
	err error
}

func (f faultLedger) Create(context.Context, *ledger.Call) (*ledger.Call, bool, error) {
	return nil, false, f.err
}
func (f faultLedger) Get(context.Context, string) (*ledger.Call, error) { return nil, f.err }
func (faultLedger) Records() bool                                       { return true }
func (f faultLedger) Wait(ctx context.Context, _ string, _ ledger.State) (*ledger.Call, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func TestObservedLedger(t *testing.T) {
	c := NewCollectors()
	m := c.Observer("redis", nil)
	if l := ObservedLedger(ledger.Off, "off", m); l.Records() {
		t.Error("ledger.Off, observed, records")
	}
	down := ObservedLedger(faultLedger{err: ledger.ErrUnavailable}, "redis", m)
	_, _, _ = down.Create(context.Background(), &ledger.Call{})
	_, _ = down.Get(context.Background(), "k")
	missing := ObservedLedger(faultLedger{err: ledger.ErrNotFound}, "redis", m)
	_, _ = missing.Get(context.Background(), "k")
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	_, _ = missing.Wait(ctx, "k", ledger.Running)

	for _, w := range []struct {
		op, result string
		n          float64
	}{
		{OpCreate, ResultUnavailable, 1}, {OpGet, ResultUnavailable, 1},
		{OpGet, ResultNotFound, 1}, {OpWait, ResultTimeout, 1}, {OpCreate, ResultOK, 0},
	} {
		if got := testutil.ToFloat64(c.ledgerOps.WithLabelValues("redis", w.op, w.result)); got != w.n {
			t.Errorf("%s %s: %v, want %v", w.op, w.result, got, w.n)
		}
	}
	// Not found and a wait's end are answers, not failures.
	if got := testutil.ToFloat64(c.ledgerErrors.WithLabelValues("redis")); got != 2 {
		t.Errorf("ledger errors %v, want 2", got)
	}
}

// The call line has its fields and nothing else.
func TestLogCall(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	LogCall(zap.New(core), Call{CallID: "call_1", Tool: "save", TargetType: "app", Status: "done",
		Duration: 3 * time.Millisecond, UpstreamStatus: 200, Ledger: LedgerNew})
	all := logs.All()
	if len(all) != 1 || all[0].Message != "tool call" || all[0].Level != zap.InfoLevel {
		t.Fatalf("lines %+v", all)
	}
	got := all[0].ContextMap()
	want := map[string]any{"call_id": "call_1", "tool": "save", "target_type": "app", "status": "done",
		"is_error": false, "duration": 3 * time.Millisecond, "upstream_status": int64(200), "ledger": "new"}
	if len(got) != len(want) {
		t.Errorf("fields %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v (%T), want %v", k, got[k], got[k], v)
		}
	}
}

// TestConnectionEvents: connection_events_total counts by connection and
// event.
func TestConnectionEvents(t *testing.T) {
	c := NewCollectors()
	reg := prometheus.NewPedanticRegistry()
	if err := c.Register(reg); err != nil {
		t.Fatal(err)
	}
	m := c.Observer("bolt", nil)
	for _, e := range []string{ConnectionAsked, ConnectionMade, ConnectionRefreshed, ConnectionRefreshed} {
		m.Connection("gmail", e)
	}
	m.Connection("cal", ConnectionDropped)
	for _, tc := range []struct {
		conn, event string
		want        float64
	}{
		{"gmail", ConnectionAsked, 1}, {"gmail", ConnectionMade, 1}, {"gmail", ConnectionRefreshed, 2},
		{"gmail", ConnectionDropped, 0}, {"cal", ConnectionDropped, 1},
	} {
		if got := testutil.ToFloat64(c.connections.WithLabelValues(tc.conn, tc.event)); got != tc.want {
			t.Errorf("connection_events_total{%s,%s} = %v, want %v", tc.conn, tc.event, got, tc.want)
		}
	}
	if _, err := reg.Gather(); err != nil {
		t.Fatal(err)
	}
}
