package ledger

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
	"go.uber.org/zap"

	"github.com/toolgate/toolgate/internal/clock"
	"github.com/toolgate/toolgate/internal/result"
)

// BoltOptions configures OpenBolt.
type BoltOptions struct {
	// Retention is how long a call is kept after its last change (its
	// Updated time; for a call in flight, its Deadline if that is later).
	// Default: 24h (DefaultRetention).
	Retention time.Duration

	// Clock stamps calls and tells the sweeper the time. Default: the
	// system clock.
	Clock clock.Clock

	// Fsync makes every commit wait for the disk, so a record survives a
	// power loss too. Without it a commit is written to the operating
	// system (which keeps it across a crash or kill -9 of the gateway)
	// and flushed by it later: a call costs about 0.2 ms instead of two
	// disk flushes (shared by the calls of a batch).
	Fsync bool

	// Logger is told of the calls that OpenBolt finds damaged and skips
	// or closes. Default: none.
	Logger *zap.Logger

	// LockTimeout is how long OpenBolt waits for another process to
	// release the file before it fails with ErrLocked. Default: 5s.
	LockTimeout time.Duration
}

// Bolt is a Ledger in one bbolt file. bbolt locks the file to one process,
// so it serves a single gateway instance; several instances share Redis.
//
// Each change of a call is one bbolt write transaction, which checks the
// stored state and puts the call: a call costs two, its Create and its
// finishing Update. Concurrent writes share commits (bbolt's Batch). Bolt
// has no lock of its own: bbolt's writer lock orders the writes.
type Bolt struct {
	inflight  atomic.Int32 // writes under way, to choose Update or Batch
	db        *bbolt.DB
	path      string
	retention time.Duration
	clock     clock.Clock
	waiters   *waiters
	logger    *zap.Logger

	stop      chan struct{}
	swept     chan struct{}
	closeOnce sync.Once
	closeErr  error
}

// callsBucket holds key → stored call (boltValue).
var callsBucket = []byte("calls")

// A stored call is a header and the call's JSON (encodeCall). The header
// lets a write check the state, and the sweeper the age, without decoding
// the JSON:
//
//	[0]     boltFormat
//	[1]     the state: its index in boltStates plus one
//	[2:10]  Updated in Unix nanoseconds, big-endian
//
// A value in any other form is damaged (ErrCorrupt).
const (
	boltFormat     = 1
	boltHeaderSize = 10
)

var boltStates = [...]State{Running, AwaitingClient, ActionRequired, Done}

// boltValue is c as stored.
func boltValue(c *Call) ([]byte, error) {
	code := slices.Index(boltStates[:], c.State) + 1
	if code == 0 {
		return nil, fmt.Errorf("ledger: storing call %q in unknown state %q", c.Key, c.State)
	}
	data, err := encodeCall(c)
	if err != nil {
		return nil, err
	}
	v := make([]byte, boltHeaderSize, boltHeaderSize+len(data))
	v[0], v[1] = boltFormat, byte(code)
	binary.BigEndian.PutUint64(v[2:], uint64(c.Updated.UnixNano()))
	return append(v, data...), nil
}

// boltHeader checks the header of a stored call.
func boltHeader(key string, v []byte) error {
	switch {
	case len(v) == 0 || v[0] != boltFormat:
		return fmt.Errorf("%w: call %q: not a stored call", ErrCorrupt, key)
	case len(v) < boltHeaderSize:
		return fmt.Errorf("%w: call %q: %d bytes, shorter than a header", ErrCorrupt, key, len(v))
	}
	return nil
}

// boltCall decodes a stored call.
func boltCall(key string, v []byte) (*Call, error) {
	if err := boltHeader(key, v); err != nil {
		return nil, err
	}
	return decodeCall(key, v[boltHeaderSize:])
}

// boltKeyErr says why bbolt cannot store key, or nil: Create checks it, so
// that a call that could not be recorded is not run.
func boltKeyErr(key string) error {
	switch {
	case key == "":
		return errors.New("ledger: a call without a key")
	case len(key) > bbolt.MaxKeySize:
		return fmt.Errorf("ledger: a call key of %d bytes; bolt stores keys of at most %d", len(key), bbolt.MaxKeySize)
	}
	return nil
}

// keyField logs a call's key, cut short: a key is as long as the caller's
// identity and call id, which a bad record need not have bounded.
func keyField(key string) zap.Field {
	const most = 128
	if len(key) > most {
		key = key[:most] + fmt.Sprintf("... (%d bytes)", len(key))
	}
	return zap.String("key", key)
}

