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
	"time"

	"github.com/go-json-experiment/json"
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

	// NoFsync lets a commit return once it is written to the operating
	// system, which keeps it across a crash or kill -9 of the gateway and
	// flushes it to the disk later: a power cut or a crash of the machine
	// may then lose a call whose target already ran, and a repeat of it
	// runs it again, or leave the file damaged (bbolt writes a commit's
	// pages, then its meta page, and without a flush between them the
	// disk may keep the second without the first). By default every
	// record waits for the disk (a flush of the log, shared by the
	// records of a group: bolt_wal.go), and every checkpoint too, so a
	// call's first record is on the disk before its target is sent.
	// Default: false.
	NoFsync bool

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
// Each change of a call is a line of its log, checked against the call's
// newest change and flushed with the lines written at the same time: a
// call costs two, its Create and its finishing Update. Checkpoints put the
// newest change of each call in the B+tree (bolt_wal.go).
//
// Calls live in time partitions: one bucket per span of time (an eighth
// of the retention, see partitionSpan), holding the calls whose retention
// counts from within it (keptFrom). Once a partition's end is the
// retention past, every call in it is, and the sweeper drops the bucket
// whole. Sweeping a key at a time, as the ledger did first, read every
// stored call's header on each sweep and deleted the old ones one by one,
// each deletion rewriting a leaf page: under the soak (64 connections, 1m
// retention) the gateway served 2,120 calls/s against 4,493 with nothing
// to sweep, and BenchmarkBoltSteadyState/sweeping/serial took 254-357 µs
// a call against 88-125 µs without sweeping. With partitions it takes
// 126-165 µs against 123-132 (parallel, as a busy gateway batches: 105-109
// against 123-136, a file that only grows being the slower).
//
// A call id is the caller's choice, not time-ordered, so a lookup tries
// each live partition, newest first: about retention/span + 1 of them,
// and more while calls in flight are kept from their deadlines. Each
// Create of a new id looks in all of them; in the soak's profile that
// was 8% of the gateway's CPU. Four spans a retention cut that by half
// and took no less time in the benchmark, but left more of the file free
// after each drop (2,296 bytes a call against 2,145) and keep calls up to
// a quarter of the retention longer. A call that changes stays in its
// partition unless its retention now counts from after the partition's
// end (a card answered later, a call finishing past its deadline's span):
// then it moves. So a call is kept for its retention, and at most one
// span more; never less.
type Bolt struct {
	db        *bbolt.DB
	path      string
	retention time.Duration
	span      time.Duration // of a partition
	clock     clock.Clock
	waiters   *waiters
	logger    *zap.Logger

	wal     *wal        // the changes not yet in the B+tree: see bolt_wal.go
	filters *keyFilters // of the keys in each partition: bolt_filter.go

	// counts and waiting are the calls counted against limits and the
	// calls that wait for a person, in memory under wal.mu, the lock
	// that makes a change one step (change): the file serves one
	// process, and OpenBolt rebuilds both from the stored calls.
	counts  counts
	waiting waitingLists

	stop         chan struct{}
	swept        chan struct{}
	checkpointed chan struct{}
	closeOnce    sync.Once
	closeErr     error
}

// callsBucket held every call (key → stored call, boltValue) before the
// calls were partitioned by time. A file written so is read as it is: its
// calls are found there, move to a partition when they change, and are
// swept a key at a time (sweepOld) until none is left; then the bucket
// goes.
var callsBucket = []byte("calls")

// partitionPrefix starts the name of a partition's bucket, followed by
// its end in Unix nanoseconds, inverted and big-endian, so that the
// newest partition sorts first. (The prefix sorts after "calls" and
// before "spent".)
var partitionPrefix = []byte("calls@")

// partitionSpans is how many partitions one retention spans. More make a
// call's stay past its retention shorter, and each lookup of a key that
// is not stored (every Create) try more buckets: 8 keeps a call at most
// an eighth of the retention longer, for about 9 lookups.
const partitionSpans = 8

// minPartitionSpan keeps a short retention (a test's, a soak's) from
// making a partition per commit.
const minPartitionSpan = time.Second

// partitionSpan is the span of a partition for a retention.
func partitionSpan(retention time.Duration) time.Duration {
	return max(retention/partitionSpans, minPartitionSpan)
}

