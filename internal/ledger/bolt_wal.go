package ledger

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/bbolt"
	"go.uber.org/zap"
)

// The bolt ledger writes each change of a call to a log beside its file
// (path.wal, one JSON line a change: encodeCall) and to the B+tree only
// later, many changes in one transaction (a checkpoint). A change is
// durable once its line is flushed: one disk flush, shared by every change
// written at the same time (group commit), where a bbolt commit takes two
// (its pages, then its meta page) and rewrites a leaf page for each random
// key. Under the load harness at 32 connections, with bbolt commits shared
// the same way, the gateway served 0.50× plain reverse_proxy's requests;
// the figures since are in docs/operations.md.
//
// Until a checkpoint has put them in the B+tree, the changes the log holds
// are kept in memory (pending, newest per key), where the ledger reads
// them first. A checkpoint starts a new log, puts each key's newest change
// in the B+tree in one transaction and then removes the old log (see
// checkpoint). So the logs only ever hold changes at least as new as the
// B+tree's, and OpenBolt replays them over it, oldest first, before it
// closes the calls left in flight.

// walSuffix names the log beside the ledger file, and walOldSuffix the
// log being checkpointed beside that.
const (
	walSuffix    = ".wal"
	walOldSuffix = ".old"
)

// walCheckpointLines is how many lines the log takes before a checkpoint
// (or walCheckpointEvery, whichever comes first): more make each
// checkpoint put more calls in one transaction, and keep more of them in
// memory until it does.
var (
	walCheckpointLines = 2048
	walCheckpointEvery = 250 * time.Millisecond
)

// pending is a change of a call that the log holds, or will: its line and
// the call as recorded, for the checkpoint.
type pending struct {
	key   string
	state State
	rec   *Call
	line  []byte // encodeCall(rec)

	// absentAt is, plus one, the number of checkpoints committed when
	// the B+tree was found not to hold key (0: it may). While no
	// checkpoint has committed since, it still does not, and the
	// checkpoint puts the change without looking for the key in every
	// partition (as each Create of a new key did already).
	absentAt uint64

	// flushed is closed once the change is on the disk (err nil) or
	// failed to be: until then only the writer that made it acts on it,
	// and a reader waits, so that nothing a reader is told is lost in a
	// crash.
	flushed chan struct{}
	err     error
}

// wait returns once p is flushed, with its error.
func (p *pending) wait() error {
	<-p.flushed
	return p.err
}

// walWrite is a change waiting to be written to the log. done is closed
// once p is flushed (p.err its outcome), or once it is to lead group, the
// next write.
type walWrite struct {
	p     *pending
	group []*walWrite
	done  chan struct{}
}

// wal is the log and the changes it holds.
type wal struct {
	path   string
	noSync bool
	logger *zap.Logger

	// mu guards pending, the queue of writes and whether one is under
	// way, and failed.
	mu      sync.Mutex
	pending map[string]*pending
	writing bool
	queued  []*walWrite
	// failed is the error of a write or flush of the log that failed:
	// what reached the disk is then unknown, so every later change
	// fails too, until the process restarts and replays the log.
	failed error

	// gen counts the checkpoints that took changes out of pending, so a
	// reader that looked in the B+tree before taking mu can tell whether
	// one moved a change there meanwhile.
	gen atomic.Uint64

	// fileMu is held while a group is written to the file, and while
	// a checkpoint renames it. It guards f and lines.
	fileMu sync.Mutex
	f      *os.File
	lines  int // in f

	// checkpointMu makes checkpoints take turns; it guards old, whether
	// path.old holds lines not yet committed to the B+tree.
	checkpointMu sync.Mutex
	old          bool

	flushes atomic.Int64 // groups written, for the tests
	kick    chan struct{}
}

// openWAL opens the log at path for appending, creating it (and making its
// name durable) if needed.
func openWAL(path string, noSync bool, logger *zap.Logger) (*wal, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening the ledger's log: %w", err)
	}
	w := &wal{
		path:    path,
		noSync:  noSync,
		logger:  logger,
		pending: make(map[string]*pending),
		f:       f,
		kick:    make(chan struct{}, 1),
	}
	if !noSync {
		if err := syncDir(filepath.Dir(path)); err != nil {
			_ = f.Close()
			return nil, fmt.Errorf("opening the ledger's log: %w", err)
		}
	}
	return w, nil
}

// syncDir flushes a directory, so that a file just created in it is found
// after a power cut.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// writeLocked makes p key's newest change, appends it to the log and
// returns once it is flushed (written, with noSync). It is called with mu
// held, and releases it. A write that finds none under way writes at once,
// alone; those that come meanwhile wait for it and then share the next,
// all of them: a flush costs the same however many lines it carries.
func (w *wal) writeLocked(p *pending) error {
	if w.failed != nil {
		err := w.failed
		w.mu.Unlock()
		return err
	}
	w.pending[p.key] = p
	ww := &walWrite{p: p}
	if w.writing {
		ww.done = make(chan struct{})
		w.queued = append(w.queued, ww)
		w.mu.Unlock()
		<-ww.done
		if ww.group == nil {
			return p.err
		}
	} else {
		w.writing = true
		w.mu.Unlock()
		ww.group = []*walWrite{ww}
	}
	w.writeGroup(ww.group)
	return p.err
}

