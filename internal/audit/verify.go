package audit

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// Verify reads a trail and checks its chain: every line a JSON entry
// (parseLine) whose prev is the SHA-256 of the bytes of the line before it
// (64 zeros for the first), each line ended by a newline and at most
// MaxLine bytes long. It re-hashes the bytes as read; it never re-encodes.
//
// The one exception is a torn line that Open recovered: a line that is not
// an entry, immediately followed by an EventTrailResumed entry with
// Decision DecisionTornLine whose prev is the hash of that line. Verify
// accepts it and lists it in Report.Torn. Any other line that is not an
// entry, or does not chain, fails with a *BrokenError naming the first
// such line.
//
// A changed line K still chains from line K-1 (its prev is untouched), so
// the line named is K+1, whose prev no longer matches. A removed or
// reordered line is named where the first line out of place now stands.
// A change to the last line, or lines cut from the end, show only against
// a last hash kept elsewhere (docs/audit.md, "What the chain proves").
// An empty trail holds, with 0 lines.
func Verify(r io.Reader) (Report, error) {
	br := bufio.NewReaderSize(r, MaxLine+1)
	var (
		rep   Report
		prev  = zeroHash
		torn  int   // the line awaiting its trail_resumed, 0 if none
		why   error // why line torn is not an entry
		ended = true
	)
	for n := 1; ; n++ {
		line, err := br.ReadSlice('\n')
		if len(line) == 0 && err == io.EOF {
			break
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			if torn != 0 {
				return rep, &BrokenError{Line: torn, Reason: why.Error()}
			}
			return rep, &BrokenError{Line: n, Reason: fmt.Sprintf("longer than %d bytes", MaxLine)}
		case err == io.EOF:
			ended = false
		case err != nil:
			return rep, err
		}
		line = bytes.TrimSuffix(line, []byte("\n"))
		e, perr := parseLine(line)
		switch {
		case torn != 0:
			if perr != nil || !resumesTorn(e) || e.Prev != prev {
				return rep, &BrokenError{Line: torn, Reason: why.Error() + ", and the next line is not a trail_resumed entry that chains from it"}
			}
			rep.Torn = append(rep.Torn, torn)
			torn = 0
		case perr != nil:
			torn, why = n, perr
		case e.Prev != prev && n == 1:
			return rep, &BrokenError{Line: n, Reason: "prev is not 64 zeros: a trail's first line chains from nothing (were lines before it removed?)"}
		case e.Prev != prev:
			return rep, &BrokenError{Line: n, Reason: fmt.Sprintf("prev is not the SHA-256 of line %d: line %d was changed, or lines were removed, added or reordered before this one", n-1, n-1)}
		}
		if !ended {
			return rep, &BrokenError{Line: n, Reason: "no newline at the end of the file: a torn write, not yet recovered by the gateway"}
		}
		prev = hashLine(line)
		rep.Lines = n
	}
	if torn != 0 {
		return rep, &BrokenError{Line: torn, Reason: why.Error() + ", and nothing follows it"}
	}
	return rep, nil
}
