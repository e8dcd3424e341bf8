// Package ledger records every tool call before its target is sent, so that
// a call id runs at most once: a repeat gets the recorded result, a repeat
// while the first is in flight waits for it, and a card pauses a call until
// a person resumes it. The record of a new call counts it against its
// quotas (Limit) in the same step, and the calls waiting for a person are
// listed per caller (Waiting). Two back ends share one interface: an
// embedded bbolt file and Redis for several gateway instances.
package ledger

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/toolgate/toolgate/internal/jsonread"
	"github.com/toolgate/toolgate/internal/result"
)

// State is where a call stands.
type State string

// States of a call. Running and AwaitingClient are in flight; Done is final;
// ActionRequired waits for a person to resume it.
const (
	Running        State = "running"
	AwaitingClient State = "awaiting_client"
	ActionRequired State = "action_required"
	Done           State = "done"
)

// DefaultRetention is how long a call is kept after its last change. A
// retention shorter than the time a call may stay in flight would let a
// repeat of a call still running find nothing and run it again: the
// ledgers keep a call in flight for the retention past its deadline.
const DefaultRetention = 24 * time.Hour

// Errors of a Ledger.
var (
	// ErrNotFound: no call under that key.
	ErrNotFound = errors.New("ledger: call not found")
	// ErrConflict: the call was not in the expected state; the current
	// call is returned beside it.
	ErrConflict = errors.New("ledger: call changed concurrently")
	// ErrUnavailable: the back end cannot be reached. A write that fails
	// so was not made, or (when only its reply was lost) may have been:
	// read again before deciding.
	ErrUnavailable = errors.New("ledger: unavailable")
	// ErrLocked: the bolt file is locked by another process (or another
	// ledger of this one): bbolt serves one process at a time.
	ErrLocked = errors.New("ledger: the ledger file is in use by another process")
	// ErrCorrupt: the stored call cannot be read (a damaged value). Only
	// that call fails; it is kept as it is, and never run again.
	ErrCorrupt = errors.New("ledger: stored call cannot be read")
)

// Resume is how a card was answered.
type Resume struct {
	ButtonID string `json:"buttonId,omitempty"`
	Action   string `json:"action,omitempty"` // "skip" or "cancel"
	Device   string `json:"device,omitempty"`
	// InputDigest is InputDigest of the input a button was pressed with
	// (an approval with changes): another input is another answer.
	InputDigest string `json:"inputDigest,omitempty"`
}

// Approval is the gateway's own question on a call: its card asks a
// person to approve the call's input before anything is sent.
type Approval struct {
	// Input is the call's input, checked against the tool's schema, which
	// runs once the call is approved (unless approved with changes).
	Input jsontext.Value `json:"input"`
	// Expires is when the question lapses: the call is then closed as not
	// approved in time.
	Expires time.Time `json:"expires"`
	// Decision is set once the question is answered: approved, changed
	// (approved with changes), rejected or timed_out; By and Device are
	// who answered it, At when.
	Decision string    `json:"decision,omitempty"`
	By       string    `json:"by,omitempty"`
	Device   string    `json:"device,omitempty"`
	At       time.Time `json:"at,omitzero"`
	// Changed is the input approved with changes, which ran instead.
	Changed jsontext.Value `json:"changed,omitempty"`
}

// Connect is the gateway's own card on a call that needs a connection
// the user has not made: which one, and the call's input, which runs
// once it is made.
type Connect struct {
	Name  string         `json:"name"`
	Input jsontext.Value `json:"input"`
}

// Call is one recorded tool call. Its string members that identify it come
// first, in the stored JSON too: salvage reads them back from a record
// damaged further on.
type Call struct {
	// Key identifies the call: Key(caller, callId).
	Key    string `json:"key"`
	CallID string `json:"callId"`
	Tool   string `json:"tool"`
	// User and Install are who the call acts for; Source and ThreadID its
	// context. A resumed button target runs with the same.
	User     string `json:"user,omitempty"`
	Install  string `json:"install,omitempty"`
	Source   string `json:"source,omitempty"`
	ThreadID string `json:"threadId,omitempty"`
	// Digest is InputDigest of the call's input: the same call id with
	// another input is a misuse, not a repeat.
	Digest string `json:"digest"`
	State  State  `json:"state"`
	// Result is set when State is Done.
	Result *result.Result `json:"result,omitempty"`
	// Card is the action-required card, set from ActionRequired on.
	Card jsontext.Value `json:"card,omitempty"`
	// Resume records how the card was answered.
	Resume *Resume `json:"resume,omitzero"`
	// Approval is set when the card is the gateway's own approval
	// question rather than the handler's.
	Approval *Approval `json:"approval,omitzero"`
	// Connect is set when the card is the gateway's own, asking the user
	// to make a connection the call needs.
	Connect *Connect `json:"connect,omitzero"`
	// Limits are the quotas the call counted against when it was
	// created; Update releases its place in those on calls in flight
	// once it leaves flight.
	Limits []Limit `json:"limits,omitzero"`
	// Owner is the instance running the call; Deadline is when a call
	// still in flight is given up as "outcome unknown".
	Owner    string    `json:"owner,omitempty"`
	Deadline time.Time `json:"deadline,omitempty"`
	Created  time.Time `json:"created"`
	Updated  time.Time `json:"updated"`
}

