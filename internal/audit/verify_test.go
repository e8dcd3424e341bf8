package audit

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"
)

// build chains lines as a trail does: PREV in each is replaced by the hash
// of the line before it as built (64 zeros for the first).
func build(lines ...string) []byte {
	var out []byte
	prev := zeroHash
	for _, l := range lines {
		l = strings.ReplaceAll(l, "PREV", prev)
		out = append(out, l...)
		out = append(out, '\n')
		prev = hashLine([]byte(l))
	}
	return out
}

// entry is a line template for build.
func entry(call string) string {
	return `{"time":"2026-12-02T10:00:00.123456789Z","event":"call","callId":"` + call + `","tool":"add_note","outcome":"ok","prev":"PREV"}`
}

// resumed is the line Open writes after a torn line.
const resumed = `{"time":"2026-12-02T10:00:01Z","event":"trail_resumed","decision":"torn_line","prev":"PREV"}`

// lines splits a trail into its lines, without newlines.
func lines(b []byte) [][]byte {
	return bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n"))
}

// join is the inverse of lines.
func join(ls [][]byte) []byte {
	return append(bytes.Join(ls, []byte("\n")), '\n')
}

func TestVerify(t *testing.T) {
	five := build(entry("c1"), entry("c2"), entry("c3"), entry("c4"), entry("c5"))
	edit := func(f func(ls [][]byte) [][]byte) []byte {
		return join(f(lines(bytes.Clone(five))))
	}
	for _, tc := range []struct {
		name   string
		trail  []byte
		lines  int
		torn   []int
		broken int    // the line named, 0 if the chain holds
		reason string // part of the reason
	}{
		{name: "intact", trail: five, lines: 5},
		{name: "empty", trail: nil, lines: 0},
		{
			// Line 3 still chains from line 2 (its prev is untouched): the
			// first line that does not hold is 4, whose prev hashed the
			// old line 3.
			name: "edited middle line names the next",
			trail: edit(func(ls [][]byte) [][]byte {
				ls[2] = bytes.Replace(ls[2], []byte(`"ok"`), []byte(`"error"`), 1)
				return ls
			}),
			broken: 4, reason: "line 3 was changed",
		},
		{
			// The old line 4, now third, chains from the removed line 3.
			name:   "deleted line",
			trail:  edit(func(ls [][]byte) [][]byte { return slices.Delete(ls, 2, 3) }),
			broken: 3, reason: "not the SHA-256 of line 2",
		},
		{
			name: "swapped pair",
			trail: edit(func(ls [][]byte) [][]byte {
				ls[1], ls[2] = ls[2], ls[1]
				return ls
			}),
			broken: 2, reason: "not the SHA-256 of line 1",
		},
		{
			name:   "first line's prev not zeros",
			trail:  build(strings.Replace(entry("c1"), "PREV", hashLine([]byte("x")), 1), entry("c2")),
			broken: 1, reason: "not 64 zeros",
		},
		{
			name:   "leading lines removed",
			trail:  edit(func(ls [][]byte) [][]byte { return ls[2:] }),
			broken: 1, reason: "not 64 zeros",
		},
		{
			name:  "torn line recovered",
			trail: build(entry("c1"), entry("c2"), `{"time":"2026-12-02T10:00:00Z","ev`, resumed, entry("c3")),
			lines: 5, torn: []int{3},
		},
		{
			name:  "torn line of zeros recovered",
			trail: build(entry("c1"), "\x00\x00\x00\x00", resumed),
			lines: 3, torn: []int{2},
		},
		{
			name:   "torn line in the middle without trail_resumed",
			trail:  build(entry("c1"), `{"time":"2026-12-02T10:00:00Z","ev`, entry("c2"), entry("c3")),
			broken: 2, reason: "not a JSON entry",
		},
		{
			name:   "garbage line that ends the file",
			trail:  build(entry("c1"), entry("c2"), "garbage"),
			broken: 3, reason: "nothing follows it",
		},
		{
			// An attacker who blanks line 2 and inserts a trail_resumed
			// after it cannot chain the resumed entry from the blanked
			// line without rewriting the rest: line 4 breaks.
			name: "blanked line passed off as torn",
			trail: func() []byte {
				ls := lines(five)
				ls[1] = []byte("garbage")
				ins := []byte(strings.Replace(resumed, "PREV", hashLine(ls[1]), 1))
				return join(slices.Insert(ls, 2, ins))
			}(),
			broken: 4, reason: "not the SHA-256 of line 3",
		},
		{
			name:   "trail_resumed that does not chain from the torn line",
			trail:  build(entry("c1"), "garbage", strings.Replace(resumed, "PREV", hashLine([]byte("other")), 1)),
			broken: 2, reason: "not a trail_resumed entry that chains from it",
		},
		{
			name:   "an ordinary entry after a torn line",
			trail:  build(entry("c1"), "garbage", entry("c2")),
			broken: 2, reason: "not a JSON entry",
		},
		{
			name:   "no newline at the end",
			trail:  bytes.TrimSuffix(five, []byte("\n")),
			broken: 5, reason: "no newline",
		},
		{
			name:   "torn tail not recovered",
			trail:  append(bytes.Clone(five), `{"time":"2026-12`...),
			broken: 6, reason: "no newline",
		},
		{
			name:   "duplicate member names",
			trail:  build(entry("c1"), `{"time":"2026-12-02T10:00:00Z","event":"call","event":"refused","prev":"PREV"}`, entry("c3")),
			broken: 2, reason: "duplicate",
		},
		{
			name:   "invalid UTF-8",
			trail:  build(entry("c1"), entry("c\xff2"), entry("c3")),
			broken: 2, reason: "UTF-8",
		},
		{
			name:   "member names are case-sensitive",
			trail:  build(`{"time":"2026-12-02T10:00:00Z","event":"call","Prev":"PREV"}`),
			broken: 1, reason: "prev is not 64",
		},
		{
			name:   "no event",
			trail:  build(`{"time":"2026-12-02T10:00:00Z","prev":"PREV"}`),
			broken: 1, reason: "no event",
		},
		{
			name:   "prev in upper case",
			trail:  build(entry("c1"), strings.Replace(entry("c2"), "PREV", strings.ToUpper(hashLine([]byte(entry("c1")))), 1)),
			broken: 2, reason: "not 64 lowercase hex",
		},
		{
			name:  "line of MaxLine bytes",
			trail: build(entry("c1"), entry(strings.Repeat("x", MaxLine-len(entry(""))-60)), entry("c3")),
			lines: 3,
		},
		{
			name:   "line of MaxLine+1 bytes",
			trail:  build(entry("c1"), entry(strings.Repeat("x", MaxLine-len(entry(""))-59)), entry("c3")),
			broken: 2, reason: "longer than",
		},
		{
			name:   "line longer than MaxLine",
			trail:  build(entry("c1"), entry(strings.Repeat("x", MaxLine)), entry("c3")),
			broken: 2, reason: "longer than",
		},
		{
			name:   "empty line",
			trail:  build(entry("c1"), "", entry("c3")),
			broken: 2, reason: "not a JSON entry",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := Verify(bytes.NewReader(tc.trail))
			if tc.broken == 0 {
				if err != nil {
					t.Fatalf("Verify: %v", err)
				}
				if rep.Lines != tc.lines || !slices.Equal(rep.Torn, tc.torn) {
					t.Fatalf("Verify = %+v, want %d lines, torn %v", rep, tc.lines, tc.torn)
				}
				return
			}
			var be *BrokenError
			if !errors.As(err, &be) {
				t.Fatalf("Verify = %+v, %v; want line %d broken", rep, err, tc.broken)
			}
			if be.Line != tc.broken || !strings.Contains(be.Reason, tc.reason) {
				t.Fatalf("broken at line %d (%s), want line %d (%q)", be.Line, be.Reason, tc.broken, tc.reason)
			}
		})
	}
}