func partitionName(end int64) []byte {
	name := make([]byte, len(partitionPrefix)+8)
	copy(name, partitionPrefix)
	binary.BigEndian.PutUint64(name[len(partitionPrefix):], ^uint64(end))
	return name
}

// partitionEnd reads a partition's end from its name; ok is false for a
// bucket that is not a partition.
func partitionEnd(name []byte) (end int64, ok bool) {
	rest, ok := bytes.CutPrefix(name, partitionPrefix)
	if !ok || len(rest) != 8 {
		return 0, false
	}
	return int64(^binary.BigEndian.Uint64(rest)), true
}

// endFor is the end of the partition that holds a call kept from t: the
// end of t's span (spans are aligned to the Unix epoch).
func (b *Bolt) endFor(t time.Time) int64 {
	n, span := max(t.UnixNano(), 0), int64(b.span)
	return (n/span + 1) * span
}

// partition is a bucket that holds calls, and its end: a call in it is
// kept from before the end. The bucket of the earlier layout
// (callsBucket) has end 0, so that a call in it moves when it changes.
type partition struct {
	bk  *bbolt.Bucket
	end int64
}

// partitions lists the buckets of calls in tx, newest first, the earlier
// layout's last.
func partitions(tx *bbolt.Tx) []partition {
	var ps []partition
	c := tx.Cursor()
	for name, v := c.Seek(partitionPrefix); name != nil; name, v = c.Next() {
		end, ok := partitionEnd(name)
		if !ok {
			break
		}
		if v == nil { // a bucket
			ps = append(ps, partition{tx.Bucket(name), end})
		}
	}
	if bk := tx.Bucket(callsBucket); bk != nil {
		ps = append(ps, partition{bk, 0})
	}
	return ps
}

// lookup finds key's stored call and the partition that holds it, newest
// first, the earlier layout's bucket last; v is nil when no partition
// does. v is valid for the life of tx. It opens a partition only to look
// in it: a call is most often in the newest (an Update, a Get), and the
// soak's profile showed listing them all first, on every lookup, as half
// of the lookups' cost.
func lookup(tx *bbolt.Tx, key []byte) (p partition, v []byte) {
	return lookupIn(tx, key, func(int64) bool { return true })
}

// lookupIn is lookup in the partitions that mayHold key, by their end
// (the earlier layout's bucket is always read).
func lookupIn(tx *bbolt.Tx, key []byte, mayHold func(end int64) bool) (p partition, v []byte) {
	c := tx.Cursor()
	for name, v := c.Seek(partitionPrefix); name != nil; name, v = c.Next() {
		end, ok := partitionEnd(name)
		if !ok {
			break
		}
		if v != nil || !mayHold(end) { // not a bucket, or surely not there
			continue
		}
		bk := tx.Bucket(name)
		if v := bk.Get(key); v != nil {
			return partition{bk, end}, v
		}
	}
	if bk := tx.Bucket(callsBucket); bk != nil {
		if v := bk.Get(key); v != nil {
			return partition{bk, 0}, v
		}
	}
	return partition{}, nil
}

// put stores data, the call rec as stored, under key: in p if rec is kept
// from before p's end (p.bk nil when the key is new), else in the
// partition of when it is kept from, deleting it from p.
func (b *Bolt) put(tx *bbolt.Tx, p partition, key []byte, rec *Call, data []byte) error {
	from := keptFrom(rec)
	if p.bk != nil && from.UnixNano() < p.end {
		return p.bk.Put(key, data)
	}
	if p.bk != nil {
		if err := p.bk.Delete(key); err != nil {
			return err
		}
	}
	end := b.endFor(from)
	bk, err := tx.CreateBucketIfNotExists(partitionName(end))
	if err != nil {
		return err
	}
	b.filters.add(end, key) // before a reader can find it there
	return bk.Put(key, data)
}

// A stored call is a header and the call's JSON. The header lets a write
// check the state, and the sweeper of the earlier layout the age, without
// decoding the JSON:
//
//	[0]      boltFormat (2; 1 in files written before it)
//	[1]      the state: its index in boltStates plus one
//	[2:10]   Updated in Unix nanoseconds, big-endian
//
// Format 1 follows with the JSON of Call (encodeCall). Format 2 keeps a
// call in less room (1,475 bytes became 1,289 for a 1 KiB result, which
// puts three calls in a 4 KiB page rather than two): it follows with
//
//	[10:18]  Created, as Updated
//	[18:26]  Deadline, as Updated, 0 for none
//
// and the JSON of Call without what the key and the header hold (the key,
// the state and the times: storedCall). A value in any other form is
// damaged (ErrCorrupt).
const (
	boltFormat      = 2
	boltHeaderSize  = 10 // of format 1, and the part both formats share
	boltHeader2Size = 26
)

