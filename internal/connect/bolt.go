package connect

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/bbolt"

	"github.com/toolgate/toolgate/internal/clock"
)

// Bolt is a Store in a bucket of the bolt ledger's file: one gateway
// instance, whose tokens outlast its restarts. The ledger owns the file
// (bbolt locks it to one process); Bolt only reads and writes its own
// bucket, which the ledger's sweep and checkpoints leave alone.
//
// Each value is stored behind its expiry, 8 bytes of Unix nanoseconds
// (big-endian; 0: none). An expired value reads as ErrNotFound until the
// sweep, every minute, removes it. Writes are rare (a connection made, a
// token refreshed, a flow started or finished), so each is its own
// transaction, flushed to the disk as the ledger's file is. Locks live in
// this process, the only one on the file.
type Bolt struct {
	db    *bbolt.DB
	clock clock.Clock
	locks locks

	stop      chan struct{}
	swept     chan struct{}
	closeOnce sync.Once
}

// boltBucket holds key → expiry and value. Its name is not the ledger's
// ("calls", "calls@…", "spent"), whose sweep drops only buckets of its
// own names.
var boltBucket = []byte("connections")

// boltSweepEvery is how often expired values are removed.
const boltSweepEvery = time.Minute

// boltHeader is the length of a stored value's expiry.
const boltHeader = 8

// NewBolt returns the Store in db's "connections" bucket, creating the
// bucket, on c (nil: the system clock), and starts its sweep. Close stops
// the sweep and leaves db open: its owner closes it.
func NewBolt(db *bbolt.DB, c clock.Clock) (*Bolt, error) {
	err := db.Update(func(tx *bbolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(boltBucket)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("connections in %s: %w", db.Path(), err)
	}
	b := &Bolt{
		db:    db,
		clock: clock.Or(c),
		locks: locks{held: map[string]holding{}},
		stop:  make(chan struct{}),
		swept: make(chan struct{}),
	}
	go b.sweepEvery(boltSweepEvery)
	return b, nil
}

// errDamaged is a stored value too short to hold its expiry: written by
// something other than Bolt.
var errDamaged = errors.New("stored value has no expiry")

// read returns the value of a stored v at now; ok is false when it has
// expired.
func read(v []byte, now time.Time) (val []byte, ok bool, err error) {
	if len(v) < boltHeader {
		return nil, false, errDamaged
	}
	exp := int64(binary.BigEndian.Uint64(v))
	if exp != 0 && now.UnixNano() >= exp {
		return nil, false, nil
	}
	return v[boltHeader:], true, nil
}

func (b *Bolt) failed(doing string, err error) error {
	return fmt.Errorf("connections in %s: %s: %w", b.db.Path(), doing, err)
}

// get reads key in a read transaction: a miss costs no write.
func (b *Bolt) get(key string) ([]byte, error) {
	var val []byte
	err := b.db.View(func(tx *bbolt.Tx) error {
		stored := tx.Bucket(boltBucket).Get([]byte(key))
		if stored == nil {
			return ErrNotFound
		}
		v, ok, err := read(stored, b.clock.Now())
		if err != nil {
			return err
		}
		if !ok {
			return ErrNotFound
		}
		// v lives in the file's memory map only as long as tx.
		val = bytes.Clone(v)
		if val == nil {
			val = []byte{}
		}
		return nil
	})
	return val, err
}

func (b *Bolt) Get(_ context.Context, key string) ([]byte, error) {
	val, err := b.get(key)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return nil, b.failed("reading", err)
	}
	return val, err
}

func (b *Bolt) Put(_ context.Context, key string, val []byte, ttl time.Duration) error {
	v := make([]byte, boltHeader+len(val))
	if ttl > 0 {
		// An expiry of 0 is none: a clock before 1970 still expires.
		binary.BigEndian.PutUint64(v, uint64(max(b.clock.Now().Add(ttl).UnixNano(), 1)))
	}
	copy(v[boltHeader:], val)
	err := b.db.Update(func(tx *bbolt.Tx) error {
		return tx.Bucket(boltBucket).Put([]byte(key), v)
	})
	if err != nil {
		return b.failed("writing", err)
	}
	return nil
}

