package ledger

import (
	"context"
	"encoding/binary"
	"time"

	"go.etcd.io/bbolt"
)

// spentBucket holds id → until (Unix nanoseconds, big-endian) of the ids
// Spend marked used; the sweeper drops those past until.
var spentBucket = []byte("spent")

// Spend implements Ledger: the check and the put are one transaction of
// the B+tree, committed on its own (there are few: one per card answered
// over MCP), not through the log.
func (b *Bolt) Spend(ctx context.Context, id string, until time.Time) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if err := checkSpend(id); err != nil {
		return false, err
	}
	var v [8]byte
	binary.BigEndian.PutUint64(v[:], uint64(until.UnixNano()))
	now := b.clock.Now()
	var fresh bool
	err := b.db.Update(func(tx *bbolt.Tx) error {
		bk, err := tx.CreateBucketIfNotExists(spentBucket)
		if err != nil {
			return err
		}
		if cur := bk.Get([]byte(id)); len(cur) == 8 && time.Unix(0, int64(binary.BigEndian.Uint64(cur))).After(now) {
			fresh = false
			return nil
		}
		fresh = true
		return bk.Put([]byte(id), v[:])
	})
	if err != nil {
		return false, b.unavailable("spending", id, err)
	}
	return fresh, nil
}

// sweepSpent drops the spent ids past their expiry. There are few (one per
// card answered over MCP), so one transaction does.
func (b *Bolt) sweepSpent(now time.Time) error {
	return b.db.Update(func(tx *bbolt.Tx) error {
		bk := tx.Bucket(spentBucket)
		if bk == nil {
			return nil
		}
		c := bk.Cursor()
		for k, v := c.First(); k != nil; {
			if len(v) == 8 && time.Unix(0, int64(binary.BigEndian.Uint64(v))).After(now) {
				k, v = c.Next()
				continue
			}
			if err := c.Delete(); err != nil {
				return err
			}
			// A cursor's Delete leaves it on the next key's slot.
			k, v = c.Seek(k)
		}
		return nil
	})
}
