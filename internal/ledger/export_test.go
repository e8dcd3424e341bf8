package ledger

import (
	"time"

	"github.com/toolgate/toolgate/internal/clock"

	"go.etcd.io/bbolt"
)

// StoredCalls counts the calls b holds, for the benchmarks of package
// ledger_test.
func (b *Bolt) StoredCalls() int {
	n := 0
	_ = b.db.View(func(tx *bbolt.Tx) error {
		for _, p := range partitions(tx) {
			n += p.bk.Stats().KeyN
		}
		return nil
	})
	return n
}

// Fsyncs says whether b's commits and the file's growth wait for the disk.
func (b *Bolt) Fsyncs() (commits, growth bool) {
	return !b.db.NoSync, !b.db.NoGrowSync
}

// Commits is how many write transactions b's file has committed: each
// bumps the transaction id.
func (b *Bolt) Commits() int {
	var id int
	_ = b.db.View(func(tx *bbolt.Tx) error {
		id = tx.ID()
		return nil
	})
	return id
}

// Flushes is how many groups of changes b has written to its log.
func (b *Bolt) Flushes() int { return int(b.wal.flushes.Load()) }

// Checkpoint puts the changes of b's log in its B+tree now.
func (b *Bolt) Checkpoint() error { return b.wal.checkpoint(b.putPending, b.db) }

// SetCheckpoints sets when the bolt ledgers opened after it checkpoint
// their logs, until the test ends.
func SetCheckpoints(t interface{ Cleanup(func()) }, lines int, every time.Duration) {
	oldLines, oldEvery := walCheckpointLines, walCheckpointEvery
	walCheckpointLines, walCheckpointEvery = lines, every
	t.Cleanup(func() { walCheckpointLines, walCheckpointEvery = oldLines, oldEvery })
}

// BreakLog closes b's log file under it, so that its next write fails.
func (b *Bolt) BreakLog() { _ = b.wal.f.Close() }

// NewOff is a ledger off of its own, counting limits by clk: Off's counts
// are the process's.
func NewOff(clk clock.Clock) Ledger { return off{counts: new(lockedCounts), clock: clk} }

// Counted is how many calls b holds counted against the limit key: in
// its window, or holding a place.
func (b *Bolt) Counted(key string) int {
	b.wal.mu.Lock()
	defer b.wal.mu.Unlock()
	n := len(b.counts.places[key])
	if w := b.counts.windows[key]; w != nil {
		n += len(w.calls)
	}
	return n
}

// Listed is how many calls b's waiting list of user in install holds.
func (b *Bolt) Listed(user, install string) int {
	b.wal.mu.Lock()
	defer b.wal.mu.Unlock()
	return len(b.waiting.keys(user, install))
}
