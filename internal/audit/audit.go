// Package audit keeps the audit trail: every call's life (what was refused,
// asked, approved, resumed and run) appended as JSON lines to one file, each
// line carrying the SHA-256 of the line before it, and the check of that
// chain (Verify). docs/audit.md is the operator's guide.
//
// A plain hash chain proves the order of the lines and detects an edit, a
// removal or a reordering by anyone who does not also rewrite every line
// after it. Someone who can write the file can rewrite its tail (or cut it
// short) undetected: what makes the trail tamper-evident is keeping its last
// hash somewhere they cannot write, and checking the file against it.
package audit

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// Events of the trail: an Entry's Event is one of these.
const (
	// EventCall: a call ran to an outcome. Outcome is "ok" or "error",
	// Target where it was sent, Status the upstream's HTTP status (when
	// there was one) and DurationMS how long the target took.
	EventCall = "call"
	// EventRefused: policy or a quota said no before anything was sent.
	// Decision says which ("forbidden", "over_limit"), Limit names the
	// quota that refused.
	EventRefused = "refused"
	// EventApprovalAsked: the gateway paused the call on its approval
	// card; nothing is sent until a person answers.
	EventApprovalAsked = "approval_asked"
	// EventApprovalDecided: the approval card was answered or lapsed.
	// Decision is "approved", "changed" (approved with changes),
	// "rejected" or "timed_out"; By is the user who decided and Device
	// the device they answered on.
	EventApprovalDecided = "approval_decided"
	// EventResumed: a person answered an app's action-required card.
	// Decision is the button's id, or "skip" or "cancel".
	EventResumed = "resumed"
	// EventTrailResumed is written by the trail itself, not by a caller:
	// Open found the file's last line torn (a write cut by a crash or a
	// power cut), ended it, and chained on from its bytes. Decision is
	// DecisionTornLine.
	EventTrailResumed = "trail_resumed"
)

// DecisionTornLine is the Decision of the EventTrailResumed entry that
// follows a torn line.
const DecisionTornLine = "torn_line"

// MaxLine is the longest line, in bytes without its newline, that Verify
// accepts and Append writes.
const MaxLine = 1 << 20

// zeroHash is the prev of a trail's first line.
var zeroHash = strings.Repeat("0", 2*sha256.Size)

// Entry is one line of the trail. Empty and zero members are omitted,
// except time, event and prev.
type Entry struct {
	Time     time.Time `json:"time"`  // UTC, RFC 3339 with nanoseconds; Append sets it when zero
	Event    string    `json:"event"` // one of the Event* constants
	CallID   string    `json:"callId,omitempty"`
	Tool     string    `json:"tool,omitempty"`
	User     string    `json:"user,omitempty"`
	Install  string    `json:"install,omitempty"`
	Surface  string    `json:"surface,omitempty"`  // "api" (Tools API), "mcp", "button" (a card's answer)
	ThreadID string    `json:"threadId,omitempty"` // the page's thread, for a client tool or a card
	Decision string    `json:"decision,omitempty"` // e.g. "forbidden", "over_limit", "approved", "changed", "rejected", "timed_out", "skip", "cancel"
	Limit    string    `json:"limit,omitempty"`    // the quota that refused: "20/1h per user"
	By       string    `json:"by,omitempty"`       // who decided an approval (user)
	Device   string    `json:"device,omitempty"`
	// Target is where the call was sent ("POST app:notes /notes"). The
	// caller keeps secrets and query values out of it: the trail is read
	// by operators, not only by the gateway.
	Target     string  `json:"target,omitempty"`
	Outcome    string  `json:"outcome,omitempty"` // "ok" or "error"
	Status     int     `json:"status,omitzero"`   // upstream HTTP status
	DurationMS float64 `json:"durationMs,omitzero"`
	// Input is the call's input, only when the operator asked for inputs
	// (audit_inputs). An input that is not valid JSON (invalid UTF-8,
	// repeated member names) or would make the line longer than MaxLine
	// is written as {"omitted": REASON, "bytes": N} instead.
	Input jsontext.Value `json:"input,omitempty"`
	// Prev is the hex SHA-256 of the previous line's bytes, without its
	// newline; the first line's is 64 zeros. Append sets it.
	Prev string `json:"prev"`
}

// Report is what Verify found in a trail whose chain holds.
type Report struct {
	// Lines is the number of lines, torn ones included.
	Lines int
	// Torn are the numbers (1-based) of the torn lines Open recovered:
	// each is followed by an EventTrailResumed entry that chains from its
	// bytes. A torn line's content is lost, not checked.
	Torn []int
}

// BrokenError names the first line at which a trail's chain does not hold.
type BrokenError struct {
	Line   int // 1-based
	Reason string
}

func (e *BrokenError) Error() string {
	return fmt.Sprintf("line %d: %s", e.Line, printable(e.Reason))
}

// printable keeps a reason (which may quote the file's bytes) from
// writing control characters to an operator's terminal.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsPrint(r) {
			return r
		}
		return '?'
	}, s)
}

// hashLine is the prev of the line after line.
func hashLine(line []byte) string {
	sum := sha256.Sum256(line)
	return hex.EncodeToString(sum[:])
}

// parseLine reads one line of a trail strictly: one JSON object, valid
// UTF-8, no repeated member names, an event, and a prev of 64 lowercase
// hex digits. Members it does not know are allowed.
func parseLine(line []byte) (Entry, error) {
	var e Entry
	if err := json.Unmarshal(line, &e); err != nil {
		return Entry{}, fmt.Errorf("not a JSON entry: %v", err)
	}
	if e.Event == "" {
		return Entry{}, errors.New("not an entry: no event")
	}
	if !isHash(e.Prev) {
		return Entry{}, errors.New("not an entry: prev is not 64 lowercase hex digits")
	}
	return e, nil
}

func isHash(s string) bool {
	if len(s) != 2*sha256.Size {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// resumesTorn reports whether e is the entry Open writes after a torn line.
func resumesTorn(e Entry) bool {
	return e.Event == EventTrailResumed && e.Decision == DecisionTornLine
}