// boltState reads only the state of a stored call.
func boltState(key string, v []byte) (State, error) {
	if err := boltHeader(key, v); err != nil {
		return "", err
	}
	if code := int(v[1]); code >= 1 && code <= len(boltStates) {
		return boltStates[code-1], nil
	}
	return "", fmt.Errorf("%w: call %q: unknown state code %d", ErrCorrupt, key, v[1])
}

// boltUpdated reads only the Updated time of a stored call.
func boltUpdated(v []byte) (time.Time, error) {
	if err := boltHeader("", v); err != nil {
		return time.Time{}, err
	}
	return time.Unix(0, int64(binary.BigEndian.Uint64(v[2:]))), nil
}

// OutcomeUnknown is the result given to a call that was in flight when its
// gateway stopped: it may or may not have reached its target, and running it
// again could do twice what the caller asked once.
const OutcomeUnknown = "outcome unknown: the gateway stopped while this call was in flight; it was not run again"

const (
	// boltOpenTimeout is the default LockTimeout: it bounds the wait for
	// the file lock, so a second gateway pointed at the same file fails
	// with an error that names it instead of hanging at start-up.
	boltOpenTimeout = 5 * time.Second

	// boltBatchDelay is how long the first write of a batch waits for
	// others to share its transaction. Only concurrent writes batch (see
	// write): a lone call commits at once. Under the load harness at 32
	// connections the gateway's CPU per call was 288-325 µs at 100 µs,
	// 275-303 µs at 400 µs, and no better at 1 ms (measured when a call
	// wrote the B+tree once; it now writes twice, which fills batches
	// sooner).
	boltBatchDelay = 400 * time.Microsecond
)

// sweepChunk bounds the deletions in one write transaction, so that a large
// sweep does not hold up the calls being recorded, and the keys a sweep
// holds at a time.
var sweepChunk = 1000

// OpenBolt opens (creating it if needed) the ledger file at path. Calls
// that were in flight when the previous process stopped are closed as
// OutcomeUnknown: bbolt's lock means that process is gone, and nothing
// re-runs them.
func OpenBolt(path string, opts BoltOptions) (*Bolt, error) {
	if opts.Retention < 0 {
		return nil, fmt.Errorf("opening ledger %s: negative retention %s", path, opts.Retention)
	}
	if opts.Retention == 0 {
		opts.Retention = DefaultRetention
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.LockTimeout <= 0 {
		opts.LockTimeout = boltOpenTimeout
	}

	// The default path is in Caddy's data directory, which need not
	// exist yet when storage is configured elsewhere.
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("opening ledger %s: %w", path, err)
	}
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{
		Timeout: opts.LockTimeout,
		// A day of calls churns many pages; the hashmap freelist keeps
		// finding free ones cheap where the array scans. (NoFreelistSync
		// saved only ~5% per call here and makes every start-up scan the
		// whole file, so the freelist is still written.)
		FreelistType: bbolt.FreelistMapType,
		// Growing the map blocks every transaction while it is redone; a
		// day of calls fills hundreds of MiB, so start with room for it
		// (address space, not memory).
		InitialMmapSize: 512 << 20,
	})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("opening ledger %s: %w: still locked after %s; is another gateway process using this file? %w", path, ErrLocked, opts.LockTimeout, err)
	}
	if err != nil {
		return nil, fmt.Errorf("opening ledger %s: %w", path, err)
	}
	db.MaxBatchDelay = boltBatchDelay
	// Without fsync, growing the file must not flush it either: bbolt
	// syncs on every growth unless told not to, and those flushes were
	// the ledger's p99 (about 100 ms every few seconds under load).
	db.NoSync = !opts.Fsync
	db.NoGrowSync = !opts.Fsync

	b := &Bolt{
		db:        db,
		path:      path,
		retention: opts.Retention,
		clock:     clock.Or(opts.Clock),
		waiters:   newWaiters(),
		logger:    opts.Logger,
		stop:      make(chan struct{}),
		swept:     make(chan struct{}),
	}
	journalPath := path + ".journal"
	journaled, err := readJournal(journalPath, b.logger)
	if err == nil {
		err = b.closeInFlight(journaled)
	}
	if err == nil {
		err = removeJournal(journalPath)
	}
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("opening ledger %s: %w", path, err)
	}

	every := min(max(b.retention/10, time.Minute), 10*time.Minute)
	go b.sweepEvery(every)
	return b, nil
}

