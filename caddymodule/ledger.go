package caddymodule

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

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

	// Addr is the Redis server's host:port, or redis://host:port, or
	// rediss://host:port for TLS (as if TLS were set).
	Addr string `json:"addr,omitempty"`

	// TLS connects to Redis over TLS, verifying the server's certificate
	// for the host of addr against the system's roots, or TLSCAFile's.
	// Default: off (on for a rediss:// addr).
	TLS bool `json:"tls,omitempty"`

	// TLSCAFile is a PEM file of the CA certificates that Redis's
	// certificate is verified against instead of the system's roots: for
	// a server with a private CA. It needs TLS. Default: none.
	TLSCAFile string `json:"tls_ca_file,omitempty"`

	// Password authenticates to Redis. It may hold Caddy placeholders such
	// as {env.NAME} or {file./path}, resolved once at load; an unknown or
	// empty one is a config error.
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

// redisTLS reads the redis addr (host:port, redis://host:port or
// rediss://host:port) and the TLS options into the server's host:port and
// its TLS config, or nil for plain TCP.
func (c *Ledger) redisTLS() (string, *tls.Config, error) {
	addr, on := c.Addr, c.TLS
	if scheme, _, ok := strings.Cut(addr, "://"); ok {
		u, err := url.Parse(addr)
		if err != nil || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
			return "", nil, fmt.Errorf("ledger redis: addr %q: want host:port, redis://host:port or rediss://host:port (password and db are options of their own)", addr)
		}
		switch scheme {
		case "rediss":
			on = true
		case "redis":
			if on {
				return "", nil, fmt.Errorf("ledger redis: addr %q is plain redis:// but tls is on; use rediss:// or drop tls", addr)
			}
		default:
			return "", nil, fmt.Errorf("ledger redis: addr %q: unknown scheme %q (want redis or rediss)", addr, scheme)
		}
		addr = u.Host
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return "", nil, fmt.Errorf("ledger redis: addr %q: %w", c.Addr, err)
	}
	if !on {
		if c.TLSCAFile != "" {
			return "", nil, fmt.Errorf("ledger redis: tls_ca_file %s needs tls (or a rediss:// addr)", c.TLSCAFile)
		}
		return addr, nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if c.TLSCAFile != "" {
		pem, err := os.ReadFile(c.TLSCAFile)
		if err != nil {
			return "", nil, fmt.Errorf("ledger redis: tls_ca_file: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return "", nil, fmt.Errorf("ledger redis: tls_ca_file %s: no PEM certificate in it", c.TLSCAFile)
		}
	}
	return addr, cfg, nil
}

// ledgers holds the open ledgers across config reloads, keyed by their
// config: a reload that keeps the ledger keeps its waiters and its file.
var ledgers = caddy.NewUsagePool()

type openLedger struct{ ledger.Ledger }

func (l openLedger) Destruct() error { return l.Close() }

const (
	// boltLockWait is how long provisioning waits for the bolt file's
	// lock: a moment, for a process that is just exiting. The file may be
	// held for good by the gateway whose config `caddy validate` checks,
	// or until it is cleaned up by the config a reload replaces; then the
	// ledger is opened later (ledger.Later), trying every
	// boltLockRetry, and calls answer 503 until then.
	boltLockWait  = 100 * time.Millisecond
	boltLockRetry = time.Second
)

// open returns the ledger for this config, shared with other handlers and
// the previous config that use the same one; the key to release in
// Cleanup; or nil for "off". The password's placeholders are resolved
// with repl.
func (c *Ledger) open(repl *caddy.Replacer, logger *zap.Logger) (ledger.Ledger, string, error) {
	cfg := *c
	var addr string           // redis host:port
	var tlsConfig *tls.Config // redis TLS, or nil
	if cfg.Backend == "" {
		cfg.Backend = "bolt"
	}
	switch cfg.Backend {
	case "off":
		return nil, "", nil
	case "bolt":
		if cfg.Addr != "" || cfg.Password != "" || cfg.DB != 0 || cfg.Prefix != "" || cfg.TLS || cfg.TLSCAFile != "" {
			return nil, "", fmt.Errorf("ledger bolt: addr, password, db, prefix, tls and tls_ca_file are for redis")
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
		var err error
		if cfg.Password, err = resolve(repl, "ledger redis: password", cfg.Password); err != nil {
			return nil, "", err
		}
		if cfg.TLSCAFile, err = resolve(repl, "ledger redis: tls_ca_file", cfg.TLSCAFile); err != nil {
			return nil, "", err
		}
		if addr, tlsConfig, err = cfg.redisTLS(); err != nil {
			return nil, "", err
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
			opts := ledger.BoltOptions{Retention: time.Duration(cfg.Retention), Fsync: cfg.Fsync, Logger: logger, LockTimeout: boltLockWait}
			open := func() (ledger.Ledger, error) {
				l, err := ledger.OpenBolt(cfg.Path, opts)
				if err != nil {
					return nil, fmt.Errorf("ledger bolt %s: %w", cfg.Path, err)
				}
				return l, nil
			}
			l, err := open()
			if errors.Is(err, ledger.ErrLocked) {
				logger.Error("the ledger file is in use by another process (or by the config this one replaces); calls answer 503 until it is free",
					zap.String("path", cfg.Path))
				return openLedger{ledger.OpenLater(open, err, boltLockRetry, logger)}, nil
			}
			if err != nil {
				return nil, err
			}
			return openLedger{l}, nil
		default:
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			l, err := ledger.OpenRedis(ctx, ledger.RedisOptions{
				Addr: addr, TLS: tlsConfig, Password: cfg.Password, DB: cfg.DB, Prefix: cfg.Prefix,
				Retention: time.Duration(cfg.Retention),
			})
			if err != nil {
				if tlsConfig == nil && errors.Is(err, io.EOF) {
					// A TLS server closes a plain connection at its first
					// command, which says only EOF.
					return nil, fmt.Errorf("ledger redis %s: %w (if the server speaks TLS, use rediss:// or tls)", cfg.Addr, err)
				}
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