// TestVerifyPrintableReason: a reason never carries the file's control
// characters to the terminal.
func TestVerifyPrintableReason(t *testing.T) {
	_, err := Verify(bytes.NewReader(build(`{"time":"2026-12-02T10:00:00Z","event":"call","event\u001b[2J":1,"event\u001b[2J":1,"prev":"PREV"}`)))
	if err == nil {
		t.Fatal("Verify accepted duplicate names")
	}
	if strings.ContainsFunc(err.Error(), func(r rune) bool { return r < 0x20 }) {
		t.Fatalf("reason %q carries control characters", err)
	}
}

func FuzzVerify(f *testing.F) {
	f.Add(build(entry("c1"), entry("c2")))
	f.Add(build(entry("c1"), "garbage", resumed, entry("c2")))
	f.Add(build(entry("c1"), `{"time":"2026-12-02T10:00:00Z","ev`))
	f.Add([]byte("\n\n"))
	f.Add([]byte(`{"event":"call","prev":"` + zeroHash + `"}` + "\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		rep, err := Verify(bytes.NewReader(data))
		if err != nil {
			var be *BrokenError
			if errors.As(err, &be) && (be.Line < 1 || be.Line > bytes.Count(data, []byte("\n"))+1) {
				t.Fatalf("broken line %d out of range", be.Line)
			}
			return
		}
		// A trail that holds is every line ended, and its torn lines
		// are among them, each followed by another.
		if rep.Lines != bytes.Count(data, []byte("\n")) {
			t.Fatalf("%d lines, %d newlines", rep.Lines, bytes.Count(data, []byte("\n")))
		}
		for _, n := range rep.Torn {
			if n < 1 || n >= rep.Lines {
				t.Fatalf("torn line %d of %d", n, rep.Lines)
			}
		}
	})
}
