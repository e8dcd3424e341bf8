package ledger

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.etcd.io/bbolt"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/toolgate/toolgate/internal/clock"
	"github.com/toolgate/toolgate/internal/result"
)

// journalLines is the journal text of calls, one line each.
func journalLines(t *testing.T, calls ...*Call) []byte {
	t.Helper()
	var data []byte
	for _, c := range calls {
		line, err := encodeCall(c)
		if err != nil {
			t.Fatal(err)
		}
		data = append(append(data, line...), '\n')
	}
	return data
}

// putValues writes raw values into the B+tree of the bolt file at path.
func putValues(t *testing.T, path string, values map[string][]byte) {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bbolt.Tx) error {
		bk, err := tx.CreateBucketIfNotExists(callsBucket)
		if err != nil {
			return err
		}
		for k, v := range values {
			if err := bk.Put([]byte(k), v); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func mustValue(t *testing.T, c *Call) []byte {
	t.Helper()
	v, err := boltValue(c)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// A damaged record never stops the ledger from opening (as it once did: one
// envelope with a 40,000-character user made every later start fail). Each
// is logged; a call in flight that can be identified is closed as outcome
// unknown; the good calls are as they were.
func TestBoltOpensPastDamagedRecords(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ledger.db")

	// The B+tree.
	kept := flyingCall("kept")
	kept.State, kept.Result = Done, &result.Result{Content: "kept"}
	running := flyingCall("btree-running") // in flight, its JSON cut short
	runningJSON := mustValue(t, running)
	doneBad := flyingCall("btree-done") // finished, its JSON damaged
	doneBad.State, doneBad.Result = Done, &result.Result{Content: "x"}
	doneBadValue := mustValue(t, doneBad)
	unknownState := mustValue(t, flyingCall("btree-state"))
	unknownState[1] = 99
	putValues(t, path, map[string][]byte{
		kept.Key:          mustValue(t, kept),
		running.Key:       runningJSON[:len(runningJSON)-10], // cut in its last member, the owner
		doneBad.Key:       append(doneBadValue[:len(doneBadValue)-5:len(doneBadValue)-5], "}}}}}"...),
		"btree-short":     {boltFormat, 1, 0},
		"btree-state":     unknownState,
		"btree-notjson":   []byte("{not json"),
		"btree-binary":    {0xff, 0x00, 0x17},
		"btree-emptyjson": []byte("{}"),
	})

	// The journal.
	inFlight := flyingCall("journal-ok")
	huge := flyingCall("journal-huge")
	huge.User = strings.Repeat("u", 40_000)
	huge.Key = Key(huge.User, huge.Install, huge.CallID)
	noKey := flyingCall("journal-nokey")
	noKey.Key = ""
	damaged := flyingCall("journal-damaged") // its key and tool readable
	damagedLine := journalLines(t, damaged)
	damagedLine = append(damagedLine[:len(damagedLine)-60:len(damagedLine)-60], "\x00\x01garbage\n"...)
	var journal []byte
	journal = append(journal, journalLines(t, inFlight, huge, noKey)...)
	journal = append(journal, damagedLine...)
	journal = append(journal, "{\"ke\x00\n"...)         // damaged before any key
	journal = append(journal, "\xff\xfe not json\n"...) // not JSON at all
	journal = append(journal, journalLines(t, flyingCall("journal-after"))...)
	journal = append(journal, `{"key":"torn","callId":"torn","to`...) // a crash mid-write
	if err := os.WriteFile(path+".journal", journal, 0o600); err != nil {
		t.Fatal(err)
	}

	core, logs := observer.New(zapcore.InfoLevel)
	reopened := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	b, err := OpenBolt(path, BoltOptions{Logger: zap.New(core), Clock: clock.NewManual(reopened)})
	if err != nil {
		t.Fatalf("OpenBolt with damaged records: %v", err)
	}
	defer b.Close()

	got := func(key string) *Call {
		t.Helper()
		c, err := b.Get(ctx, key)
		if err != nil {
			t.Fatalf("Get(%.40q): %v", key, err)
		}
		return c
	}
	if c := got(kept.Key); c.State != Done || c.Result.Content != "kept" {
		t.Errorf("good call changed: %+v", c)
	}
	closed := func(key, tool, digest string) {
		t.Helper()
		c := got(key)
		if c.State != Done || c.Result == nil || !c.Result.IsError || c.Result.Content != OutcomeUnknown {
			t.Errorf("call %.40q = %+v; want it closed as outcome unknown", key, c)
		}
		if c.Tool != tool || c.Digest != digest || !c.Updated.Equal(reopened) {
			t.Errorf("call %.40q closed as tool %q digest %q at %s; want %q %q at %s", key, c.Tool, c.Digest, c.Updated, tool, digest, reopened)
		}
	}
	closed(inFlight.Key, "t", "d")
	closed(running.Key, "t", "d")
	closed(damaged.Key, "t", "d")
	closed(flyingCall("journal-after").Key, "t", "d")

	for _, key := range []string{doneBad.Key, "btree-short", "btree-notjson", "btree-binary", "btree-emptyjson"} {
		if _, err := b.Get(ctx, key); !errors.Is(err, ErrCorrupt) {
			t.Errorf("Get(%s) of a damaged call = %v; want ErrCorrupt", key, err)
		}
		// A repeat of it is refused, not run.
		c := flyingCall("x")
		c.Key = key
		if _, created, err := b.Create(ctx, c); created || !errors.Is(err, ErrCorrupt) {
			t.Errorf("Create over damaged %s = %v, %v; want ErrCorrupt", key, created, err)
		}
	}
	for _, key := range []string{huge.Key, "", "torn"} {
		if _, err := b.Get(ctx, key); !errors.Is(err, ErrNotFound) {
			t.Errorf("Get(%.40q) = %v; want not found (skipped)", key, err)
		}
	}

	for _, want := range []struct {
		snippet string
		level   zapcore.Level
		n       int
	}{
		{"skipping a call in the journal that cannot be stored", zapcore.ErrorLevel, 2}, // huge, no key
		{"a damaged line; the call it names is closed", zapcore.ErrorLevel, 1},
		{"a damaged line that names no call", zapcore.ErrorLevel, 2},
		{"torn last line", zapcore.InfoLevel, 1},
		{"a call in flight cannot be read; closed", zapcore.ErrorLevel, 1},
		{"nor told to be in flight", zapcore.ErrorLevel, 5}, // short, state, notjson, binary, emptyjson
	} {
		entries := logs.FilterMessageSnippet(want.snippet).FilterLevelExact(want.level).All()
		if len(entries) != want.n {
			t.Errorf("%d %s logs %q; want %d", len(entries), want.level, want.snippet, want.n)
		}
	}
	for _, e := range logs.All() {
		if k, ok := e.ContextMap()["key"].(string); ok && len(k) > 200 {
			t.Errorf("log %q holds a key of %d bytes; want it cut short", e.Message, len(k))
		}
	}

	// The ledger works, and opens again.
	fresh := flyingCall("fresh")
	if _, created, err := b.Create(ctx, fresh); err != nil || !created {
		t.Fatalf("Create after opening past damage = %v, %v", created, err)
	}
	if _, err := b.Sweep(reopened.Add(48 * time.Hour)); err != nil {
		t.Fatalf("Sweep past damaged calls: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b2, err := OpenBolt(path, BoltOptions{})
	if err != nil {
		t.Fatalf("second OpenBolt: %v", err)
	}
	_ = b2.Close()
}

// Create refuses a key bbolt cannot store, with an error and nothing
// recorded: such a call was answered once and then kept the ledger from
// opening.
func TestBoltCreateRefusesUnstorableKey(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ledger.db")
	b, err := OpenBolt(path, BoltOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()

	for _, tc := range []struct {
		name   string
		keyLen int
		ok     bool
	}{
		{"at the limit", bbolt.MaxKeySize, true},
		{"one byte over", bbolt.MaxKeySize + 1, false},
		{"40,000 bytes", 40_000, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := flyingCall("c")
			c.Key = strings.Repeat("k", tc.keyLen-1) + tc.name[:1]
			_, created, err := b.Create(ctx, c)
			if tc.ok {
				if err != nil || !created {
					t.Fatalf("Create = %v, %v; want created", created, err)
				}
				d := *c
				d.State, d.Result = Done, &result.Result{Content: "ok"}
				if _, err := b.Update(ctx, &d, Running); err != nil {
					t.Fatalf("Update: %v", err)
				}
				return
			}
			if err == nil || created || !strings.Contains(err.Error(), "32768") {
				t.Fatalf("Create = %v, %v; want an error naming the limit", created, err)
			}
			if _, err := b.Get(ctx, c.Key); !errors.Is(err, ErrNotFound) {
				t.Errorf("Get after a refused Create: %v; want not found", err)
			}
		})
	}
}

// salvage reads the members before the damage.
func TestSalvage(t *testing.T) {
	full, _ := encodeCall(flyingCall("s"))
	for _, tc := range []struct {
		name      string
		data      string
		key, tool string
	}{
		{"whole", string(full), Key("u", "i", "s"), "t"},
		{"cut after the tool", string(full[:strings.Index(string(full), `,"user"`)+3]), Key("u", "i", "s"), "t"},
		{"cut in the key", `{"key":"u\u001fi`, "", ""},
		{"not an object", `["key","x"]`, "", ""},
		{"empty", ``, "", ""},
		{"key not a string", `{"key":7,"tool":"t"`, "", "t"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := salvage([]byte(tc.data))
			if c.Key != tc.key || c.Tool != tc.tool {
				t.Errorf("salvage = key %q tool %q; want %q %q", c.Key, c.Tool, tc.key, tc.tool)
			}
		})
	}
}

// No journal, however damaged, makes readJournal fail or panic, and every
// call it returns has the key it is filed under.
func FuzzReadJournal(f *testing.F) {
	good, _ := encodeCall(flyingCall("f"))
	f.Add(append(good, '\n'))
	f.Add(append(good[:40:40], '\n'))
	f.Add([]byte("{\"key\":\"a\",\"callId\":\x00\n{}\n"))
	path := filepath.Join(f.TempDir(), "journal")
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		calls, damaged, err := readJournal(path, zap.NewNop())
		if err != nil {
			t.Fatalf("readJournal: %v", err)
		}
		for key := range damaged {
			if calls[key] == nil {
				t.Fatalf("call %q damaged but not returned", key)
			}
		}
		for key, c := range calls {
			if c.Key != key {
				t.Fatalf("call filed under %q has key %q", key, c.Key)
			}
		}
	})
}
