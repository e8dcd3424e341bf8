package ledger_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/ledger"
)

// Check fills the defaults and refuses options of another back end; the
// configs it passes open (bolt, off) or say why they cannot (redis here,
// where nothing listens).
func TestConfigCheck(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		cfg  ledger.Config
		want string // in the error; "" for none
		path string // the bolt path Check settles on
	}{
		{name: "default bolt", cfg: ledger.Config{DataDir: dir}, path: filepath.Join(dir, "ledger.db")},
		{name: "bolt path", cfg: ledger.Config{Backend: "bolt", Path: filepath.Join(dir, "x.db"), DataDir: dir}, path: filepath.Join(dir, "x.db")},
		{name: "bolt without a place", cfg: ledger.Config{Backend: "bolt"}, want: "no path and no data directory"},
		{name: "bolt with redis options", cfg: ledger.Config{Backend: "bolt", DataDir: dir, Prefix: "p:"}, want: "are for redis"},
		{name: "bolt with allow_eviction", cfg: ledger.Config{Backend: "bolt", DataDir: dir, AllowEviction: true}, want: "allow_eviction and replicas are for redis"},
		{name: "bolt with replicas", cfg: ledger.Config{Backend: "bolt", DataDir: dir, Replicas: 1}, want: "allow_eviction and replicas are for redis"},
		{name: "off", cfg: ledger.Config{Backend: "off", Retention: -1}},
		{name: "unknown", cfg: ledger.Config{Backend: "etcd"}, want: `unknown backend "etcd"`},
		{name: "negative retention", cfg: ledger.Config{DataDir: dir, Retention: -time.Second}, want: "must not be negative"},
		{name: "redis without addr", cfg: ledger.Config{Backend: "redis"}, want: "addr is required"},
		{name: "redis with bolt options", cfg: ledger.Config{Backend: "redis", Addr: "127.0.0.1:1", Path: "/x.db"}, want: "path and fsync are for bolt"},
		{name: "redis with fsync off", cfg: ledger.Config{Backend: "redis", Addr: "127.0.0.1:1", Fsync: new(bool)}, want: "path and fsync are for bolt"},
		{name: "redis host:port", cfg: ledger.Config{Backend: "redis", Addr: "127.0.0.1:6379"}},
		{name: "redis with allow_eviction and replicas", cfg: ledger.Config{Backend: "redis", Addr: "127.0.0.1:6379", AllowEviction: true, Replicas: 2}},
		{name: "redis with negative replicas", cfg: ledger.Config{Backend: "redis", Addr: "127.0.0.1:6379", Replicas: -1}, want: "replicas must not be negative"},
		{name: "redis url", cfg: ledger.Config{Backend: "redis", Addr: "redis://127.0.0.1:6379/"}},
		{name: "rediss with a CA", cfg: ledger.Config{Backend: "redis", Addr: "rediss://127.0.0.1:6379", TLSCAFile: "/ca.pem"}},
		{name: "redis url with tls", cfg: ledger.Config{Backend: "redis", Addr: "redis://127.0.0.1:6379", TLS: true}, want: "is plain redis:// but tls is on"},
		{name: "redis CA without tls", cfg: ledger.Config{Backend: "redis", Addr: "127.0.0.1:6379", TLSCAFile: "/ca.pem"}, want: "tls_ca_file /ca.pem needs tls"},
		{name: "redis credentials in the url", cfg: ledger.Config{Backend: "redis", Addr: "rediss://u:p@127.0.0.1:6379/2"}, want: "password and db are options of their own"},
		{name: "redis scheme", cfg: ledger.Config{Backend: "redis", Addr: "http://127.0.0.1:6379"}, want: `unknown scheme "http"`},
		{name: "redis no port", cfg: ledger.Config{Backend: "redis", Addr: "127.0.0.1"}, want: "missing port"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			err := cfg.Check()
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("Check = %v; want an error with %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatalf("Check = %v", err)
			}
			if cfg.Path != tc.path || cfg.DataDir != "" {
				t.Errorf("Check set path %q, data dir %q; want path %q and no data dir", cfg.Path, cfg.DataDir, tc.path)
			}
		})
	}
}

