package audit

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"go.uber.org/zap"

	"github.com/toolgate/toolgate/internal/clock"
)

// ErrClosed: Append or Close on a Trail that was closed.
var ErrClosed = errors.New("audit: trail closed")

// syncEvery is how often the writer flushes the file to the disk.
const syncEvery = time.Second

// Trail appends entries to one trail file. Open hands out one Trail per
// call; every Trail of a path in a process shares one writer, so that a
// config reload, whose new config opens the trail while the old one still
// serves calls, appends to one chain. Safe for concurrent use.
type Trail struct {
	w      *writer
	closed atomic.Bool
}

// writers are the open writers by path: the one state of this package that
// outlives a config, shared as Open documents.
var (
	writersMu sync.Mutex
	writers   = map[string]*writer{}
)

// writer is the one appender of a path in this process.
type writer struct {
	path   string
	refs   int // guarded by writersMu
	logger *zap.Logger
	clock  clock.Clock
	f      *os.File

	mu   sync.Mutex // serializes appends: the file's order is the chain's
	prev string     // the hash of the last line written
	buf  bytes.Buffer
	err  error // a failed write: the file's end is unknown until resynced
	done bool

	dirty atomic.Bool // written since the last fsync
	stop  chan struct{}
	wg    sync.WaitGroup
}

// Open opens the trail at path for appending, creating the file (0600) and
// its directory (0700) when missing, and continues its chain from the
// file's last line. Opening a path this process already has open returns a
// Trail on the same writer (the logger of the first Open is kept); the file
// is released when every Trail of it is closed. Another process holding the
// file fails Open at once: two writers would fork the chain. (The lock is
// flock(2) on unix; elsewhere there is none.)
//
// A last line cut short by a crash or a power cut (no newline at its end,
// or not an entry) does not stop Open: it ends the line, logs an error and
// appends an EventTrailResumed entry whose prev is the hash of the torn
// bytes, which Verify accepts. Open reads only the file's first and last
// lines, never the whole file; `toolgate audit verify` checks it all.
//
// Lines are written with one write(2) each and flushed to the disk by the
// writer at most once a second, and on the last Close: a call never waits
// for the disk for its line. A power cut may lose the last second of
// lines; what remains still verifies (a torn last line is recovered).
func Open(path string, logger *zap.Logger) (*Trail, error) {
	if path == "" {
		return nil, errors.New("audit: no file given")
	}
	if logger == nil {
		logger = zap.NewNop()
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("audit: %s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o700); err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	// One key per file, whatever link names it or its directory: a second
	// writer in this process would otherwise fail as if it were another.
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	} else if dir, err := filepath.EvalSymlinks(filepath.Dir(abs)); err == nil {
		abs = filepath.Join(dir, filepath.Base(abs))
	}

	writersMu.Lock()
	defer writersMu.Unlock()
	if w := writers[abs]; w != nil {
		w.refs++
		return &Trail{w: w}, nil
	}
	w, err := openWriter(abs, logger, clock.Real)
	if err != nil {
		return nil, err
	}
	w.refs = 1
	writers[abs] = w
	return &Trail{w: w}, nil
}

func openWriter(path string, logger *zap.Logger, clk clock.Clock) (*writer, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	if err := lock(f); err != nil {
		f.Close()
		if errors.Is(err, errLocked) {
			return nil, fmt.Errorf("audit: %s is in use by another process (one process appends to a trail; give each its own file)", path)
		}
		return nil, fmt.Errorf("audit: locking %s: %w", path, err)
	}
	w := &writer{path: path, logger: logger, clock: clk, f: f, stop: make(chan struct{})}
	w.mu.Lock()
	err = w.resync()
	w.mu.Unlock()
	if err != nil {
		unlock(f)
		f.Close()
		return nil, err
	}
	w.wg.Add(1)
	go w.syncLoop()
	return w, nil
}

// Append writes e as the trail's next line: it stamps the time (when zero,
// and always in UTC) and sets Prev. It returns once the line is written to
// the operating system (not the disk: Open says when that is). A line
// longer than MaxLine, once any input is left out, is not written.
func (t *Trail) Append(e Entry) error {
	if t.closed.Load() {
		return ErrClosed
	}
	return t.w.append(e)
}

// Close releases this Trail; the last Close of a path flushes the file to
// the disk and closes it.
func (t *Trail) Close() error {
	if t.closed.Swap(true) {
		return ErrClosed
	}
	writersMu.Lock()
	defer writersMu.Unlock()
	t.w.refs--
	if t.w.refs > 0 {
		return nil
	}
	delete(writers, t.w.path)
	return t.w.close()
}

func (w *writer) append(e Entry) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return ErrClosed
	}
	if w.err != nil {
		// The last write failed, perhaps halfway: find the file's end
		// again (a torn line is recovered as at Open) before chaining.
		if err := w.resync(); err != nil {
			return err
		}
	}
	if e.Time.IsZero() {
		e.Time = w.clock.Now()
	}
	e.Time = e.Time.UTC()
	if len(e.Input) > 0 && !e.Input.IsValid() {
		e.Input = omitted("not valid JSON", len(e.Input))
	}
	line, err := w.marshal(e)
	if err == nil && len(line) > MaxLine && len(e.Input) > 0 {
		e.Input = omitted("too large", len(e.Input))
		line, err = w.marshal(e)
	}
	if err != nil {
		return fmt.Errorf("audit: %s entry: %w", e.Event, err)
	}
	if len(line) > MaxLine {
		return fmt.Errorf("audit: %s entry of call %q: the line would be %d bytes, over %d", e.Event, e.CallID, len(line), MaxLine)
	}
	return w.write(line, nil)
}

// marshal writes e with Prev set into w.buf and returns the line, without
// its newline. Invalid UTF-8 in a string is written as U+FFFD, so that a
// hostile user id cannot keep a call out of the trail.
func (w *writer) marshal(e Entry) ([]byte, error) {
	e.Prev = w.prev
	w.buf.Reset()
	if err := json.MarshalWrite(&w.buf, e, jsontext.AllowInvalidUTF8(true)); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(w.buf.Bytes(), []byte("\n")), nil
}

// write writes head (when not nil: the end of a torn line), then line and
// its newline, in one write, and chains from line.
func (w *writer) write(line, head []byte) error {
	out := make([]byte, 0, len(head)+len(line)+1)
	out = append(append(append(out, head...), line...), '\n')
	if _, err := w.f.Write(out); err != nil {
		w.err = err
		return fmt.Errorf("audit: writing %s: %w", w.path, err)
	}
	w.prev = hashLine(line)
	w.dirty.Store(true)
	return nil
}

func omitted(why string, n int) jsontext.Value {
	return jsontext.Value(fmt.Sprintf(`{"omitted":%q,"bytes":%d}`, why, n))
}

// syncLoop flushes the file to the disk at most every syncEvery, when
// something was written since the last flush.
func (w *writer) syncLoop() {
	defer w.wg.Done()
	tick := time.NewTicker(syncEvery)
	defer tick.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-tick.C:
			if w.dirty.Swap(false) {
				if err := w.f.Sync(); err != nil {
					w.logger.Error("audit trail not flushed to the disk", zap.String("file", w.path), zap.Error(err))
				}
			}
		}
	}
}

func (w *writer) close() error {
	close(w.stop)
	w.wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.done = true
	err := w.f.Sync()
	unlock(w.f)
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("audit: closing %s: %w", w.path, err)
	}
	return nil
}
