package audit

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

func open(t *testing.T, path string) *Trail {
	t.Helper()
	tr, err := Open(path, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func appendCalls(t *testing.T, tr *Trail, ids ...string) {
	t.Helper()
	for _, id := range ids {
		if err := tr.Append(Entry{Event: EventCall, CallID: id, Tool: "add_note", Outcome: "ok", Status: 201, DurationMS: 1.5}); err != nil {
			t.Fatal(err)
		}
	}
}

// verifyFile verifies the trail at path and returns its entries.
func verifyFile(t *testing.T, path string) (Report, []Entry) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Verify(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("Verify: %v\n%s", err, data)
	}
	var out []Entry
	for _, l := range lines(data) {
		e, _ := parseLine(l)
		out = append(out, e)
	}
	return rep, out
}

func callIDs(es []Entry) []string {
	var ids []string
	for _, e := range es {
		if e.CallID != "" {
			ids = append(ids, e.CallID)
		}
	}
	return ids
}

func TestAppendLine(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "logs")
	path := filepath.Join(dir, "audit.jsonl")
	tr := open(t, path)
	at := time.Date(2026, 12, 2, 11, 0, 0, 123456789, time.FixedZone("CET", 3600))
	if err := tr.Append(Entry{Time: at, Event: EventRefused, CallID: "c1", Tool: "add_note", User: "u_1", Decision: "over_limit", Limit: "20/1h per user"}); err != nil {
		t.Fatal(err)
	}
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	want := `{"time":"2026-12-02T10:00:00.123456789Z","event":"refused","callId":"c1","tool":"add_note","user":"u_1","decision":"over_limit","limit":"20/1h per user","prev":"` + zeroHash + `"}` + "\n"
	if string(data) != want {
		t.Fatalf("line\n%s\nwant\n%s", data, want)
	}
	for p, mode := range map[string]os.FileMode{path: 0o600, dir: 0o700 | os.ModeDir} {
		if st, err := os.Stat(p); err != nil || st.Mode() != mode {
			t.Errorf("%s: mode %v, want %v (%v)", p, st.Mode(), mode, err)
		}
	}
	if err := tr.Append(Entry{Event: EventCall}); !errors.Is(err, ErrClosed) {
		t.Errorf("Append after Close: %v", err)
	}
	if err := tr.Close(); !errors.Is(err, ErrClosed) {
		t.Errorf("Close twice: %v", err)
	}
}

// TestAppendHostile: what a caller controls cannot split a line, break the
// chain or keep a call out of the trail.
func TestAppendHostile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	tr := open(t, path)
	defer tr.Close()
	big := jsontext.Value(`{"text":"` + strings.Repeat("a", MaxLine) + `"}`)
	for i, e := range []Entry{
		{Event: EventCall, CallID: "newline", User: "u\n{\"event\":\"call\"}\r\n", Tool: "t\u2028"},
		{Event: EventCall, CallID: "utf8", User: "u\xff\xfe", Device: "\xc3"},
		{Event: EventCall, CallID: "dup", Input: jsontext.Value(`{"a":1,"a":2}`)},
		{Event: EventCall, CallID: "notjson", Input: jsontext.Value(`{"a":`)},
		{Event: EventCall, CallID: "big", Input: big},
		{Event: EventCall, CallID: "input", Input: jsontext.Value(`{"text":"hi"}`)},
	} {
		if err := tr.Append(e); err != nil {
			t.Fatalf("%d: %v", i, err)
		}
	}
	if err := tr.Append(Entry{Event: EventCall, CallID: strings.Repeat("x", MaxLine)}); err == nil {
		t.Error("a line over MaxLine was written")
	}
	rep, es := verifyFile(t, path)
	if rep.Lines != 6 {
		t.Fatalf("%d lines, want 6", rep.Lines)
	}
	if es[0].User != "u\n{\"event\":\"call\"}\r\n" {
		t.Errorf("user read back as %q", es[0].User)
	}
	if es[1].User != "u\ufffd\ufffd" || es[1].Device != "\ufffd" {
		t.Errorf("invalid UTF-8 read back as %q, %q", es[1].User, es[1].Device)
	}
	for i, want := range []string{
		`{"omitted":"not valid JSON","bytes":13}`,
		`{"omitted":"not valid JSON","bytes":5}`,
		fmt.Sprintf(`{"omitted":"too large","bytes":%d}`, len(big)),
		`{"text":"hi"}`,
	} {
		if got := string(es[2+i].Input); got != want {
			t.Errorf("%s: input %s, want %s", es[2+i].CallID, got, want)
		}
	}
}

// TestOpenContinues: a trail opened again chains on from its last line.
func TestOpenContinues(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	tr := open(t, path)
	appendCalls(t, tr, "c1", "c2", "c3")
	tr.Close()
	tr = open(t, path)
	appendCalls(t, tr, "c4", "c5")
	tr.Close()
	rep, es := verifyFile(t, path)
	if rep.Lines != 5 || len(rep.Torn) != 0 || !slices.Equal(callIDs(es), []string{"c1", "c2", "c3", "c4", "c5"}) {
		t.Fatalf("%+v %v", rep, callIDs(es))
	}
}

