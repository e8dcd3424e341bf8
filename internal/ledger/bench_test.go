package ledger_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/toolgate/toolgate/internal/clock"
	"github.com/toolgate/toolgate/internal/gateway"
	"github.com/toolgate/toolgate/internal/ledger"
	"github.com/toolgate/toolgate/internal/redistest"
	"github.com/toolgate/toolgate/internal/result"
)

// benchCall measures one call's ledger cost: Create (running), then Update
// to done with a 1 KiB result. "serial" is one connection at a time, where
// every write pays its own commit; "parallel" runs 16 goroutines per CPU
// (32 on the 2-CPU target, the connection count of the throughput budget in
// DESIGN.md), where bbolt batches writes into shared commits. Call ids are
// the gateway's, which sort by time ("time-ids"), or random like a model's
// tool call ids ("random-ids").
//
// meter, when set, is started at each measured run and returns what reports
// its figures at the end (see redisCPU).
func benchCall(b *testing.B, l ledger.Ledger, meter func(b *testing.B) func()) {
	for _, ids := range []struct {
		name string
		next func() string
	}{
		{"time-ids", gateway.NewCallID},
		{"random-ids", randomID},
	} {
		b.Run(ids.name, func(b *testing.B) { benchCallIDs(b, l, ids.next, meter) })
	}
}

// randomID is a call id as a runtime may choose it, in no order.
func randomID() string { return fmt.Sprintf("toolu_%016x%016x", rand.Uint64(), rand.Uint64()) }

