package ledger

import (
	"context"
	"errors"
	"slices"
	"time"
)

// waitingLists are the calls of each caller (user and install, as
// waitingKey joins them) that wait for a person, oldest first: the bolt
// ledger's index for Waiting, kept in memory under its log's lock (each
// Update that enters or leaves ActionRequired changes it in the same step
// as its record) and rebuilt at open from the stored calls.
type waitingLists map[string][]waitingEntry

type waitingEntry struct {
	counted
	// kept is when the call's retention counts from (keptFrom): once
	// that is a retention past, the sweeper drops the call, and Sweep the
	// entry.
	kept time.Time
}

// waitingKey names a caller's list.
func waitingKey(user, install string) string { return user + "\x1f" + install }

// set puts c, which waits for a person, in its caller's list (again:
// its retention may count from later now).
func (w waitingLists) set(c *Call) {
	k := waitingKey(c.User, c.Install)
	list := w[k]
	e := waitingEntry{counted{c.Created, c.Key}, keptFrom(c)}
	i, found := slices.BinarySearchFunc(list, e, func(a, b waitingEntry) int { return compareCounted(a.counted, b.counted) })
	if found {
		list[i] = e
		return
	}
	w[k] = slices.Insert(list, i, e)
}

// remove takes the call key out of the list of user in install.
func (w waitingLists) remove(user, install, key string) {
	k := waitingKey(user, install)
	list := slices.DeleteFunc(w[k], func(e waitingEntry) bool { return e.key == key })
	if len(list) == 0 {
		delete(w, k)
	} else {
		w[k] = list
	}
}

// change keeps the lists in step with an Update of c from the state
// from.
func (w waitingLists) change(c *Call, from State) {
	switch {
	case c.State == ActionRequired:
		w.set(c)
	case from == ActionRequired:
		w.remove(c.User, c.Install, c.Key)
	}
}

// keys are the call keys of user in install, oldest first.
func (w waitingLists) keys(user, install string) []string {
	list := w[waitingKey(user, install)]
	keys := make([]string, len(list))
	for i, e := range list {
		keys[i] = e.key
	}
	return keys
}

// sweep drops the entries whose calls are kept from before cutoff: the
// sweeper drops them (or has).
func (w waitingLists) sweep(cutoff time.Time) {
	for k, list := range w {
		list = slices.DeleteFunc(list, func(e waitingEntry) bool { return e.kept.Before(cutoff) })
		if len(list) == 0 {
			delete(w, k)
		} else {
			w[k] = list
		}
	}
}

// loaded sorts the lists filled at open.
func (w waitingLists) loaded() {
	for _, list := range w {
		slices.SortFunc(list, func(a, b waitingEntry) int { return compareCounted(a.counted, b.counted) })
	}
}

// Waiting implements Ledger. The calls are read whole, as Get reads them;
// an entry whose call is gone or damaged is skipped and dropped (one that
// no longer waits is not listed: Update takes it out).
func (b *Bolt) Waiting(ctx context.Context, user, install string) ([]*Call, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	b.wal.mu.Lock()
	keys := b.waiting.keys(user, install)
	b.wal.mu.Unlock()
	var out []*Call
	for _, key := range keys {
		if len(out) == MaxWaiting {
			break
		}
		c, err := b.Get(ctx, key)
		switch {
		case errors.Is(err, ErrNotFound), errors.Is(err, ErrCorrupt):
			// Gone, or it cannot be shown nor answered.
			b.dropWaiting(user, install, key)
			continue
		case err != nil:
			return nil, err
		}
		if c.State != ActionRequired || c.User != user || c.Install != install {
			continue
		}
		out = append(out, c)
	}
	return out, nil
}

// dropWaiting takes a call that is gone out of the lists, unless a change
// of it came meanwhile (the log holds it).
func (b *Bolt) dropWaiting(user, install, key string) {
	b.wal.mu.Lock()
	defer b.wal.mu.Unlock()
	if b.wal.pending[key] == nil {
		b.waiting.remove(user, install, key)
	}
}
