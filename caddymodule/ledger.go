package caddymodule

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"go.uber.org/zap"

	"github.com/toolgate/toolgate/internal/clienttools"
	"github.com/toolgate/toolgate/internal/gateway"
	"github.com/toolgate/toolgate/internal/ledger"
	"github.com/toolgate/toolgate/internal/manifest"
	"github.com/toolgate/toolgate/internal/outbound"
	"github.com/toolgate/toolgate/internal/quota"
	"github.com/toolgate/toolgate/internal/store"
)

// Ledger configures the call ledger, which makes each call id run at most
// once and keeps action-required cards until they are answered.
type Ledger struct {
	// Backend is "bolt" (an embedded file), "redis" (shared by several
	// gateway instances) or "off" (no ledger: a repeated call id runs
	// again, and cards cannot pause a call). Default: bolt.
	Backend string `json:"backend,omitempty"`

	// Path is the bolt file. Default: toolgate/ledger.db in Caddy's data
	// directory.
	Path string `json:"path,omitempty"`

	// Addr is the Redis server's host:port, or redis://host:port, or
	// rediss://host:port for TLS (as if TLS were set).
	Addr string `json:"addr,omitempty"`

	// TLS connects to Redis over TLS, verifying the server's certificate
	// for the host of addr against the system's roots, or TLSCAFile's.
	// Default: off (on for a rediss:// addr).
	TLS bool `json:"tls,omitzero"`

	// TLSCAFile is a PEM file of the CA certificates that Redis's
	// certificate is verified against instead of the system's roots: for
	// a server with a private CA. It needs TLS. Default: none.
	TLSCAFile string `json:"tls_ca_file,omitempty"`

	// Password authenticates to Redis. It may hold Caddy placeholders such
	// as {env.NAME} or {file./path}, resolved once at load; an unknown or
	// empty one is a config error.
	Password string `json:"password,omitempty"`

	// DB is the Redis database number. Default: 0.
	DB int `json:"db,omitzero"`

	// Prefix starts every Redis key and channel. Default: "toolgate:".
	Prefix string `json:"prefix,omitempty"`

	// AllowEviction accepts a Redis server whose maxmemory-policy is not
	// noeviction. Every call key has a TTL, so a server that evicts, even
	// only volatile keys (the default of most managed Redis), may drop
	// one caller's records to make room for another's, and a repeat of
	// a dropped call runs it again: without this option such a server is
	// a config error, and a connection to one made later (after a
	// failover) is refused, calls answering 503. With it, a warning is
	// logged at every start. Default: false.
	AllowEviction bool `json:"allow_eviction,omitzero"`

	// Replicas is how many Redis replicas must confirm each write of the
	// ledger (Redis's WAIT, for up to 500ms) before it counts: a write
	// they do not confirm fails closed, its call answering 503 without
	// running (a repeat runs it once they confirm again). A failover to
	// a replica then keeps every call that ran. It costs each write the
	// replicas' round trip. Default: 0 (a write counts once the server
	// has it).
	Replicas int `json:"replicas,omitzero"`

	// Retention is how long a call is kept after its last change; a call
	// in flight is kept for it past its deadline too. It must be at least
	// the longer of upstream_timeout and client_tool_timeout plus 15s (the
	// longest a call may stay in flight), or a repeat of a call still in
	// flight could find it swept and run it again. Default: 24h.
	Retention caddy.Duration `json:"retention,omitzero"`

	// Fsync makes each bolt commit wait for the disk, so that a call's
	// first record is on the disk before its target is sent: a repeat of
	// the call finds it after a power cut or a crash of the machine too.
	// Concurrent calls share the flushes (two a commit, a call making
	// two commits). false lets the operating system write commits to the
	// disk when it will: they survive a crash or kill -9 of the gateway,
	// but a power cut may lose calls that ran, and a repeat of one runs
	// it again, or leave the file damaged. Default: true.
	Fsync *bool `json:"fsync,omitempty"`

	// MaxResultSize is the most of a call's result the ledger keeps, in
	// bytes of the result's JSON; at least 1 KiB. A call with a larger
	// result is recorded without it: its caller gets the whole result,
	// while a repeat of the call, a waiter or GET /calls/{id} gets an error
	// result, "result too large to replay", naming the size and the limit
	// (the call is not run again). Default: 64 KiB.
	MaxResultSize int64 `json:"max_result_size,omitzero"`
}

