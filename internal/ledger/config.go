package ledger

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.uber.org/zap"
)

// Config selects and configures a ledger, as a gateway's config gives it:
// Check it, then Open it. Two configs with the same JSON after Check
// configure the same ledger.
type Config struct {
	// Backend is "bolt", "redis" or "off". Default: bolt.
	Backend string

	// Path is the bolt file. Default: ledger.db in DataDir.
	Path string
	// DataDir holds the bolt file when Path is not set.
	DataDir string
	// Fsync, when false, is BoltOptions.NoFsync. Default (nil): true,
	// which Check writes in.
	Fsync *bool

	// Addr is the Redis server: host:port, redis://host:port, or
	// rediss://host:port for TLS.
	Addr string
	// TLS connects to Redis over TLS (as a rediss:// addr does), verifying
	// its certificate against the system's roots, or TLSCAFile's.
	TLS       bool
	TLSCAFile string
	Password  string
	DB        int
	Prefix    string
	// AllowEviction is RedisOptions.AllowEviction.
	AllowEviction bool
	// Replicas is RedisOptions.Replicas.
	Replicas int

	// Retention is how long a call is kept (BoltOptions.Retention,
	// RedisOptions.Retention). Default: DefaultRetention.
	Retention time.Duration

	// MaxResultSize is the most of a result's JSON the ledger keeps, in
	// bytes (LimitResults). Default: DefaultMaxResultSize.
	MaxResultSize int64
}

// Check sets c's defaults and checks that its options fit its back end.
func (c *Config) Check() error {
	if c.Backend == "" {
		c.Backend = "bolt"
	}
	switch c.Backend {
	case "off":
		return nil
	case "bolt":
		if c.Addr != "" || c.Password != "" || c.DB != 0 || c.Prefix != "" || c.TLS || c.TLSCAFile != "" || c.AllowEviction || c.Replicas != 0 {
			return errors.New("ledger bolt: addr, password, db, prefix, tls, tls_ca_file, allow_eviction and replicas are for redis")
		}
		if c.Path == "" {
			if c.DataDir == "" {
				return errors.New("ledger bolt: no path and no data directory")
			}
			c.Path = filepath.Join(c.DataDir, "ledger.db")
		}
		if c.Fsync == nil {
			c.Fsync = new(true)
		}
		c.DataDir = "" // the path says it all, for the JSON that names the ledger
	case "redis":
		if c.Addr == "" {
			return errors.New("ledger redis: addr is required")
		}
		if c.Path != "" || c.Fsync != nil {
			return errors.New("ledger redis: path and fsync are for bolt")
		}
		c.DataDir = ""
		if c.Replicas < 0 {
			return errors.New("ledger redis: replicas must not be negative")
		}
		if _, _, err := c.redisAddr(); err != nil {
			return err
		}
	default:
		return fmt.Errorf("ledger: unknown backend %q (want bolt, redis or off)", c.Backend)
	}
	if c.Retention < 0 {
		return errors.New("ledger: retention must not be negative")
	}
	switch {
	case c.MaxResultSize == 0:
		c.MaxResultSize = DefaultMaxResultSize
	case c.MaxResultSize < 0:
		return errors.New("ledger: max_result_size must not be negative")
	case c.MaxResultSize < MinMaxResultSize:
		return fmt.Errorf("ledger: max_result_size %d bytes is less than the least it may be, %d bytes (1KiB)", c.MaxResultSize, MinMaxResultSize)
	}
	return nil
}

// CheckRetention refuses a retention shorter than the longest a call may
// stay in flight: the longer of the upstream timeout and the client tool
// timeout (as the gateway uses them, defaults applied), plus margin. A
// call swept while in flight is not found by its repeat, which runs it
// again.
func (c *Config) CheckRetention(upstream, client, margin time.Duration) error {
	if c.Backend == "off" {
		return nil
	}
	retention := c.Retention
	if retention == 0 {
		retention = DefaultRetention
	}
	if longest := max(upstream, client) + margin; retention < longest {
		return fmt.Errorf("ledger: retention %s is shorter than a call may stay in flight, %s (the longer of upstream_timeout %s and client_tool_timeout %s, plus %s): a call swept in flight would run again when repeated; set retention to at least %s",
			retention, longest, upstream, client, margin, longest)
	}
	return nil
}

// redisAddr reads Addr and TLS into the server's host:port and whether to
// speak TLS to it.
func (c *Config) redisAddr() (addr string, useTLS bool, err error) {
	addr, useTLS = c.Addr, c.TLS
	if scheme, _, ok := strings.Cut(addr, "://"); ok {
		u, err := url.Parse(addr)
		if err != nil || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
			return "", false, fmt.Errorf("ledger redis: addr %q: want host:port, redis://host:port or rediss://host:port (password and db are options of their own)", addr)
		}
		switch scheme {
		case "rediss":
			useTLS = true
		case "redis":
			if useTLS {
				return "", false, fmt.Errorf("ledger redis: addr %q is plain redis:// but tls is on; use rediss:// or drop tls", addr)
			}
		default:
			return "", false, fmt.Errorf("ledger redis: addr %q: unknown scheme %q (want redis or rediss)", addr, scheme)
		}
		addr = u.Host
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return "", false, fmt.Errorf("ledger redis: addr %q: %w", c.Addr, err)
	}
	if !useTLS && c.TLSCAFile != "" {
		return "", false, fmt.Errorf("ledger redis: tls_ca_file %s needs tls (or a rediss:// addr)", c.TLSCAFile)
	}
	return addr, useTLS, nil
}