var boltStates = [...]State{Running, AwaitingClient, ActionRequired, Done}

// storedCall is the JSON of a call in format 2: Call's own members, but
// for those its fields of the same name hide (a shallower field wins, as
// in Go), which are never written. So a member added to Call is stored
// without a change here.
type storedCall struct {
	*Call
	Key      omitted `json:"key,omitzero"`
	State    omitted `json:"state,omitzero"`
	Deadline omitted `json:"deadline,omitzero"`
	Created  omitted `json:"created,omitzero"`
	Updated  omitted `json:"updated,omitzero"`
}

// omitted is a member storedCall leaves out: always zero.
type omitted struct{}

// unixNano is t in Unix nanoseconds, 0 for the zero time.
func unixNano(t time.Time) uint64 {
	if t.IsZero() {
		return 0
	}
	return uint64(t.UnixNano())
}

// fromUnixNano is the time unixNano wrote, in UTC.
func fromUnixNano(v []byte) time.Time {
	n := binary.BigEndian.Uint64(v)
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, int64(n)).UTC()
}

// boltValue is c as stored.
func boltValue(c *Call) ([]byte, error) {
	code := slices.Index(boltStates[:], c.State) + 1
	if code == 0 {
		return nil, fmt.Errorf("ledger: storing call %q in unknown state %q", c.Key, c.State)
	}
	data, err := encodeStored(c.Key, storedCall{Call: c})
	if err != nil {
		return nil, err
	}
	v := make([]byte, boltHeader2Size, boltHeader2Size+len(data))
	v[0], v[1] = boltFormat, byte(code)
	binary.BigEndian.PutUint64(v[2:], unixNano(c.Updated))
	binary.BigEndian.PutUint64(v[10:], unixNano(c.Created))
	binary.BigEndian.PutUint64(v[18:], unixNano(c.Deadline))
	return append(v, data...), nil
}

// boltHeader checks the header of a stored call.
func boltHeader(key string, v []byte) error {
	switch {
	case len(v) == 0 || (v[0] != 1 && v[0] != 2):
		return fmt.Errorf("%w: call %q: not a stored call", ErrCorrupt, key)
	case len(v) < boltHeaderSize || v[0] == 2 && len(v) < boltHeader2Size:
		return fmt.Errorf("%w: call %q: %d bytes, shorter than a header", ErrCorrupt, key, len(v))
	}
	return nil
}

// boltJSON is the JSON part of a stored call whose header is whole.
func boltJSON(v []byte) []byte {
	if v[0] == 2 {
		return v[boltHeader2Size:]
	}
	return v[boltHeaderSize:]
}