// benchCallIDs measures a call's Create and Update, its ids from nextID,
// counted against limits if any.
func benchCallIDs(b *testing.B, l ledger.Ledger, nextID func() string, meter func(b *testing.B) func(), limits ...ledger.Limit) {
	if meter == nil {
		meter = func(*testing.B) func() { return func() {} }
	}
	res := &result.Result{Content: strings.Repeat("x", 1024)}
	now := time.Now()
	one := func(ctx context.Context) error {
		id := nextID()
		c := &ledger.Call{
			Key:      ledger.Key("user-1", "install-1", id),
			CallID:   id,
			Tool:     "ping",
			User:     "user-1",
			Install:  "install-1",
			Digest:   "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
			State:    ledger.Running,
			Owner:    "bench",
			Deadline: now.Add(time.Minute),
			Created:  now,
			Updated:  now,
			Limits:   limits,
		}
		if _, created, err := l.Create(ctx, c); err != nil || !created {
			return fmt.Errorf("Create %s = %v, %w", id, created, err)
		}
		d := *c
		d.State = ledger.Done
		d.Result = res
		_, err := l.Update(ctx, &d, ledger.Running)
		return err
	}

	b.Run("serial", func(b *testing.B) {
		ctx := context.Background()
		b.ReportAllocs()
		report := meter(b)
		for b.Loop() {
			if err := one(ctx); err != nil {
				b.Fatal(err)
			}
		}
		report()
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.SetParallelism(16)
		report := meter(b)
		defer report()
		b.RunParallel(func(pb *testing.PB) {
			ctx := context.Background()
			for pb.Next() {
				if err := one(ctx); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// boltSyncs are the two ways a bolt ledger commits: waiting for the disk
// (the default) or not (fsync off).
var boltSyncs = []struct {
	name    string
	noFsync bool
}{
	{"fsync-on", false},
	{"fsync-off", true},
}

func BenchmarkBoltCall(b *testing.B) {
	for _, sync := range boltSyncs {
		b.Run(sync.name, func(b *testing.B) {
			l, err := ledger.OpenBolt(filepath.Join(b.TempDir(), "ledger.db"), ledger.BoltOptions{NoFsync: sync.noFsync})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = l.Close() })
			benchCall(b, l, nil)
		})
	}
}

// BenchmarkRedisCall reports, beside ns/op, the CPU each call costs this
// process (the ledger and go-redis: "client-µs/op") and redis-server
// ("server-µs/op"). On the 2-core target the gateway, Redis, the upstream
// and the load share the cores, so CPU per call, more than latency, is
// what bounds throughput. The server is set as docs/operations.md asks an
// operator to (AOF with appendfsync everysec, maxmemory-policy noeviction),
// as bench/run.sh runs it: the AOF's writes are part of a call's cost.
func BenchmarkRedisCall(b *testing.B) {
	s := redistest.StartWith(b, "--appendonly", "yes", "--appendfsync", "everysec", "--maxmemory-policy", "noeviction")
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	l, err := ledger.OpenRedis(ctx, ledger.RedisOptions{Addr: s.Addr, Prefix: "bench:"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = l.Close() })
	benchCall(b, l, redisCPU(s.Addr))
}

// redisCPU meters the CPU time of this process and of the redis-server at
// addr (read from /proc by the pid INFO gives) over a measured run.
func redisCPU(addr string) func(b *testing.B) func() {
	return func(b *testing.B) func() {
		rdb := redis.NewClient(&redis.Options{Addr: addr})
		info, err := rdb.Info(context.Background(), "server").Result()
		_ = rdb.Close()
		if err != nil {
			b.Fatal(err)
		}
		var pid int
		for line := range strings.Lines(info) {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
				pid, _ = strconv.Atoi(v)
			}
		}
		server := func() time.Duration {
			stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
			if err != nil {
				b.Skipf("no CPU time for redis-server: %v", err)
			}
			// Fields after the command's closing parenthesis: utime
			// and stime are the 12th and 13th, in clock ticks (100 a
			// second on Linux).
			f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
			u, _ := strconv.ParseInt(f[11], 10, 64)
			s, _ := strconv.ParseInt(f[12], 10, 64)
			return time.Duration(u+s) * 10 * time.Millisecond
		}
		client := func() time.Duration {
			var ru syscall.Rusage
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
			return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		}
		s0, c0 := server(), client()
		return func() {
			n := float64(b.N)
			b.ReportMetric(float64((client()-c0).Microseconds())/n, "client-µs/op")
			b.ReportMetric(float64((server()-s0).Microseconds())/n, "server-µs/op")
		}
	}
}

// BenchmarkBoltSteadyState measures a call's Create and Update once the
// ledger holds a retention of calls and sweeps the oldest as new ones
// come ("sweeping": a 10s retention, the clock 1 ms on per call, so 10,000
// calls are kept and a sweep every 1,000 calls removes as many), beside
// the same run where nothing is old enough to sweep ("no-sweep": a 24h
// retention), each with fsync on (the default) and off. Call ids are
// random, like a model's. The file starts filled to steady state (without
// fsync, which only makes the filling slow, then opened again); the
// sweeps' own cost is in the figure, as the gateway pays it. "serial" and
// "parallel" are as in benchCall.
func BenchmarkBoltSteadyState(b *testing.B) {
	for _, tc := range []struct {
		name      string
		retention time.Duration
	}{
		{"sweeping", 10 * time.Second},
		{"no-sweep", 24 * time.Hour},
	} {
		for _, sync := range boltSyncs {
			b.Run(tc.name+"/"+sync.name, func(b *testing.B) {
				benchBoltSteadyState(b, tc.retention, sync.noFsync)
			})
		}
	}
}

func benchBoltSteadyState(b *testing.B, retention time.Duration, noFsync bool) {
	clk := clock.NewManual(time.Date(2030, 1, 2, 12, 0, 0, 0, time.UTC))
	path := filepath.Join(b.TempDir(), "ledger.db")
	open := func(noFsync bool) *ledger.Bolt {
		l, err := ledger.OpenBolt(path, ledger.BoltOptions{Retention: retention, Clock: clk, NoFsync: noFsync})
		if err != nil {
			b.Fatal(err)
		}
		return l
	}
	l := open(true)
	res := &result.Result{Content: strings.Repeat("x", 1024)}
	var n atomic.Int64
	one := func(ctx context.Context) error {
		now := clk.Add(time.Millisecond)
		if n.Add(1)%1000 == 0 {
			if _, err := l.Sweep(now); err != nil {
				return err
			}
		}
		id := fmt.Sprintf("toolu_%016x%016x", rand.Uint64(), rand.Uint64())
		c := &ledger.Call{
			Key: ledger.Key("user-1", "install-1", id), CallID: id, Tool: "ping", User: "user-1", Install: "install-1",
			Digest: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
			State:  ledger.Running, Owner: "bench", Deadline: now.Add(time.Second), Created: now, Updated: now,
		}
		if _, created, err := l.Create(ctx, c); err != nil || !created {
			return fmt.Errorf("Create %s = %v, %w", id, created, err)
		}
		d := *c
		d.State, d.Result = ledger.Done, res
		_, err := l.Update(ctx, &d, ledger.Running)
		return err
	}
	// Fill a retention and a half of the short one: the sweeping ledger
	// is at its steady size.
	for range 15_000 {
		if err := one(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		b.Fatal(err)
	}
	l = open(noFsync)
	b.Cleanup(func() { _ = l.Close() })
	// disk-B/call is the file's size over the calls it holds: what a
	// call costs on disk, free pages included.
	diskPerCall := func(b *testing.B) {
		fi, err := os.Stat(path)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(fi.Size())/float64(l.StoredCalls()), "disk-B/call")
	}
	b.Run("serial", func(b *testing.B) {
		ctx := context.Background()
		b.ReportAllocs()
		defer cpuPerOp(b)()
		for b.Loop() {
			if err := one(ctx); err != nil {
				b.Fatal(err)
			}
		}
		diskPerCall(b)
	})
	// lines/flush is how many records (two a call) shared each flush of
	// the log: with fsync, one disk flush each.
	linesPerFlush := func(b *testing.B, flushes0 int) {
		b.ReportMetric(float64(2*b.N)/float64(l.Flushes()-flushes0), "lines/flush")
	}
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		defer cpuPerOp(b)()
		defer linesPerFlush(b, l.Flushes())
		b.SetParallelism(16)
		b.RunParallel(func(pb *testing.PB) {
			ctx := context.Background()
			for pb.Next() {
				if err := one(ctx); err != nil {
					b.Error(err)
					return
				}
			}
		})
		diskPerCall(b)
	})
}

// cpuPerOp reports, when the function it returns is called, the CPU time
// (user and system) the process spent per op since: on the 2-core target
// the gateway shares the cores with the load and the upstream, so CPU per
// call bounds throughput where wall time per call, waiting for the disk,
// does not.
func cpuPerOp(b *testing.B) func() {
	cpu := func() time.Duration {
		var ru syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	c0 := cpu()
	return func() {
		b.ReportMetric(float64((cpu()-c0).Microseconds())/float64(b.N), "cpu-µs/op")
	}
}

// benchLimits measures a call's Create and Update, as benchCall does
// (random ids, a 1 KiB result), against the same with the call counted
// against two limits ("two-limits": a window and a limit on calls in
// flight, both of one key that every call shares, as a quota per
// installation is, never full), to show what counting costs. meter is as
// in benchCall.
func benchLimits(b *testing.B, l ledger.Ledger, meter func(b *testing.B) func()) {
	limits := []ledger.Limit{
		{Key: "install-1/1h", Max: 1 << 30, Window: 3600, Name: "1073741824/1h per install"},
		{Key: "install-1/flight", Max: 1 << 20, Name: "1048576 concurrent per install"},
	}
	for _, tc := range []struct {
		name   string
		limits []ledger.Limit
	}{
		{"no-limits", nil},
		{"two-limits", limits},
	} {
		b.Run(tc.name, func(b *testing.B) { benchCallIDs(b, l, randomID, meter, tc.limits...) })
	}
}

// BenchmarkRedisLimits is benchLimits on Redis, set as BenchmarkRedisCall
// sets it.
func BenchmarkRedisLimits(b *testing.B) {
	s := redistest.StartWith(b, "--appendonly", "yes", "--appendfsync", "everysec", "--maxmemory-policy", "noeviction")
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	l, err := ledger.OpenRedis(ctx, ledger.RedisOptions{Addr: s.Addr, Prefix: "bench:"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = l.Close() })
	benchLimits(b, l, redisCPU(s.Addr))
}

// BenchmarkBoltLimits is benchLimits on bolt, fsync off: with fsync the
// disk's flushes, not the counting, are the figure.
func BenchmarkBoltLimits(b *testing.B) {
	l, err := ledger.OpenBolt(filepath.Join(b.TempDir(), "ledger.db"), ledger.BoltOptions{NoFsync: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = l.Close() })
	benchLimits(b, l, func(b *testing.B) func() { return cpuPerOp(b) })
}

// BenchmarkBoltOpen measures OpenBolt of a file of 100,000 calls (done,
// a 1 KiB result each; fsync off), all without limits or all with two:
// open reads every stored call's header to close those in flight, and
// decodes what counts of those whose JSON names limits.
func BenchmarkBoltOpen(b *testing.B) {
	for _, tc := range []struct {
		name   string
		limits []ledger.Limit
	}{
		{"no-limits", nil},
		{"two-limits", []ledger.Limit{{Key: "install-1/1h", Max: 1 << 30, Window: 3600}, {Key: "install-1/flight", Max: 1 << 20}}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "ledger.db")
			l, err := ledger.OpenBolt(path, ledger.BoltOptions{NoFsync: true})
			if err != nil {
				b.Fatal(err)
			}
			res := &result.Result{Content: strings.Repeat("x", 1024)}
			ctx := context.Background()
			for i := range 100_000 {
				now := time.Now()
				id := fmt.Sprintf("toolu_%08d", i)
				c := &ledger.Call{
					Key: ledger.Key("user-1", "install-1", id), CallID: id, Tool: "ping", User: "user-1", Install: "install-1",
					State: ledger.Running, Deadline: now.Add(time.Minute), Created: now, Updated: now, Limits: tc.limits,
				}
				if _, _, err := l.Create(ctx, c); err != nil {
					b.Fatal(err)
				}
				c.State, c.Result = ledger.Done, res
				if _, err := l.Update(ctx, c, ledger.Running); err != nil {
					b.Fatal(err)
				}
			}
			if err := l.Close(); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				l, err := ledger.OpenBolt(path, ledger.BoltOptions{NoFsync: true})
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				_ = l.Close()
				b.StartTimer()
			}
		})
	}
}
