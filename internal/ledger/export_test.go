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