// redisTLS is the TLS config of a Redis ledger that speaks TLS.
func (c *Config) redisTLS() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if c.TLSCAFile != "" {
		pem, err := os.ReadFile(c.TLSCAFile)
		if err != nil {
			return nil, fmt.Errorf("ledger redis: tls_ca_file: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("ledger redis: tls_ca_file %s: no PEM certificate in it", c.TLSCAFile)
		}
	}
	return cfg, nil
}

const (
	// boltLockWait is how long Open waits for the bolt file's lock: a
	// moment, for a process that is just exiting. The file may be held
	// for good by the gateway whose config `caddy validate` checks, or
	// until it is cleaned up by the config a reload replaces; then the
	// ledger is opened later (Later), trying every boltLockRetry, and
	// calls answer 503 until then.
	boltLockWait  = 100 * time.Millisecond
	boltLockRetry = time.Second

	// redisOpenTimeout bounds the first connection to Redis.
	redisOpenTimeout = 10 * time.Second
)

// Open opens the ledger c configures, once Check passed: Off for "off",
// else one that keeps results up to MaxResultSize (LimitResults). A
// bolt file that another process holds is opened later (OpenLater); logger
// (nil for none) is told so, and of the damaged calls OpenBolt finds.
func (c *Config) Open(logger *zap.Logger) (Ledger, error) {
	l, err := c.open(logger)
	if err != nil {
		return nil, err
	}
	return c.Limit(l), nil
}

// Limit returns l keeping results up to c's MaxResultSize (LimitResults),
// as Open does: for the ledger of a back end opened on its own
// (OpenRedis).
func (c *Config) Limit(l Ledger) Ledger {
	max := c.MaxResultSize
	if max == 0 {
		max = DefaultMaxResultSize
	}
	return LimitResults(l, max)
}

func (c *Config) open(logger *zap.Logger) (Ledger, error) {
	if logger == nil {
		logger = zap.NewNop()
	}
	switch c.Backend {
	case "off":
		return Off, nil
	case "bolt":
		opts := BoltOptions{Retention: c.Retention, NoFsync: c.Fsync != nil && !*c.Fsync, Logger: logger, LockTimeout: boltLockWait}
		open := func() (Ledger, error) {
			l, err := OpenBolt(c.Path, opts)
			if err != nil {
				return nil, fmt.Errorf("ledger bolt %s: %w", c.Path, err)
			}
			return l, nil
		}
		l, err := open()
		if errors.Is(err, ErrLocked) {
			logger.Error("the ledger file is in use by another process (or by the config this one replaces); calls answer 503 until it is free",
				zap.String("path", c.Path))
			return OpenLater(open, err, boltLockRetry, logger), nil
		}
		return l, err
	case "redis":
		r, err := c.OpenRedis(logger)
		if err != nil {
			return nil, err
		}
		return r, nil
	}
	return nil, fmt.Errorf("ledger: unknown backend %q (want bolt, redis or off)", c.Backend)
}

// OpenRedis opens the Redis ledger of c, whose Backend is "redis", once
// Check passed, without the result limit Open adds (Limit): for a caller
// that shares its client (the Redis relay of client tools). logger may be
// nil.
func (c *Config) OpenRedis(logger *zap.Logger) (*Redis, error) {
	if logger == nil {
		logger = zap.NewNop()
	}
	addr, useTLS, err := c.redisAddr()
	if err != nil {
		return nil, err
	}
	var tlsConfig *tls.Config
	if useTLS {
		if tlsConfig, err = c.redisTLS(); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), redisOpenTimeout)
	defer cancel()
	l, err := OpenRedis(ctx, RedisOptions{
		Addr: addr, TLS: tlsConfig, Password: c.Password, DB: c.DB, Prefix: c.Prefix, Retention: c.Retention,
		AllowEviction: c.AllowEviction, Replicas: c.Replicas, Logger: logger,
	})
	if refused := (*EvictionError)(nil); errors.As(err, &refused) {
		return nil, fmt.Errorf("ledger redis %s: %w", c.Addr, refused)
	}
	if err != nil {
		if !useTLS && errors.Is(err, io.EOF) {
			// A TLS server closes a plain connection at its first
			// command, which says only EOF.
			return nil, fmt.Errorf("ledger redis %s: %w (if the server speaks TLS, use rediss:// or tls)", c.Addr, err)
		}
		return nil, fmt.Errorf("ledger redis %s: %w", c.Addr, err)
	}
	return l, nil
}
