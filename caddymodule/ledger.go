package caddymodule

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/toolgate/toolgate/internal/clienttools"
	"github.com/toolgate/toolgate/internal/dispatch"
	"github.com/toolgate/toolgate/internal/gateway"
	"github.com/toolgate/toolgate/internal/ledger"
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

	// Addr is the Redis server's host:port.
	Addr string `json:"addr,omitempty"`

	// Password authenticates to Redis.
	Password string `json:"password,omitempty"`

	// DB is the Redis database number. Default: 0.
	DB int `json:"db,omitempty"`

	// Prefix starts every Redis key and channel. Default: "toolgate:".
	Prefix string `json:"prefix,omitempty"`

	// Retention is how long a call is kept after its last change; a call
	// in flight is kept for it past its deadline too. It must be at least
	// the longer of upstream_timeout and client_tool_timeout plus 15s (the
	// longest a call may stay in flight), or a repeat of a call still in
	// flight could find it swept and run it again. Default: 24h.
	Retention caddy.Duration `json:"retention,omitempty"`

	// Fsync makes each bolt commit wait for the disk, so records survive a
	// power loss, not only a crash or kill -9 of the gateway (which they
	// always survive). It costs two disk flushes per call. Default: off.
	Fsync bool `json:"fsync,omitempty"`
}

// checkRetention refuses a retention shorter than the longest a call may
// stay in flight: the longer of upstream_timeout and client_tool_timeout
// (their defaults when unset) and gateway.InFlightMargin. A call swept
// while in flight is not found by its repeat, which runs it again.
func (c *Ledger) checkRetention(upstream, client time.Duration) error {
	if c.Backend == "off" {
		return nil
	}
	if upstream <= 0 {
		upstream = dispatch.DefaultTimeout
	}
	if client <= 0 {
		client = clienttools.DefaultTimeout
	}
	retention := time.Duration(c.Retention)
	if retention == 0 {
		retention = ledger.DefaultRetention
	}
	if longest := max(upstream, client) + gateway.InFlightMargin; retention < longest {
		return fmt.Errorf("ledger: retention %s is shorter than a call may stay in flight, %s (the longer of upstream_timeout %s and client_tool_timeout %s, plus %s): a call swept in flight would run again when repeated; set retention to at least %s",
			retention, longest, upstream, client, gateway.InFlightMargin, longest)
	}
	return nil
}

// ledgers holds the open ledgers across config reloads, keyed by their
// config: a reload that keeps the ledger keeps its waiters and its file.
var ledgers = caddy.NewUsagePool()

type openLedger struct{ ledger.Ledger }

func (l openLedger) Destruct() error { return l.Close() }

// open returns the ledger for this config, shared with other handlers and
// the previous config that use the same one; the key to release in
// Cleanup; or nil for "off".
func (c *Ledger) open() (ledger.Ledger, string, error) {
	cfg := *c
	if cfg.Backend == "" {
		cfg.Backend = "bolt"
	}
	switch cfg.Backend {
	case "off":
		return nil, "", nil
	case "bolt":
		if cfg.Addr != "" || cfg.Password != "" || cfg.DB != 0 || cfg.Prefix != "" {
			return nil, "", fmt.Errorf("ledger bolt: addr, password, db and prefix are for redis")
		}
		if cfg.Path == "" {
			cfg.Path = filepath.Join(caddy.AppDataDir(), "toolgate", "ledger.db")
		}
	case "redis":
		if cfg.Addr == "" {
			return nil, "", fmt.Errorf("ledger redis: addr is required")
		}
		if cfg.Path != "" || cfg.Fsync {
			return nil, "", fmt.Errorf("ledger redis: path and fsync are for bolt")
		}
	default:
		return nil, "", fmt.Errorf("ledger: unknown backend %q (want bolt, redis or off)", cfg.Backend)
	}
	if cfg.Retention < 0 {
		return nil, "", fmt.Errorf("ledger: retention must not be negative")
	}
	keyJSON, _ := json.Marshal(cfg)
	key := string(keyJSON)
	val, _, err := ledgers.LoadOrNew(key, func() (caddy.Destructor, error) {
		switch cfg.Backend {
		case "bolt":
			l, err := ledger.OpenBolt(cfg.Path, ledger.BoltOptions{Retention: time.Duration(cfg.Retention), Fsync: cfg.Fsync})
			if err != nil {
				return nil, fmt.Errorf("ledger bolt %s: %w", cfg.Path, err)
			}
			return openLedger{l}, nil
		default:
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			l, err := ledger.OpenRedis(ctx, ledger.RedisOptions{
				Addr: cfg.Addr, Password: cfg.Password, DB: cfg.DB, Prefix: cfg.Prefix,
				Retention: time.Duration(cfg.Retention),
			})
			if err != nil {
				return nil, fmt.Errorf("ledger redis %s: %w", cfg.Addr, err)
			}
			return openLedger{l}, nil
		}
	})
	if err != nil {
		return nil, "", err
	}
	return val.(openLedger).Ledger, key, nil
}