// boltCall decodes a stored call.
func boltCall(key string, v []byte) (*Call, error) {
	st, err := boltState(key, v)
	if err != nil {
		return nil, err
	}
	if v[0] == 1 {
		return decodeCall(key, v[boltHeaderSize:])
	}
	c := &Call{Key: key, State: st}
	if err := json.Unmarshal(v[boltHeader2Size:], &storedCall{Call: c}, callOptions); err != nil {
		return nil, fmt.Errorf("%w: call %q: %w", ErrCorrupt, key, err)
	}
	c.Updated, c.Created, c.Deadline = fromUnixNano(v[2:]), fromUnixNano(v[10:]), fromUnixNano(v[18:])
	return c, nil
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

// boltOpenTimeout is the default LockTimeout: it bounds the wait for the
// file lock, so a second gateway pointed at the same file fails with an
// error that names it instead of hanging at start-up.
const boltOpenTimeout = 5 * time.Second

// sweepChunk bounds the deletions in one write transaction of sweepOld, so
// that a large sweep does not hold up the calls being recorded, and the
// keys a sweep holds at a time.
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
		// finding free ones cheap where the array scans.
		FreelistType: bbolt.FreelistMapType,
		// bbolt writes its whole freelist, contiguous, at every commit
		// unless told not to. A dropped partition puts all its pages on
		// it at once, until new calls reuse them: in the soak (1m
		// retention, 64 connections) the gateway served 3,754 calls/s
		// at 309 µs of CPU a call against 8,858 at 149 with nothing to
		// sweep, and its file grew to 1.3 GiB, over 3 KiB a call kept.
		// Not written, 7,970 calls/s at 172 µs against 9,058 at 150,
		// and about 2 KiB a call kept. Opening the file then walks its pages
		// to find the free ones; closeInFlight reads every stored call
		// at open anyway. (Before the partitions, with nothing dropped
		// at once, not writing it saved ~5% a call.)
		NoFreelistSync: true,
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
	// Without fsync, growing the file must not flush it either: bbolt
	// syncs on every growth unless told not to, and those flushes were
	// the ledger's p99 (about 100 ms every few seconds under load). With
	// fsync it must: on ext3/ext4 a file grown without a flush may come
	// back short after a power cut, and the pages committed past its old
	// end lost with it (bbolt's NoGrowSync is safe only elsewhere).
	db.NoSync = opts.NoFsync
	db.NoGrowSync = opts.NoFsync

	b := &Bolt{
		db:           db,
		path:         path,
		retention:    opts.Retention,
		span:         partitionSpan(opts.Retention),
		clock:        clock.Or(opts.Clock),
		waiters:      newWaiters(),
		filters:      newKeyFilters(),
		logger:       opts.Logger,
		waiting:      waitingLists{},
		stop:         make(chan struct{}),
		swept:        make(chan struct{}),
		checkpointed: make(chan struct{}),
	}
	journalPath := path + ".journal"
	journaled, _, err := readJournal(journalPath, b.logger)
	var logged map[string]*Call
	var damaged map[string]bool
	if err == nil {
		logged, damaged, err = readLogs(b.logger, path+walSuffix+walOldSuffix, path+walSuffix)
	}
	if err == nil {
		err = b.closeInFlight(journaled, logged, damaged)
	}
	if err == nil {
		err = b.fillFilters()
	}
	if err == nil {
		err = removeJournal(journalPath)
	}
	if err == nil {
		b.wal, err = openWAL(path+walSuffix, opts.NoFsync, b.logger)
	}
	if err == nil {
		// Replayed and committed: a power cut before the next flush
		// may undo this, and OpenBolt then replays the same lines
		// again, to the same calls.
		err = b.wal.f.Truncate(0)
	}
	if err == nil {
		if rerr := os.Remove(path + walSuffix + walOldSuffix); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
			err = rerr
		}
	}
	if err != nil {
		if b.wal != nil {
			_ = b.wal.f.Close()
		}
		_ = db.Close()
		return nil, fmt.Errorf("opening ledger %s: %w", path, err)
	}

	// A partition ages out every span. While calls are left in the earlier
	// layout's bucket, each sweep reads it through (sweepOld), as every
	// sweep did before: not more often than every 10 minutes.
	go b.sweepEvery(min(b.span, 10*time.Minute))
	go b.checkpointEvery()
	return b, nil
}

// fillFilters adds the keys of every partition to its filter, reading
// the keys alone.
func (b *Bolt) fillFilters() error {
	return b.db.View(func(tx *bbolt.Tx) error {
		for _, p := range partitions(tx) {
			if p.end == 0 {
				continue // the earlier layout's bucket is always read
			}
			c := p.bk.Cursor()
			for k, _ := c.First(); k != nil; k, _ = c.Next() {
				b.filters.add(p.end, k)
			}
		}
		return nil
	})
}