// Ledger stores calls. Implementations are safe for concurrent use, and
// across processes where the back end is shared.
type Ledger interface {
	// Create records c (whose State is Running or AwaitingClient) unless a
	// call with c.Key exists: then it returns that call and created=false,
	// and writes nothing. A new call is counted against each of c.Limits
	// in the same atomic step; if one is full, nothing is recorded or
	// counted and the error is an *OverLimitError (ErrOverLimit).
	Create(ctx context.Context, c *Call) (existing *Call, created bool, err error)

	// Get returns the call under key, or ErrNotFound.
	Get(ctx context.Context, key string) (*Call, error)

	// Update replaces the call under c.Key with c if its stored State is
	// still from (compare and swap), and wakes its waiters. Otherwise it
	// returns the stored call and ErrConflict (or ErrNotFound). Callers set
	// c.Updated: retention counts from it.
	Update(ctx context.Context, c *Call, from State) (*Call, error)

	// Wait blocks until the call under key is in a state other than
	// state, then returns it; or until ctx is done. It wakes on Update,
	// in this process or (for shared back ends) another. A missing call
	// is ErrNotFound; a closed ledger ErrUnavailable.
	Wait(ctx context.Context, key string, state State) (*Call, error)

	// Waiting returns the calls of user in install that wait for a person
	// (ActionRequired), oldest first, at most MaxWaiting of them.
	Waiting(ctx context.Context, user, install string) ([]*Call, error)

	// Spend marks a one-time token (an MCP continuation's nonce) as used
	// until it expires, and reports whether it was unused: of several
	// Spends of one id, on any instance that shares the back end, exactly
	// one before until is fresh. A spent id is kept at least until until;
	// ErrUnavailable fails closed (the caller must refuse the token).
	Spend(ctx context.Context, id string, until time.Time) (fresh bool, err error)

	// Records reports whether the ledger keeps calls: false for Off,
	// whose Create always creates and whose Get finds nothing. A ledger
	// that keeps nothing cannot hold a call on a card, nor tell a repeat
	// from a first call; a wrapper that embeds a Ledger passes it on.
	Records() bool

	// Close releases the back end.
	Close() error
}

// MaxWaiting bounds what Waiting returns.
const MaxWaiting = 100

// Key forms a ledger key from the caller and the call id. The separator
// cannot appear in either part (call ids are printable ASCII).
func Key(user, install, callID string) string {
	return user + "\x1f" + install + "\x1f" + callID
}

// InputDigest is the SHA-256 of the input's canonical JSON: RFC 8785
// (jsontext's Canonicalize: object members sorted, no whitespace, each
// string in one form) but for two rules kept from the digests stored before
// it, which must stay equal for equal inputs (a repeat whose digest changed
// would be refused as another call under the same call id):
//
//   - numbers stay as written (input holds jsonread.Number, each number's
//     text): RFC 8785 writes them as IEEE doubles, so 1.0 and 1 would
//     match and, worse, 1234567890123456789 and 1234567890123456788;
//   - <, >, &, U+2028 and U+2029 in strings are escaped (\u003c …), as
//     encoding/json wrote them.
//
// The digests stored before differ only for an object with two names
// that first differ at a character from U+E000 to U+FFFF and one above
// U+FFFF (RFC 8785 orders names by UTF-16, encoding/json by UTF-8), and
// for an input that is not JSON and holds invalid UTF-8.
func InputDigest(input any) string {
	// Marshal fails only for a value no JSON decodes to, hashed as
	// nothing, as encoding/json's failures were. Canonicalize does not
	// fail on what Marshal wrote.
	v, err := json.Marshal(input, digestMarshal)
	if err != nil {
		v = nil
	} else {
		_ = (*jsontext.Value)(&v).Canonicalize(digestFormat...)
	}
	sum := sha256.Sum256(v)
	return hex.EncodeToString(sum[:])
}

// RawInputDigest is InputDigest of the JSON value raw holds, canonicalized
// from its bytes rather than re-encoded from a decoded value: the same
// digest for a fraction of the work. It fails for what is not one JSON
// value, or repeats a name; InputDigest then serves.
func RawInputDigest(raw []byte) (string, error) {
	v := jsontext.Value(bytes.Clone(raw))
	if err := v.Canonicalize(rawDigestFormat...); err != nil {
		return "", err
	}
	sum := sha256.Sum256(v)
	return hex.EncodeToString(sum[:]), nil
}

var (
	// digestMarshal writes a jsonread.Number as the number it holds.
	digestMarshal = json.JoinOptions(
		jsonread.Numbers,
		// The text of an input that is not JSON, hashed as a string.
		jsontext.AllowInvalidUTF8(true),
	)
	digestFormat = []jsontext.Options{
		jsontext.CanonicalizeRawInts(false),
		jsontext.CanonicalizeRawFloats(false),
		jsontext.EscapeForHTML(true),
		jsontext.EscapeForJS(true),
	}
	// rawDigestFormat reads invalid UTF-8 as U+FFFD, as the gateway's
	// decoder of inputs does.
	rawDigestFormat = append([]jsontext.Options{jsontext.AllowInvalidUTF8(true)}, digestFormat...)
)
