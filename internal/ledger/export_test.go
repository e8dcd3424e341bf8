package ledger

import "go.etcd.io/bbolt"

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

// Write commits fn as the ledger's own writes are (write).
func (b *Bolt) Write(fn func(*bbolt.Tx) error) error { return b.write(fn) }

// Queued is how many writes wait for the next commit.
func (b *Bolt) Queued() int {
	b.commitMu.Lock()
	defer b.commitMu.Unlock()
	return len(b.queued)
}

// DB is b's bbolt file.
func (b *Bolt) DB() *bbolt.DB { return b.db }