// writeGroup writes the lines of group with one write and one flush,
// releases the writes it led and hands the next write to those that
// queued meanwhile.
func (w *wal) writeGroup(group []*walWrite) {
	size := 0
	for _, ww := range group {
		size += len(ww.p.line) + 1
	}
	buf := make([]byte, 0, size)
	for _, ww := range group {
		buf = append(append(buf, ww.p.line...), '\n')
	}
	w.fileMu.Lock()
	_, err := w.f.Write(buf)
	if err == nil && !w.noSync {
		err = syncData(w.f)
	}
	w.lines += len(group)
	full := w.lines >= walCheckpointLines
	w.fileMu.Unlock()
	w.flushes.Add(1)
	if err != nil {
		err = w.fail(fmt.Errorf("writing the ledger's log %s: %w", w.path, err))
	}

	w.mu.Lock()
	next := w.queued
	w.queued = nil
	w.writing = len(next) > 0
	w.mu.Unlock()

	for _, ww := range group {
		ww.p.err = err
		close(ww.p.flushed)
	}
	for _, ww := range group[1:] {
		close(ww.done)
	}
	if len(next) > 0 {
		next[0].group = next
		close(next[0].done)
	}
	if full {
		select {
		case w.kick <- struct{}{}:
		default:
		}
	}
}

// get returns key's change that the log holds, or nil.
func (w *wal) get(key string) *pending {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.pending[key]
}

// checkpoint puts each key's newest change in the B+tree of db, in one
// transaction, without holding up the changes that come meanwhile: it
// renames the log to path.old and goes on in a new one (a moment's pause
// for the rename to reach the disk), commits, and removes path.old. Its
// lines are then all in the B+tree, or older than what is: a change queued
// but not yet written when the log was renamed is put too, and written to
// the new log after. A failed commit leaves path.old, and the next
// checkpoint commits again before it renames anything.
func (w *wal) checkpoint(put func(tx *bbolt.Tx, p *pending) error, db *bbolt.DB) error {
	w.checkpointMu.Lock()
	defer w.checkpointMu.Unlock()
	w.fileMu.Lock()
	w.mu.Lock()
	if w.failed != nil || len(w.pending) == 0 {
		w.mu.Unlock()
		w.fileMu.Unlock()
		return w.failed
	}
	batch := make([]*pending, 0, len(w.pending))
	for _, p := range w.pending {
		batch = append(batch, p)
	}
	w.mu.Unlock()
	if !w.old {
		if err := w.rotate(); err != nil {
			w.fileMu.Unlock()
			return w.fail(err)
		}
	}
	w.fileMu.Unlock()

	err := db.Update(func(tx *bbolt.Tx) error {
		for _, p := range batch {
			if err := put(tx, p); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("checkpointing the ledger's log: %w", err)
	}
	w.old = false
	if err := os.Remove(w.path + walOldSuffix); err != nil {
		// The next rename replaces it; a replay of it is harmless.
		w.logger.Warn("ledger: removing the checkpointed log", zap.Error(err))
	}

	w.mu.Lock()
	for _, p := range batch {
		if w.pending[p.key] == p {
			delete(w.pending, p.key)
		}
	}
	w.gen.Add(1)
	w.mu.Unlock()
	return nil
}

// rotate renames the log to path.old and opens a new one, under fileMu.
func (w *wal) rotate() error {
	if err := os.Rename(w.path, w.path+walOldSuffix); err != nil {
		return fmt.Errorf("renaming the ledger's log %s: %w", w.path, err)
	}
	f, err := os.OpenFile(w.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("opening the ledger's log %s: %w", w.path, err)
	}
	if !w.noSync {
		// A line flushed to the new log must not be lost with its name.
		if err := syncDir(filepath.Dir(w.path)); err != nil {
			_ = f.Close()
			return fmt.Errorf("opening the ledger's log %s: %w", w.path, err)
		}
	}
	_ = w.f.Close()
	w.f, w.lines, w.old = f, 0, true
	return nil
}

// fail makes err the log's failure, for every later change.
func (w *wal) fail(err error) error {
	w.mu.Lock()
	if w.failed == nil {
		w.failed = err
	}
	w.mu.Unlock()
	w.logger.Error("ledger: the log failed; the ledger records nothing more until the gateway restarts", zap.Error(err))
	return err
}

// close closes the log's file, and removes it when empty.
func (w *wal) close() error {
	w.fileMu.Lock()
	defer w.fileMu.Unlock()
	err := w.f.Close()
	w.mu.Lock()
	empty := w.failed == nil && len(w.pending) == 0
	w.mu.Unlock()
	if err == nil && empty {
		if rerr := os.Remove(w.path); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
			err = rerr
		}
	}
	return err
}
