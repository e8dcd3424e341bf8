package ledger

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"go.uber.org/zap"
)

// Earlier versions of the bolt ledger kept the calls in flight in a
// journal beside the file (path.journal, and path.journal.next while it
// was rewritten), one JSON line per change, and wrote a call to the
// B+tree only when it finished or paused. (Under the load harness the
// gateway served as many calls with bbolt's Batch alone, so the journal
// went.) A call in that journal that the B+tree does not hold was in
// flight when that version stopped: OpenBolt closes it as outcome unknown,
// as it does the calls the B+tree holds in flight, and then removes the
// journal, so that an upgrade does not run a call id again.
//
// readJournal returns the calls in the journal at path and in a rewrite of
// it that a crash may have left (path.next), the last line of a key
// winning. A torn last line (a crash mid-write) is skipped: the call on it
// was not yet sent. A damaged line elsewhere is logged, and the call it
// names, if its key can be read, is returned as far as it can be read
// (salvage), so that it is closed as outcome unknown: one bad line must
// not keep the ledger from opening, nor let its call run again.
//
// The ledger's log (bolt_wal.go) is written in the same form, and read so
// too; damaged says which calls' newest line was damaged (salvaged).
func readJournal(path string, logger *zap.Logger) (calls map[string]*Call, damaged map[string]bool, err error) {
	return readLogs(logger, path, path+".next")
}

// readLogs reads the journal files at paths, in order, as readJournal.
func readLogs(logger *zap.Logger, paths ...string) (calls map[string]*Call, damaged map[string]bool, err error) {
	calls = map[string]*Call{}
	damaged = map[string]bool{}
	salvaged := map[string]*Call{}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, nil, fmt.Errorf("reading journal: %w", err)
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
				delete(salvaged, c.Key)
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
		damaged[key] = true
	}
	return calls, damaged, nil
}

// removeJournal removes the journal files at path, once their calls are
// in the B+tree.
func removeJournal(path string) error {
	for _, p := range []string{path, path + ".next"} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("removing journal: %w", err)
		}
	}
	return nil
}