// closeInFlight puts the calls of the log (logged: the newest change of
// each, damaged: those whose newest line could not be read whole) in the
// B+tree, then marks every call left in flight as Done with
// OutcomeUnknown: those the partitions hold as Running or AwaitingClient,
// and those in an earlier version's journal that they do not hold. A
// damaged call does not stop the ledger from opening: it is logged, closed
// as outcome unknown as far as it can be read when it was in flight, and
// otherwise left as it is (a Get of it answers ErrCorrupt).
func (b *Bolt) closeInFlight(journaled, logged map[string]*Call, damaged map[string]bool) error {
	now := b.clock.Now()
	return b.db.Update(func(tx *bbolt.Tx) error {
		for key, c := range logged {
			if err := boltKeyErr(key); err != nil {
				b.logger.Error("ledger: skipping a call in the log that cannot be stored", keyField(key), zap.Error(err))
				continue
			}
			p, _ := lookup(tx, []byte(key))
			data, err := boltValue(c)
			if damaged[key] || err != nil {
				b.closeCall(tx, p, []byte(key), c, now)
				continue
			}
			if err := b.put(tx, p, []byte(key), c, data); err != nil {
				return err
			}
		}
		for key, c := range journaled {
			if err := boltKeyErr(key); err != nil {
				b.logger.Error("ledger: skipping a call in the journal that cannot be stored", keyField(key), zap.Error(err))
				continue
			}
			if _, v := lookup(tx, []byte(key)); v != nil {
				continue
			}
			b.closeCall(tx, partition{}, []byte(key), c, now)
		}
		// A bucket must not change under ForEach: collect, then put.
		type flying struct {
			p   partition
			key []byte
			c   *Call
		}
		var calls []flying
		for _, p := range partitions(tx) {
			err := p.bk.ForEach(func(k, v []byte) error {
				st, err := boltState(string(k), v)
				if err != nil {
					b.logger.Error("ledger: a stored call cannot be read, nor told to be in flight; kept as it is", keyField(string(k)), zap.Error(err))
					return nil
				}
				b.recount(string(k), v, st, now)
				if st != Running && st != AwaitingClient {
					return nil
				}
				c, err := boltCall(string(k), v)
				if err != nil {
					b.logger.Error("ledger: a call in flight cannot be read; closed as outcome unknown", keyField(string(k)), zap.Error(err))
					c = salvage(boltJSON(v))
					c.Key = string(k)
				}
				calls = append(calls, flying{p, bytes.Clone(k), c})
				return nil
			})
			if err != nil {
				return err
			}
		}
		for _, f := range calls {
			b.closeCall(tx, f.p, f.key, f.c, now)
		}
		b.counts.loaded()
		b.waiting.loaded()
		return nil
	})
}

// limitsMember is how a stored call's limits begin: a call without it
// counts against none, and recount does not decode it.
var limitsMember = []byte(`"limits":`)

// countedFields are what recount reads of a stored call.
type countedFields struct {
	User     string    `json:"user"`
	Install  string    `json:"install"`
	Limits   []Limit   `json:"limits"`
	Approval *Approval `json:"approval"`
	Created  time.Time `json:"created"` // format 1; format 2 has it in the header
	Updated  time.Time `json:"updated"`
}

// recount puts a stored call (state st) found at open in the windows of
// its limits and, if it waits for a person, in its caller's waiting list.
// It decodes only the calls that can be in either, and only what they
// need: opening a file of calls without limits costs a search of each
// call's JSON. A call that does not decode counts nowhere. BenchmarkBoltOpen
// (100,000 calls with 1 KiB results, 3 runs on a shared 2-core machine):
// 0.27-0.41 s without limits, 0.67-1.36 s with two limits on every call,
// about 3 µs a call of which the decoding is 2 and the search 0.6.
func (b *Bolt) recount(key string, v []byte, st State, now time.Time) {
	data := boltJSON(v)
	if st != ActionRequired && !bytes.Contains(data, limitsMember) {
		return
	}
	var f countedFields
	if err := json.Unmarshal(data, &f, callOptions); err != nil {
		return
	}
	if v[0] == 2 {
		f.Updated, f.Created = fromUnixNano(v[2:]), fromUnixNano(v[10:])
	}
	b.counts.load(f.Limits, key, f.Created, now)
	if st == ActionRequired {
		b.waiting.set(&Call{Key: key, User: f.User, Install: f.Install, State: st, Approval: f.Approval, Created: f.Created, Updated: f.Updated})
	}
}

