package audit

import (
	"bytes"
	"fmt"
	"io"
	"os"

	"go.uber.org/zap"
)

// window is how much of each end of the file resync reads: room for two
// lines of MaxLine and their newlines.
const window = 2 * (MaxLine + 1)

// resync finds where the chain stands from the file's last line, and
// recovers a torn last line (Open). It runs with w.mu held.
func (w *writer) resync() error {
	st, err := w.f.Stat()
	if err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	size := st.Size()
	if size == 0 {
		w.prev, w.err = zeroHash, nil
		return nil
	}
	head, err := readAt(w.f, 0, min(size, window))
	if err != nil {
		return err
	}
	if !isTrail(head, size) {
		return fmt.Errorf("audit: %s is not an audit trail (its first line is not an entry): give a new file, or check it with toolgate audit verify", w.path)
	}
	tail := head
	if size > window {
		if tail, err = readAt(w.f, size-window, window); err != nil {
			return err
		}
	}
	ended := tail[len(tail)-1] == '\n'
	body := bytes.TrimSuffix(tail, []byte("\n"))
	i := bytes.LastIndexByte(body, '\n')
	last := body[i+1:]
	if (i < 0 && size > window) || len(last) > MaxLine {
		return fmt.Errorf("audit: %s: the last line is longer than %d bytes, which no trail has: give a new file, or check it with toolgate audit verify", w.path, MaxLine)
	}
	w.err = nil
	w.prev = hashLine(last)
	if ended {
		if _, err := parseLine(last); err == nil {
			return nil
		}
	}
	// A torn line: end it and chain on from its bytes, as Verify accepts.
	if _, err := parseLine(last); err == nil {
		w.logger.Warn("audit trail's last line had no newline: ended it", zap.String("file", w.path))
	} else {
		w.logger.Error("audit trail's last line is torn (a write cut short): ended it and chained on from it; its content is lost",
			zap.String("file", w.path), zap.Int("bytes", len(last)))
	}
	var end []byte
	if !ended {
		end = []byte("\n")
	}
	line, err := w.marshal(Entry{Time: w.clock.Now().UTC(), Event: EventTrailResumed, Decision: DecisionTornLine})
	if err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	return w.write(line, end)
}

// isTrail reports whether a file of size bytes, whose first bytes are
// head, reads as a trail: its first line is an entry, or a torn line
// followed by the trail_resumed entry that chains from it, or the file's
// only line, not ended (a first write cut short, which resync recovers). It keeps
// Open from appending to a file that is something else.
func isTrail(head []byte, size int64) bool {
	l1, rest, found := bytes.Cut(head, []byte("\n"))
	if _, err := parseLine(l1); err == nil {
		return true
	}
	if !found {
		return int64(len(head)) == size
	}
	if len(rest) == 0 {
		// One whole line that is not an entry: a write is cut before
		// its newline, so this is some other file.
		return false
	}
	l2, _, _ := bytes.Cut(rest, []byte("\n"))
	e, err := parseLine(l2)
	return err == nil && resumesTorn(e) && e.Prev == hashLine(l1)
}

func readAt(f *os.File, off, n int64) ([]byte, error) {
	buf := make([]byte, n)
	if _, err := f.ReadAt(buf, off); err != nil && err != io.EOF {
		return nil, fmt.Errorf("audit: reading %s: %w", f.Name(), err)
	}
	return buf, nil
}