// closeInFlight marks every call left in flight as Done with
// OutcomeUnknown: those the B+tree holds as Running or AwaitingClient, and
// those in an earlier version's journal that it does not hold. A damaged
// call does not
// stop the ledger from opening: it is logged, closed as outcome unknown as
// far as it can be read when it was in flight, and otherwise left as it
// is (a Get of it answers ErrCorrupt).
func (b *Bolt) closeInFlight(journaled map[string]*Call) error {
	now := b.clock.Now()
	return b.db.Update(func(tx *bbolt.Tx) error {
		bk, err := tx.CreateBucketIfNotExists(callsBucket)
		if err != nil {
			return fmt.Errorf("creating bucket: %w", err)
		}
		for key, c := range journaled {
			if err := boltKeyErr(key); err != nil {
				b.logger.Error("ledger: skipping a call in the journal that cannot be stored", keyField(key), zap.Error(err))
				continue
			}
			if bk.Get([]byte(key)) != nil {
				continue
			}
			b.closeCall(bk, []byte(key), c, now)
		}
		// A bucket must not change under ForEach: collect, then put.
		var keys [][]byte
		var calls []*Call
		err = bk.ForEach(func(k, v []byte) error {
			st, err := boltState(string(k), v)
			if err != nil {
				b.logger.Error("ledger: a stored call cannot be read, nor told to be in flight; kept as it is", keyField(string(k)), zap.Error(err))
				return nil
			}
			if st != Running && st != AwaitingClient {
				return nil
			}
			c, err := boltCall(string(k), v)
			if err != nil {
				b.logger.Error("ledger: a call in flight cannot be read; closed as outcome unknown", keyField(string(k)), zap.Error(err))
				c = salvage(v[boltHeaderSize:])
				c.Key = string(k)
			}
			keys = append(keys, bytes.Clone(k))
			calls = append(calls, c)
			return nil
		})
		if err != nil {
			return err
		}
		for i, k := range keys {
			b.closeCall(bk, k, calls[i], now)
		}
		return nil
	})
}

// closeCall stores c under key closed as outcome unknown, or logs why it
// could not (c came from a damaged record).
func (b *Bolt) closeCall(bk *bbolt.Bucket, key []byte, c *Call, now time.Time) {
	data, err := closedValue(c, now)
	if err == nil {
		err = bk.Put(key, data)
	}
	if err != nil {
		b.logger.Error("ledger: a call left in flight could not be closed as outcome unknown", keyField(string(key)), zap.Error(err))
	}
}

// closedValue is c closed as outcome unknown at now, as stored.
func closedValue(c *Call, now time.Time) ([]byte, error) {
	c.State = Done
	c.Result = &result.Result{IsError: true, Content: OutcomeUnknown}
	c.Updated = now
	return boltValue(c)
}

// Create implements Ledger. The check and the put are one transaction,
// so of several concurrent Creates of a key exactly one records it
// (bbolt locks the file to one process).
func (b *Bolt) Create(ctx context.Context, c *Call) (*Call, bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	if err := checkCreate(c); err != nil {
		return nil, false, err
	}
	if err := boltKeyErr(c.Key); err != nil {
		return nil, false, err
	}
	data, err := boltValue(stamp(c, b.clock))
	if err != nil {
		return nil, false, err
	}
	key := []byte(c.Key)
	var existing []byte
	err = b.write(func(tx *bbolt.Tx) error {
		existing = nil // a batch that failed runs fn again
		bk := tx.Bucket(callsBucket)
		if v := bk.Get(key); v != nil {
			existing = bytes.Clone(v)
			return nil
		}
		return bk.Put(key, data)
	})
	if err != nil {
		return nil, false, b.unavailable("recording", c.Key, err)
	}
	if existing == nil {
		return nil, true, nil
	}
	cur, err := boltCall(c.Key, existing)
	if err != nil {
		return nil, false, err
	}
	return cur, false, nil
}

// Get implements Ledger.
func (b *Bolt) Get(ctx context.Context, key string) (*Call, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var data []byte
	err := b.db.View(func(tx *bbolt.Tx) error {
		if v := tx.Bucket(callsBucket).Get([]byte(key)); v != nil {
			data = bytes.Clone(v)
		}
		return nil
	})
	if err != nil {
		return nil, b.unavailable("reading", key, err)
	}
	if data == nil {
		return nil, ErrNotFound
	}
	return boltCall(key, data)
}

// Update implements Ledger. The state check and the put share one
// transaction; waiters are woken only after it committed, so what they read
// is on disk.
func (b *Bolt) Update(ctx context.Context, c *Call, from State) (*Call, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rec := stamp(c, b.clock)
	data, err := boltValue(rec)
	if err != nil {
		return nil, err
	}
	key := []byte(c.Key)
	var current []byte
	var missing bool
	err = b.write(func(tx *bbolt.Tx) error {
		current, missing = nil, false
		bk := tx.Bucket(callsBucket)
		v := bk.Get(key)
		if v == nil {
			missing = true
			return nil
		}
		st, err := boltState(c.Key, v)
		if err != nil {
			return err
		}
		if st != from {
			current = bytes.Clone(v)
			return nil
		}
		return bk.Put(key, data)
	})
	if err != nil {
		return nil, b.unavailable("updating", c.Key, err)
	}
	if missing {
		return nil, ErrNotFound
	}
	if current != nil {
		cur, err := boltCall(c.Key, current)
		if err != nil {
			return nil, err
		}
		return cur, ErrConflict
	}
	b.waiters.notify(c.Key)
	return rec, nil
}