// max_result_size defaults to 64 KiB, and is refused below 1 KiB.
func TestConfigMaxResultSize(t *testing.T) {
	for _, tc := range []struct {
		set, want int64
		err       string
	}{
		{0, ledger.DefaultMaxResultSize, ""},
		{1024, 1024, ""},
		{10 << 20, 10 << 20, ""},
		{1023, 0, "max_result_size 1023 bytes is less than the least it may be, 1024 bytes"},
		{-1, 0, "max_result_size must not be negative"},
	} {
		cfg := ledger.Config{DataDir: t.TempDir(), MaxResultSize: tc.set}
		err := cfg.Check()
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Check with max_result_size %d = %v; want an error with %q", tc.set, err, tc.err)
			}
			continue
		}
		if err != nil || cfg.MaxResultSize != tc.want {
			t.Errorf("Check with max_result_size %d = %v, set to %d; want %d", tc.set, err, cfg.MaxResultSize, tc.want)
		}
	}
}

func TestConfigOpen(t *testing.T) {
	cfg := ledger.Config{Backend: "off"}
	if l, err := cfg.Open(nil); err != nil || l.Records() {
		t.Errorf("Open(off) = %v, %v; want a ledger that records nothing", l, err)
	}
	cfg = ledger.Config{DataDir: t.TempDir()}
	if err := cfg.Check(); err != nil {
		t.Fatal(err)
	}
	l, err := cfg.Open(nil)
	if err != nil {
		t.Fatal(err)
	}
	// Both keep results up to max_result_size.
	type limited interface{ Unwrap() ledger.Ledger }
	if lim, ok := l.(limited); !ok {
		t.Errorf("Open(bolt) = %T; want results limited", l)
	} else if _, ok := lim.Unwrap().(*ledger.Bolt); !ok {
		t.Errorf("Open(bolt) = %T", lim.Unwrap())
	}
	// The file is taken: the second is opened later, and fails meanwhile.
	later, err := cfg.Open(nil)
	if err != nil {
		t.Fatalf("Open of a locked bolt file = %v; want one that opens later", err)
	}
	if lim, ok := later.(limited); !ok {
		t.Errorf("Open of a locked bolt file = %T; want results limited", later)
	} else if _, ok := lim.Unwrap().(*ledger.Later); !ok {
		t.Errorf("Open of a locked bolt file = %T; want *ledger.Later", lim.Unwrap())
	}
	if _, ok := ledger.Backend(later).(*ledger.Later); !ok {
		t.Errorf("Backend(%T) = %T; want *ledger.Later", later, ledger.Backend(later))
	}
	if ledger.Backend(ledger.Off) != ledger.Off {
		t.Error("Backend(Off) is not Off")
	}
	_ = later.Close()
	_ = l.Close()
}

// A retention shorter than a call may stay in flight is refused, naming
// the numbers; with the ledger off nothing is kept and nothing refused.
func TestConfigCheckRetention(t *testing.T) {
	for _, tc := range []struct {
		cfg                      ledger.Config
		upstream, client, margin time.Duration
		want                     string
	}{
		{cfg: ledger.Config{}, upstream: 30 * time.Second, client: 2 * time.Minute, margin: 15 * time.Second},
		{cfg: ledger.Config{Retention: time.Minute}, upstream: 30 * time.Second, client: 2 * time.Minute, margin: 15 * time.Second,
			want: "retention 1m0s is shorter than a call may stay in flight, 2m15s (the longer of upstream_timeout 30s and client_tool_timeout 2m0s, plus 15s): a call swept in flight would run again when repeated; set retention to at least 2m15s"},
		{cfg: ledger.Config{Retention: 2*time.Minute + 15*time.Second}, upstream: 30 * time.Second, client: 2 * time.Minute, margin: 15 * time.Second},
		{cfg: ledger.Config{}, upstream: 24 * time.Hour, client: time.Minute, margin: time.Second, want: "retention 24h0m0s is shorter"},
		{cfg: ledger.Config{Backend: "off", Retention: time.Second}, upstream: time.Hour, client: time.Hour, margin: time.Hour},
	} {
		err := tc.cfg.CheckRetention(tc.upstream, tc.client, tc.margin)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("CheckRetention(%+v, %s, %s, %s) = %v; want %q", tc.cfg, tc.upstream, tc.client, tc.margin, err, tc.want)
		}
	}
}