// TestOpenContinuesLongTrail: Open reads the end of a trail longer than
// the window it reads, with long lines at the end.
func TestOpenContinuesLongTrail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	tr := open(t, path)
	long := jsontext.Value(`"` + strings.Repeat("a", MaxLine-300) + `"`)
	for i := range 4 {
		if err := tr.Append(Entry{Event: EventCall, CallID: fmt.Sprint("c", i), Input: long}); err != nil {
			t.Fatal(err)
		}
	}
	tr.Close()
	tr = open(t, path)
	appendCalls(t, tr, "c4")
	tr.Close()
	rep, es := verifyFile(t, path)
	if rep.Lines != 5 || es[4].CallID != "c4" {
		t.Fatalf("%+v", rep)
	}
}

// TestOpenShares: two Opens of a path share one writer and one chain, as
// an old and a new config do across a reload; the file stays locked until
// both are closed.
func TestOpenShares(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	a := open(t, path)
	b := open(t, filepath.Join(filepath.Dir(path), ".", "audit.jsonl"))
	if a.w != b.w {
		t.Fatal("two Opens of one path have two writers")
	}
	link := filepath.Join(t.TempDir(), "link.jsonl")
	if err := os.Symlink(path, link); err != nil {
		t.Fatal(err)
	}
	c := open(t, link)
	if c.w != a.w {
		t.Fatal("a link to an open trail has a writer of its own")
	}
	c.Close()
	appendCalls(t, a, "a1")
	appendCalls(t, b, "b1")
	appendCalls(t, a, "a2")
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	appendCalls(t, b, "b2")
	if err := otherLock(path); err == nil {
		t.Fatal("the file is not locked while one Trail is open")
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := otherLock(path); err != nil {
		t.Fatalf("the file is still locked after the last Close: %v", err)
	}
	rep, es := verifyFile(t, path)
	if rep.Lines != 4 || !slices.Equal(callIDs(es), []string{"a1", "b1", "a2", "b2"}) {
		t.Fatalf("%+v %v", rep, callIDs(es))
	}
	if len(writers) != 0 {
		t.Fatalf("writers left open: %v", writers)
	}
}

// otherLock takes and releases the trail's lock through a file of its own,
// as another process would.
func otherLock(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := lock(f); err != nil {
		return err
	}
	unlock(f)
	return nil
}

func TestConcurrentAppends(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	a, b := open(t, path), open(t, path)
	var wg sync.WaitGroup
	for g := range 8 {
		tr := a
		if g%2 == 1 {
			tr = b
		}
		wg.Go(func() {
			for i := range 50 {
				if err := tr.Append(Entry{Event: EventCall, CallID: fmt.Sprintf("g%d-%d", g, i)}); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	a.Close()
	b.Close()
	rep, es := verifyFile(t, path)
	ids := callIDs(es)
	slices.Sort(ids)
	if rep.Lines != 400 || len(slices.Compact(ids)) != 400 {
		t.Fatalf("%d lines, %d distinct calls, want 400", rep.Lines, len(slices.Compact(ids)))
	}
}

// TestSecondProcessRefused: another process opening a trail this one has
// open fails at once, naming the file.
func TestSecondProcessRefused(t *testing.T) {
	if os.Getenv("AUDIT_HELPER_OPEN") != "" {
		return // the helper's own run: TestMain opens the file
	}
	if _, err := exec.LookPath(os.Args[0]); err != nil {
		t.Skip(err)
	}
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	tr := open(t, path)
	defer tr.Close()
	appendCalls(t, tr, "c1")

	cmd := exec.Command(os.Args[0], "-test.run=^TestSecondProcessRefused$")
	cmd.Env = append(os.Environ(), "AUDIT_HELPER_OPEN="+path)
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), path+" is in use by another process") {
		t.Fatalf("the second process: %v\n%s", err, out)
	}

	// A file locked by another open file description (as by another
	// process) is refused in this process too.
	other := filepath.Join(t.TempDir(), "other.jsonl")
	f, err := os.Create(other)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := lock(f); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(other, nil); err == nil || !strings.Contains(err.Error(), "in use by another process") {
		t.Fatalf("Open of a locked file: %v", err)
	}
}

func TestMain(m *testing.M) {
	if path := os.Getenv("AUDIT_HELPER_OPEN"); path != "" {
		tr, err := Open(path, nil)
		if err != nil {
			fmt.Println(err)
			os.Exit(3)
		}
		tr.Close()
		fmt.Println("opened")
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestTornTail: a last line cut short is ended and chained on from, with
// an error logged; the trail then verifies, the torn line counted.
func TestTornTail(t *testing.T) {
	for _, tc := range []struct {
		name string
		tail string
		torn int
	}{
		{"no newline", `{"time":"2026-12-02T10:00:00Z","event":"ca`, 3},
		{"zeros", "\x00\x00\x00\x00\x00\x00", 3},
		{"ended but not JSON", `{"time":"2026-12-02T10:00:00Z","event":"ca` + "\n", 3},
		{"a valid entry without its newline", "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "audit.jsonl")
			tr := open(t, path)
			appendCalls(t, tr, "c1", "c2")
			tr.Close()
			data, _ := os.ReadFile(path)
			if tc.tail == "" {
				data = bytes.TrimSuffix(data, []byte("\n"))
			}
			if err := os.WriteFile(path, append(data, tc.tail...), 0o600); err != nil {
				t.Fatal(err)
			}

			core, logs := observer.New(zapcore.ErrorLevel)
			tr, err := Open(path, zap.New(core))
			if err != nil {
				t.Fatal(err)
			}
			appendCalls(t, tr, "c3")
			tr.Close()
			rep, es := verifyFile(t, path)
			if tc.torn == 0 {
				// The line is whole: ending it is all there is to do,
				// and the trail_resumed entry simply chains from it.
				if rep.Lines != 4 || len(rep.Torn) != 0 || es[2].Event != EventTrailResumed {
					t.Fatalf("%+v %+v", rep, es)
				}
				return
			}
			if !slices.Equal(rep.Torn, []int{tc.torn}) || rep.Lines != 5 {
				t.Fatalf("%+v", rep)
			}
			if e := es[3]; e.Event != EventTrailResumed || e.Decision != DecisionTornLine {
				t.Fatalf("line 4: %+v", e)
			}
			if es[4].CallID != "c3" {
				t.Fatalf("line 5: %+v", es[4])
			}
			if logs.FilterMessageSnippet("torn").Len() != 1 {
				t.Fatalf("logged: %v", logs.All())
			}
		})
	}
}

// TestTornFirstLine: a trail whose first write was cut short is
// recovered, and opened again after that.
func TestTornFirstLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	if err := os.WriteFile(path, []byte(`{"time":"2026-12-02T10:00:00Z","ev`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"c1", "c2"} {
		tr := open(t, path)
		appendCalls(t, tr, id)
		tr.Close()
	}
	rep, es := verifyFile(t, path)
	if !slices.Equal(rep.Torn, []int{1}) || rep.Lines != 4 || !slices.Equal(callIDs(es), []string{"c1", "c2"}) {
		t.Fatalf("%+v %v", rep, callIDs(es))
	}
}

// TestResyncAfterFailedWrite: after a write fails (perhaps halfway), the
// next Append finds the file's end again and recovers a torn line.
func TestResyncAfterFailedWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	tr := open(t, path)
	defer tr.Close()
	appendCalls(t, tr, "c1")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"time":"2026-12-02T10:00:00Z","ev`)
	f.Close()
	tr.w.mu.Lock()
	tr.w.err = errors.New("no space left on device")
	tr.w.mu.Unlock()
	appendCalls(t, tr, "c2")
	rep, es := verifyFile(t, path)
	if !slices.Equal(rep.Torn, []int{2}) || rep.Lines != 4 || es[3].CallID != "c2" {
		t.Fatalf("%+v", rep)
	}
}

// TestOpenRefusesOtherFiles: a file that is not a trail is left alone.
func TestOpenRefusesOtherFiles(t *testing.T) {
	for name, content := range map[string]string{
		"text":      "root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1::/:/bin/false\n",
		"one line":  "toolgate-host-1\n",
		"json":      `{"level":"info","msg":"started"}` + "\n" + `{"level":"info","msg":"stopped"}` + "\n",
		"long line": `{"time":"2026-12-02T10:00:00Z","event":"call","prev":"` + zeroHash + `"}` + "\n" + strings.Repeat("x", MaxLine+1) + "\n",
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "audit.jsonl")
			os.WriteFile(path, []byte(content), 0o600)
			if tr, err := Open(path, nil); err == nil {
				tr.Close()
				t.Fatal("Open took a file that is not a trail")
			}
			if data, _ := os.ReadFile(path); string(data) != content {
				t.Fatal("the file was changed")
			}
		})
	}
}

// TestTimeFormat: times are written in UTC with nanoseconds, and read back.
func TestTimeFormat(t *testing.T) {
	at := time.Date(2026, 12, 2, 10, 0, 0, 5, time.UTC)
	b, err := json.Marshal(Entry{Time: at, Event: EventCall, Prev: zeroHash})
	if err != nil {
		t.Fatal(err)
	}
	e, err := parseLine(b)
	if err != nil || !e.Time.Equal(at) || !bytes.Contains(b, []byte(`"2026-12-02T10:00:00.000000005Z"`)) {
		t.Fatalf("%s: %v", b, err)
	}
}

// BenchmarkAppend is the cost a call pays for its line: marshal, hash and
// one write(2), never a flush to the disk.
func BenchmarkAppend(b *testing.B) {
	tr, err := Open(filepath.Join(b.TempDir(), "audit.jsonl"), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer tr.Close()
	e := Entry{Event: EventCall, CallID: "call_9Kx1", Tool: "delete_note", User: "u_1", Install: "in_1", Target: "DELETE app:notes /notes/n1", Outcome: "ok", Status: 204, DurationMS: 12.4}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := tr.Append(e); err != nil {
				b.Error(err)
			}
		}
	})
}