// unavailable wraps a failure of the file as ErrUnavailable.
func (b *Bolt) unavailable(doing, key string, err error) error {
	return fmt.Errorf("%w: %s call %q in %s: %w", ErrUnavailable, doing, key, b.path, err)
}

// Wait implements Ledger.
func (b *Bolt) Wait(ctx context.Context, key string, state State) (*Call, error) {
	return b.waiters.wait(ctx, key, state, b.Get)
}

// Sweep removes the ids Spend marked that have expired, and the calls whose Updated is more than the retention before
// now, and says how many it removed; a call in flight is kept for the
// retention past its deadline too (keptFrom). The sweeper calls it on its
// own; it is exported so a caller (or a test) can sweep at a time of its
// choosing.
func (b *Bolt) Sweep(now time.Time) (int, error) {
	if err := b.sweepSpent(now); err != nil {
		return 0, fmt.Errorf("sweeping ledger %s: %w", b.path, err)
	}
	cutoff := now.Add(-b.retention)
	expired := func(v []byte) bool {
		// A call that cannot be read is kept: losing a record is worse
		// than keeping a broken one.
		updated, err := boltUpdated(v)
		if err != nil || !updated.Before(cutoff) {
			return false
		}
		st, err := boltState("", v)
		if err != nil {
			return false
		}
		if !inFlight(st) {
			return true
		}
		// A call in flight that has not changed for the retention is
		// rare (its gateway stopped, and no repeat closed it): few
		// enough to decode for their deadline.
		c, err := boltCall("", v)
		return err == nil && keptFrom(c).Before(cutoff)
	}

	removed := 0
	// Find up to sweepChunk candidates in a read transaction, which does
	// not hold up writers, then delete them, checking each again since it
	// may have been updated in between; go on from the last one. Only a
	// chunk's keys are held at a time: a sweep after hours of calls finds
	// millions.
	var after []byte
	for {
		var chunk [][]byte
		err := b.db.View(func(tx *bbolt.Tx) error {
			c := tx.Bucket(callsBucket).Cursor()
			var k, v []byte
			if after == nil {
				k, v = c.First()
			} else if k, v = c.Seek(after); bytes.Equal(k, after) {
				k, v = c.Next()
			}
			for ; k != nil && len(chunk) < sweepChunk; k, v = c.Next() {
				if expired(v) {
					chunk = append(chunk, bytes.Clone(k))
				}
			}
			return nil
		})
		if err != nil {
			return removed, fmt.Errorf("sweeping ledger %s: %w", b.path, err)
		}
		if len(chunk) == 0 {
			return removed, nil
		}
		after = chunk[len(chunk)-1]
		n := 0
		err = b.db.Update(func(tx *bbolt.Tx) error {
			bk := tx.Bucket(callsBucket)
			for _, k := range chunk {
				if v := bk.Get(k); v == nil || !expired(v) {
					continue
				}
				if err := bk.Delete(k); err != nil {
					return err
				}
				n++
			}
			return nil
		})
		if err != nil {
			return removed, fmt.Errorf("sweeping ledger %s: %w", b.path, err)
		}
		removed += n
	}
}

func (b *Bolt) sweepEvery(every time.Duration) {
	defer close(b.swept)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-t.C:
			// A failed sweep is tried again on the next tick; until
			// then old calls only take disk space.
			_, _ = b.Sweep(b.clock.Now())
		}
	}
}

// Close stops the sweeper, releases every Wait and closes the file.
func (b *Bolt) Close() error {
	b.closeOnce.Do(func() {
		close(b.stop)
		<-b.swept
		b.waiters.close()
		if err := b.db.Close(); err != nil {
			b.closeErr = fmt.Errorf("closing ledger %s: %w", b.path, err)
		}
	})
	return b.closeErr
}

// Interface guards
var _ Ledger = (*Bolt)(nil)

// write commits fn alone when no other write is under way, and batched
// with the others when some are: a lone call does not wait for a batch to
// fill, and a busy gateway shares commits.
func (b *Bolt) write(fn func(*bbolt.Tx) error) error {
	n := b.inflight.Add(1)
	defer b.inflight.Add(-1)
	if n == 1 {
		return b.db.Update(fn)
	}
	return b.db.Batch(fn)
}