func (b *Bolt) Delete(_ context.Context, key string) error {
	// A key that is not there needs no write (and no flush to the disk).
	found, err := b.stored(key)
	if err != nil {
		return b.failed("deleting", err)
	}
	if !found {
		return nil
	}
	err = b.db.Update(func(tx *bbolt.Tx) error {
		return tx.Bucket(boltBucket).Delete([]byte(key))
	})
	if err != nil {
		return b.failed("deleting", err)
	}
	return nil
}

// stored says whether key is in the bucket at all, expired or damaged.
func (b *Bolt) stored(key string) (bool, error) {
	found := false
	err := b.db.View(func(tx *bbolt.Tx) error {
		found = tx.Bucket(boltBucket).Get([]byte(key)) != nil
		return nil
	})
	return found, err
}

func (b *Bolt) Take(_ context.Context, key string) ([]byte, error) {
	// A Take of a key that is not there (a callback with a made-up
	// state) costs a read, not a write: only one that may find the
	// value writes.
	if _, err := b.get(key); err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil, err
		}
		return nil, b.failed("taking", err)
	}
	var val []byte
	found := false
	err := b.db.Update(func(tx *bbolt.Tx) error {
		bk := tx.Bucket(boltBucket)
		stored := bk.Get([]byte(key))
		if stored == nil {
			return nil // another Take was first
		}
		v, ok, err := read(stored, b.clock.Now())
		if err != nil {
			return err
		}
		if ok {
			found, val = true, bytes.Clone(v)
			if val == nil {
				val = []byte{}
			}
		}
		// Expired, it goes too, before the sweep.
		return bk.Delete([]byte(key))
	})
	if err != nil {
		return nil, b.failed("taking", err)
	}
	if !found {
		return nil, ErrNotFound
	}
	return val, nil
}

// Lock takes a lock of this process: no other process opens the file.
// A ttl of zero or less is refused.
func (b *Bolt) Lock(_ context.Context, key string, ttl time.Duration) (func(), bool, error) {
	if ttl <= 0 {
		return nil, false, fmt.Errorf("connections: lock for %s: want a positive ttl", ttl)
	}
	unlock, ok := b.locks.lock(key, b.clock.Now(), ttl)
	return unlock, ok, nil
}

// Sweep removes the values expired at now, and the locks, and says how
// many values it removed. The sweep calls it every minute; it is
// exported so a caller (or a test) can sweep at a time of its choosing.
func (b *Bolt) Sweep(now time.Time) (int, error) {
	b.locks.sweep(now)
	var expired [][]byte
	err := b.db.View(func(tx *bbolt.Tx) error {
		return tx.Bucket(boltBucket).ForEach(func(k, v []byte) error {
			if _, ok, err := read(v, now); !ok || err != nil {
				expired = append(expired, bytes.Clone(k))
			}
			return nil
		})
	})
	if err != nil || len(expired) == 0 {
		return 0, err
	}
	n := 0
	err = b.db.Update(func(tx *bbolt.Tx) error {
		bk := tx.Bucket(boltBucket)
		for _, k := range expired {
			// Put again since it was read: keep the new value.
			if _, ok, err := read(bk.Get(k), now); ok && err == nil {
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
		return 0, b.failed("sweeping", err)
	}
	return n, nil
}

func (b *Bolt) sweepEvery(every time.Duration) {
	defer close(b.swept)
	clock.Every(b.stop, every, func() {
		// A failed sweep is tried again on the next tick; until then
		// expired values only take disk space.
		_, _ = b.Sweep(b.clock.Now())
	})
}

// Close stops the sweep. The file stays open: the ledger closes it, after.
func (b *Bolt) Close() error {
	b.closeOnce.Do(func() {
		close(b.stop)
		<-b.swept
	})
	return nil
}

// Interface guards
var _ Store = (*Bolt)(nil)