// closeCall stores c under key (in p, or moved from it) closed as outcome
// unknown, or logs why it could not (c came from a damaged record).
func (b *Bolt) closeCall(tx *bbolt.Tx, p partition, key []byte, c *Call, now time.Time) {
	data, err := closedValue(c, now)
	if err == nil {
		err = b.put(tx, p, key, c, data)
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

// current is a call's newest change: the one the log holds (p), else the
// B+tree's (v, a stored value), else none.
type current struct {
	p *pending
	v []byte
}

func (c current) found() bool { return c.p != nil || c.v != nil }

func (c current) state(key string) (State, error) {
	if c.p != nil {
		return c.p.state, nil
	}
	return boltState(key, c.v)
}

// call decodes the change, once it is on the disk: not under the log's
// lock.
func (c current) call(key string) (*Call, error) {
	if c.p != nil {
		if err := c.p.wait(); err != nil {
			return nil, fmt.Errorf("%w: call %q: %w", ErrUnavailable, key, err)
		}
		return decodeCall(key, c.p.line)
	}
	return boltCall(key, c.v)
}

// stored is key's value in the B+tree, or nil: lookup with the
// partitions' filters, so that one that surely does not hold key is not
// read.
func (b *Bolt) stored(key string) ([]byte, error) {
	k := []byte(key)
	h := b.filters.hash(k)
	var v []byte
	err := b.db.View(func(tx *bbolt.Tx) error {
		b.filters.mu.RLock()
		defer b.filters.mu.RUnlock()
		_, found := lookupIn(tx, k, func(end int64) bool { return b.filters.mayHold(end, h) })
		v = bytes.Clone(found)
		return nil
	})
	return v, err
}

// change gives decide key's newest change and writes the change it
// returns, if any, as the next: decide and the write are one step for
// every other change of the ledger, so of several concurrent Creates of a
// key exactly one records it (and bbolt locks the file to one process).
// A change the log holds is found under its lock; the B+tree is read
// without it, and again under it only if a checkpoint moved changes there
// meanwhile.
func (b *Bolt) change(key string, decide func(current) (*pending, error)) error {
	w := b.wal
	w.mu.Lock()
	p := w.pending[key]
	var v []byte
	gen := w.gen.Load()
	if p == nil {
		w.mu.Unlock()
		var err error
		if v, err = b.stored(key); err != nil {
			return err
		}
		w.mu.Lock()
		if p = w.pending[key]; p == nil && w.gen.Load() != gen {
			gen = w.gen.Load()
			if v, err = b.stored(key); err != nil {
				w.mu.Unlock()
				return err
			}
		}
	}
	next, err := decide(current{p, v})
	if err != nil || next == nil {
		w.mu.Unlock()
		return err
	}
	// Whether the B+tree may hold key, for the checkpoint (see
	// pending.absentAt).
	switch {
	case p != nil:
		next.absentAt = p.absentAt
	case v == nil:
		next.absentAt = gen + 1
	}
	return w.writeLocked(next)
}

// pendingFor is rec, a stamped copy of the caller's call, as the log
// writes it. The log keeps rec until a checkpoint puts it in the B+tree,
// after the caller has returned: what rec points to is copied too, so
// that nothing of it is shared with the caller.
func pendingFor(rec *Call) (*pending, error) {
	if rec.Result != nil {
		r := *rec.Result
		rec.Result = &r
	}
	if rec.Resume != nil {
		r := *rec.Resume
		rec.Resume = &r
	}
	rec.Card = bytes.Clone(rec.Card)
	rec.Limits = slices.Clone(rec.Limits)
	if rec.Approval != nil {
		a := *rec.Approval
		a.Input, a.Changed = bytes.Clone(a.Input), bytes.Clone(a.Changed)
		rec.Approval = &a
	}
	if !slices.Contains(boltStates[:], rec.State) {
		return nil, fmt.Errorf("ledger: storing call %q in unknown state %q", rec.Key, rec.State)
	}
	line, err := encodeCall(rec)
	if err != nil {
		return nil, err
	}
	return &pending{key: rec.Key, state: rec.State, rec: rec, line: line, flushed: make(chan struct{})}, nil
}

// putPending puts a change of the log in the B+tree (a checkpoint).
func (b *Bolt) putPending(tx *bbolt.Tx, p *pending) error {
	data, err := boltValue(p.rec)
	if err != nil {
		return err
	}
	key := []byte(p.key)
	var part partition
	if p.absentAt != b.wal.gen.Load()+1 {
		part, _ = lookup(tx, key)
	}
	return b.put(tx, part, key, p.rec, data)
}

// Create implements Ledger. The call is on the disk (in the log) when it
// returns created.
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
	if err := checkLimits(c); err != nil {
		return nil, false, err
	}
	rec := stamp(c, b.clock)
	next, err := pendingFor(rec)
	if err != nil {
		return nil, false, err
	}
	var existing current
	var over *OverLimitError
	took := false
	err = b.change(c.Key, func(cur current) (*pending, error) {
		if existing = cur; cur.found() {
			return nil, nil
		}
		if len(rec.Limits) > 0 {
			if over = b.counts.take(rec.Limits, rec.Key, rec.Created, placeLapse(rec, b.retention), b.clock.Now()); over != nil {
				return nil, nil
			}
			took = true
		}
		return next, nil
	})
	if err != nil && took {
		// Not recorded, or not surely: a call that does not run holds
		// no place.
		b.wal.mu.Lock()
		b.counts.giveBack(rec.Limits, rec.Key)
		b.wal.mu.Unlock()
	}
	if err != nil {
		return nil, false, b.unavailable("recording", c.Key, err)
	}
	if over != nil {
		return nil, false, over
	}
	if !existing.found() {
		return nil, true, nil
	}
	cur, err := existing.call(c.Key)
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
	// A change leaves the log's memory only once the B+tree has it.
	if p := b.wal.get(key); p != nil {
		return current{p: p}.call(key)
	}
	v, err := b.stored(key)
	if err != nil {
		return nil, b.unavailable("reading", key, err)
	}
	if v == nil {
		return nil, ErrNotFound
	}
	return boltCall(key, v)
}

// Update implements Ledger. The state check and the write are one step
// (change); waiters are woken only once the change is on the disk, so what
// they read is.
func (b *Bolt) Update(ctx context.Context, c *Call, from State) (*Call, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rec := stamp(c, b.clock)
	next, err := pendingFor(rec)
	if err != nil {
		return nil, err
	}
	var cur current
	var conflict bool
	err = b.change(c.Key, func(found current) (*pending, error) {
		if cur = found; !found.found() {
			return nil, nil
		}
		st, err := found.state(c.Key)
		if err != nil {
			return nil, err
		}
		if conflict = st != from; conflict {
			return nil, nil
		}
		if inFlight(st) && !inFlight(rec.State) {
			b.counts.leaveFlight(rec.Limits, rec.Key)
		}
		if st == ActionRequired || rec.State == ActionRequired {
			b.waiting.change(rec, st)
		}
		return next, nil
	})
	if err != nil {
		return nil, b.unavailable("updating", c.Key, err)
	}
	if !cur.found() {
		return nil, ErrNotFound
	}
	if conflict {
		call, err := cur.call(c.Key)
		if err != nil {
			return nil, err
		}
		return call, ErrConflict
	}
	b.waiters.notify(c.Key)
	out := *rec // the log keeps rec for its checkpoint
	return &out, nil
}

// unavailable wraps a failure of the file as ErrUnavailable.
func (b *Bolt) unavailable(doing, key string, err error) error {
	return fmt.Errorf("%w: %s call %q in %s: %w", ErrUnavailable, doing, key, b.path, err)
}

// Wait implements Ledger.
func (b *Bolt) Wait(ctx context.Context, key string, state State) (*Call, error) {
	return b.waiters.wait(ctx, key, state, b.Get)
}

// Sweep removes the ids Spend marked that have expired, and the calls
// kept for the retention (from their last change; for a call in flight,
// from its deadline if later: keptFrom), and says how many calls it
// removed. A call is removed with its partition, once the partition's end
// is the retention past: up to a partition's span after its own time. The
// sweeper calls it on its own; it is exported so a caller (or a test) can
// sweep at a time of its choosing.
func (b *Bolt) Sweep(now time.Time) (int, error) {
	// What it drops, it finds in the B+tree.
	if err := b.wal.checkpoint(b.putPending, b.db); err != nil {
		return 0, fmt.Errorf("sweeping ledger %s: %w", b.path, err)
	}
	if err := b.sweepSpent(now); err != nil {
		return 0, fmt.Errorf("sweeping ledger %s: %w", b.path, err)
	}
	b.wal.mu.Lock()
	b.counts.sweep(now)
	b.waiting.sweep(now.Add(-b.retention))
	b.wal.mu.Unlock()
	cutoff := now.Add(-b.retention).UnixNano()
	var names [][]byte
	err := b.db.View(func(tx *bbolt.Tx) error {
		c := tx.Cursor()
		for name, v := c.Seek(partitionPrefix); name != nil; name, v = c.Next() {
			end, ok := partitionEnd(name)
			if !ok {
				break
			}
			// A call in a partition is kept from before its end: from
			// the end on, the retention has passed for all of them. (A
			// damaged one goes too: where it is says its age.)
			if v == nil && end <= cutoff {
				names = append(names, bytes.Clone(name))
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("sweeping ledger %s: %w", b.path, err)
	}
	removed := 0
	for _, name := range names {
		// One partition a transaction: dropping one reads its pages'
		// headers to free them, while calls wait to be recorded.
		n := 0
		err := b.db.Update(func(tx *bbolt.Tx) error {
			bk := tx.Bucket(name)
			if bk == nil {
				return nil
			}
			// Stats reads the pages' headers, not the calls, as
			// DeleteBucket does to free them.
			n = bk.Stats().KeyN
			return tx.DeleteBucket(name)
		})
		if err != nil {
			return removed, fmt.Errorf("sweeping ledger %s: %w", b.path, err)
		}
		end, _ := partitionEnd(name)
		b.filters.drop(end)
		removed += n
	}
	n, err := b.sweepOld(now)
	return removed + n, err
}

// sweepOld removes from the earlier layout's bucket the calls kept for
// the retention, reading each one's header, and the bucket once it is
// empty.
func (b *Bolt) sweepOld(now time.Time) (int, error) {
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
			bk := tx.Bucket(callsBucket)
			if bk == nil {
				return nil
			}
			c := bk.Cursor()
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
			break
		}
		after = chunk[len(chunk)-1]
		n := 0
		err = b.db.Update(func(tx *bbolt.Tx) error {
			bk := tx.Bucket(callsBucket)
			for _, k := range chunk {
				if bk == nil {
					break
				}
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
	err := b.db.Update(func(tx *bbolt.Tx) error {
		bk := tx.Bucket(callsBucket)
		if bk == nil {
			return nil
		}
		if k, _ := bk.Cursor().First(); k != nil {
			return nil
		}
		return tx.DeleteBucket(callsBucket)
	})
	if err != nil {
		return removed, fmt.Errorf("sweeping ledger %s: %w", b.path, err)
	}
	return removed, nil
}

func (b *Bolt) sweepEvery(every time.Duration) {
	defer close(b.swept)
	clock.Every(b.stop, every, func() {
		// A failed sweep is tried again on the next tick; until then old
		// calls only take disk space.
		_, _ = b.Sweep(b.clock.Now())
	})
}

// checkpointEvery checkpoints the log when it is full (wal.kick) or on a
// timer, until Close.
func (b *Bolt) checkpointEvery() {
	defer close(b.checkpointed)
	t := time.NewTicker(walCheckpointEvery)
	defer t.Stop()
	var failing string
	for {
		select {
		case <-b.stop:
			return
		case <-t.C:
		case <-b.wal.kick:
		}
		// A failed checkpoint leaves the changes in the log, and is
		// tried again; it is logged once until it succeeds.
		err := b.wal.checkpoint(b.putPending, b.db)
		switch {
		case err != nil && err.Error() != failing:
			failing = err.Error()
			b.logger.Error("ledger: checkpoint failed; the calls stay in the log", zap.String("ledger", b.path), zap.Error(err))
		case err == nil:
			failing = ""
		}
	}
}

// Records implements Ledger: the bolt ledger keeps every call.
func (b *Bolt) Records() bool { return true }

// DB is b's bbolt file, for state kept beside the calls in a bucket of
// its own (the connections' tokens): the ledger's sweep and checkpoints
// touch only its own buckets. It stays b's: Close closes it.
func (b *Bolt) DB() *bbolt.DB { return b.db }

// Close stops the sweeper, puts the log's changes in the B+tree, releases
// every Wait and closes the file.

func (b *Bolt) Close() error {
	b.closeOnce.Do(func() {
		close(b.stop)
		<-b.swept
		<-b.checkpointed
		errs := []error{b.wal.checkpoint(b.putPending, b.db)}
		b.waiters.close()
		errs = append(errs, b.wal.close(), b.db.Close())
		if err := errors.Join(errs...); err != nil {
			b.closeErr = fmt.Errorf("closing ledger %s: %w", b.path, err)
		}
	})
	return b.closeErr
}

// Interface guards
var _ Ledger = (*Bolt)(nil)
