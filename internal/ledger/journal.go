package ledger

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"go.uber.org/zap"
)

// journal is the bolt ledger's log of calls in flight. A new call is
// appended to it, one write of one line, before its target is sent; the
// B+tree gets the call once, when it finishes or pauses. A B+tree commit
// costs several page writes, a journal line one write, so a call costs one
// commit instead of two.
//
// After a crash, a call in the journal that the B+tree does not hold was in
// flight: it is closed as outcome unknown when the ledger opens. The
// journal is then started afresh, and again whenever it grows past
// journalRotateSize, holding only the calls still in flight.
type journal struct {
	path  string
	f     *os.File
	size  int64
	fsync bool
}

// journalRotateSize is the size past which the journal is rewritten with
// only the calls in flight.
var journalRotateSize int64 = 16 << 20

// readJournal returns the calls in the journal at path and in a rewrite of
// it that a crash may have left (path.next), the last line of a key
// winning. A torn last line (a crash mid-write) is skipped: the call on it
// was not yet sent. A damaged line elsewhere is logged, and the call it
// names, if its key can be read, is returned as far as it can be read
// (salvage), so that it is closed as outcome unknown: one bad line must
// not keep the ledger from opening, nor let its call run again.
func readJournal(path string, logger *zap.Logger) (map[string]*Call, error) {
	calls := map[string]*Call{}
	salvaged := map[string]*Call{}
	for _, p := range []string{path, path + ".next"} {
		data, err := os.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading journal: %w", err)
		}
		n := 0
		for line := range bytes.Lines(data) {
			n++
			body, complete := bytes.CutSuffix(line, []byte{'\n'})
			if len(body) == 0 {
				continue
			}
			c, err := decodeCall("", body)
			if err == nil {
				calls[c.Key] = c
				continue
			}
			if !complete {
				logger.Info("ledger journal: skipping a torn last line, a call not yet sent when the process stopped",
					zap.String("journal", p), zap.Int("line", n))
				continue
			}
			c = salvage(body)
			if c.Key == "" {
				logger.Error("ledger journal: skipping a damaged line that names no call",
					zap.String("journal", p), zap.Int("line", n), zap.Error(err))
				continue
			}
			logger.Error("ledger journal: a damaged line; the call it names is closed as outcome unknown",
				zap.String("journal", p), zap.Int("line", n), keyField(c.Key), zap.Error(err))
			salvaged[c.Key] = c
		}
	}
	for key, c := range salvaged {
		if calls[key] == nil {
			calls[key] = c
		}
	}
	return calls, nil
}

// createJournal starts the journal at path afresh with the given calls.
// The new file is complete (and synced, with fsync) before it replaces the
// old one.
func createJournal(path string, fsync bool, calls []*Call) (*journal, error) {
	next := path + ".next"
	f, err := os.OpenFile(next, os.O_CREATE|os.O_TRUNC|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("creating journal: %w", err)
	}
	j := &journal{path: path, f: f, fsync: fsync}
	var buf []byte
	for _, c := range calls {
		line, err := encodeCall(c)
		if err != nil {
			_ = f.Close()
			return nil, err
		}
		buf = append(append(buf, line...), '\n')
	}
	if _, err := f.Write(buf); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("writing journal: %w", err)
	}
	j.size = int64(len(buf))
	if fsync {
		if err := f.Sync(); err != nil {
			_ = f.Close()
			return nil, fmt.Errorf("syncing journal: %w", err)
		}
	}
	if err := os.Rename(next, path); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("replacing journal: %w", err)
	}
	return j, nil
}

// append writes c as one line.
func (j *journal) append(c *Call) error {
	line, err := encodeCall(c)
	if err != nil {
		return err
	}
	line = append(line, '\n')
	n, err := j.f.Write(line)
	j.size += int64(n)
	if err != nil {
		return fmt.Errorf("writing journal: %w", err)
	}
	if j.fsync {
		if err := j.f.Sync(); err != nil {
			return fmt.Errorf("syncing journal: %w", err)
		}
	}
	return nil
}

func (j *journal) close() error {
	return j.f.Close()
}