// config is the ledger's config as internal/ledger takes it.
func (c *Ledger) config() *ledger.Config {
	return &ledger.Config{
		Backend: c.Backend, Path: c.Path, DataDir: filepath.Join(caddy.AppDataDir(), "toolgate"), Fsync: c.Fsync,
		Addr: c.Addr, TLS: c.TLS, TLSCAFile: c.TLSCAFile, Password: c.Password, DB: c.DB, Prefix: c.Prefix,
		AllowEviction: c.AllowEviction, Replicas: c.Replicas,
		Retention: time.Duration(c.Retention), MaxResultSize: c.MaxResultSize,
	}
}

// backend is the ledger's backend, the default filled in: the backend
// label of its metrics.
func (c *Ledger) backend() string {
	if c.Backend == "" {
		return "bolt"
	}
	return c.Backend
}

// checkRetention refuses a retention shorter than a call may stay in
// flight, given the handler's timeouts (zero or less for their defaults).
func (c *Ledger) checkRetention(upstream, client time.Duration) error {
	if upstream <= 0 {
		upstream = outbound.DefaultTimeout
	}
	if client <= 0 {
		client = clienttools.DefaultTimeout
	}
	return c.config().CheckRetention(upstream, client, gateway.InFlightMargin)
}

// checkWindows refuses a quota window longer than the retention: the
// bolt ledger counts a window from the calls it keeps, so a window past
// them would forget calls still in it.
func (c *Ledger) checkWindows(all []quota.Rule, tools *manifest.Set) error {
	retention := time.Duration(c.Retention)
	if retention <= 0 {
		retention = ledger.DefaultRetention
	}
	check := func(whose string, rules []quota.Rule) error {
		for _, r := range rules {
			if r.Window > retention {
				return fmt.Errorf("%s: limit %q: its window is longer than the ledger's retention (%s); raise retention in the ledger block", whose, r.Text, retention)
			}
		}
		return nil
	}
	if err := check("toolgate", all); err != nil {
		return err
	}
	for _, t := range tools.List() {
		if err := check("tool "+t.Name+" ("+t.Source+")", t.Limits); err != nil {
			return err
		}
	}
	return nil
}

// stores holds the open stores across config reloads, keyed by their
// ledger config: a reload that keeps the ledger keeps its waiters and its
// file, and the bridge on which pages meet the client tool calls waiting
// for them, with the pages' open streams. With Redis the store's relay
// shares them with every instance on the same server and prefix.
var stores = caddy.NewUsagePool()

// openStore is a store in the pool, with the bridge over its relay.
type openStore struct {
	*store.Store
	bridge *clienttools.Bridge
}

// Destruct closes the store: its relay, then its ledger.
func (s openStore) Destruct() error { return s.Close() }

// open returns the store for this config and the bridge over its relay,
// shared with the handlers and the previous config that use the same
// ledger, and the key to release in Cleanup. Redis's password and CA file
// may hold placeholders, resolved with repl.
func (c *Ledger) open(repl *caddy.Replacer, logger *zap.Logger) (openStore, string, error) {
	cfg := c.config()
	var err error
	if cfg.Backend == "redis" {
		cfg.Password, err = resolve(repl, "ledger redis: password", cfg.Password)
		if err == nil {
			cfg.TLSCAFile, err = resolve(repl, "ledger redis: tls_ca_file", cfg.TLSCAFile)
		}
	}
	if err == nil {
		err = cfg.Check()
	}
	if err != nil {
		return openStore{}, "", err
	}
	key, err := ledgerKey(cfg)
	if err != nil {
		return openStore{}, "", err
	}
	val, _, err := stores.LoadOrNew(key, func() (caddy.Destructor, error) {
		s, err := store.Open(cfg, logger)
		if err != nil {
			return nil, err
		}
		return openStore{s, clienttools.NewBridgeOn(s.Relay())}, nil
	})
	if err != nil {
		return openStore{}, "", err
	}
	return val.(openStore), key, nil
}

// ledgerKey is cfg as JSON, the key of its store in stores. json has no
// default form for a time.Duration: it is written in nanoseconds.
func ledgerKey(cfg *ledger.Config) (string, error) {
	key, err := json.Marshal(cfg, json.WithMarshalers(json.MarshalToFunc(func(enc *jsontext.Encoder, d time.Duration) error {
		return enc.WriteToken(jsontext.Int(int64(d)))
	})))
	if err != nil {
		return "", fmt.Errorf("ledger: %w", err)
	}
	return string(key), nil
}
