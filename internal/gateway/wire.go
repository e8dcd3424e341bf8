package gateway

import (
	"bytes"
	"crypto/rand"
	"encoding/base32"
	"sync"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/toolgate/toolgate/internal/clock"
	"github.com/toolgate/toolgate/internal/ledger"
	"github.com/toolgate/toolgate/internal/result"
)

// Origin sources.
const (
	SourceThread = "thread"
	SourceAPI    = "api"
)

// Call statuses, as the ledger's states.
const (
	StatusDone           = string(ledger.Done)
	StatusActionRequired = string(ledger.ActionRequired)
	StatusRunning        = string(ledger.Running)
	StatusAwaitingClient = string(ledger.AwaitingClient)
)

// Origin says where a call comes from: a thread of a conversation, with a
// person in it, or the API. It travels as the invoke's "context" member
// and as the Kazzle-Tool-Context header.
type Origin struct {
	Source   string `json:"source"`
	ThreadID string `json:"threadId,omitempty"`
}

// Identity is the user and installation a call acts for.
type Identity struct {
	User    string `json:"user"`
	Install string `json:"install,omitempty"`
}

// Call is one tool call.
type Call struct {
	Tool     string
	CallID   string
	Input    jsontext.Value
	Origin   Origin
	Identity Identity
	// Claims are the verified caller token's claims; nil without callers.
	Claims map[string]any
	// Surface is where the call came from (SurfaceAPI, SurfaceMCP), for
	// the audit trail.
	Surface string

	// BaseURL is the gateway's own URL as the caller reached it
	// (scheme://host and the path prefix): a connection's callback is
	// derived from it when the connection names no redirect_url.
	BaseURL string

	// approval is set on a call run once a person approved it.
	approval *ApprovalInfo
}

// Answer is what a call answers now: a result (done), a card
// (action_required), or only its status while it is in flight.
type Answer struct {
	CallID string
	Tool   string
	Status string
	result.Result
	// Card is the action-required card when Status is action_required.
	Card jsontext.Value
}

// answerJSON is a done answer on the wire, callId, tool, status and the
// result's members, or one in flight, without a result.
type answerJSON struct {
	CallID string `json:"callId"`
	Tool   string `json:"tool"`
	Status string `json:"status"`
	// Result is set when done; nil leaves its members out.
	*result.Result
}

// cardAnswerJSON is an action_required answer on the wire. It is a type
// of its own because the result's "card" member (which channel the card
// shows) would shadow this one.
type cardAnswerJSON struct {
	CallID string         `json:"callId"`
	Tool   string         `json:"tool"`
	Status string         `json:"status"`
	Card   jsontext.Value `json:"card"`
}

// answerOptions write every string, invalid UTF-8 as U+FFFD, and a card as
// it was recorded, escapes and all. A card is written when encoding/json
// would find it valid, repeated names included, as it was before json v2.
var answerOptions = json.JoinOptions(
	jsontext.AllowInvalidUTF8(true),
	jsontext.AllowDuplicateNames(true),
	jsontext.PreserveRawStrings(true),
)

// MarshalJSONTo writes the shape of the status (json.MarshalerTo). It fails
// only when enc's writer does: an invalid card is written as null.
func (a *Answer) MarshalJSONTo(enc *jsontext.Encoder) error {
	if a.Status == StatusActionRequired {
		card := jsontext.Value(a.Card)
		if !card.IsValid(answerOptions) {
			card = jsontext.Value("null")
		}
		return json.MarshalEncode(enc, &cardAnswerJSON{a.CallID, a.Tool, a.Status, card}, answerOptions)
	}
	w := answerJSON{CallID: a.CallID, Tool: a.Tool, Status: a.Status}
	if a.Status == StatusDone {
		w.Result = &a.Result
	}
	return json.MarshalEncode(enc, &w, answerOptions)
}

// MarshalJSON is MarshalJSONTo for callers that ask for bytes (encoding/json).
func (a *Answer) MarshalJSON() ([]byte, error) {
	return json.Marshal(a)
}

// AppendJSON appends the answer's JSON to dst, writing into dst's spare
// capacity: with a buffer large enough, nothing is allocated or copied. It
// cannot fail (see MarshalJSONTo): a panic here is a bug in this file.
func (a *Answer) AppendJSON(dst []byte) []byte {
	buf := answerBuffers.Get().(*bytes.Buffer)
	*buf = *bytes.NewBuffer(dst)
	// Room for the answer and a quarter more, which the encoder keeps free
	// after writing into a bytes.Buffer. Without it, the encoder outgrows
	// the buffer and copies a large answer twice more: a 1 MiB answer
	// allocated 4 MiB, not 1.3.
	n := 64 + len(a.CallID) + len(a.Tool) + len(a.Status) + len(a.Content) + len(a.Markdown) + len(a.EmbedURL) + len(a.Card)
	buf.Grow(n + n/4)
	if err := json.MarshalWrite(buf, a, answerOptions); err != nil {
		panic("gateway: writing an answer: " + err.Error())
	}
	out := buf.Bytes()
	*buf = bytes.Buffer{} // keep no caller's bytes
	answerBuffers.Put(buf)
	return out
}

// answerBuffers hold the bytes.Buffer that AppendJSON writes through.
var answerBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// contextOptions escape <, > and & and U+2028/9 as encoding/json did:
// components get the Kazzle-Tool-Context text they got before json v2.
var contextOptions = json.JoinOptions(jsontext.EscapeForHTML(true), jsontext.EscapeForJS(true))

// apiContext is the Kazzle-Tool-Context of every API call, encoded once.
var apiContext = func() string {
	b, _ := json.Marshal(&Origin{Source: SourceAPI}, contextOptions)
	return string(b)
}()

// toolContext is Kazzle-Tool-Context: the call's origin, and how it was
// approved when it was.
type toolContext struct {
	Source   string        `json:"source"`
	ThreadID string        `json:"threadId,omitempty"`
	Approval *ApprovalInfo `json:"approval,omitzero"`
}

// contextHeader is the Kazzle-Tool-Context header of call, whose origin
// CheckOrigin checked.
func contextHeader(call *Call) string {
	c := call.Origin
	if c.Source == SourceAPI && call.approval == nil {
		return apiContext
	}
	// Only invalid UTF-8 could fail, and a thread id and a user are
	// valid UTF-8.
	b, _ := json.Marshal(&toolContext{Source: c.Source, ThreadID: c.ThreadID, Approval: call.approval}, contextOptions)
	return string(b)
}

// NewCallID makes a call id: "call_" and 26 characters that sort by time,
// a millisecond clock then 80 random bits. Ids made later sort later, so
// the ledger adds new calls at the end of its B+tree rather than all over
// it: about a third of the cost per call of random ids in bbolt.
func NewCallID() string { return newCallID(clock.Real.Now()) }

// newCallID is NewCallID at now, the gateway's clock.
func newCallID(now time.Time) string {
	var b [16]byte
	ms := uint64(now.UnixMilli())
	for i := 5; i >= 0; i-- {
		b[i] = byte(ms)
		ms >>= 8
	}
	_, _ = rand.Read(b[6:])
	// Encoded in place after the prefix: one allocation, the string.
	var id [len("call_") + 26]byte
	copy(id[:], "call_")
	callIDEncoding.Encode(id[len("call_"):], b[:])
	return string(id[:])
}

// callIDEncoding is base32hex in lower case, whose digits are in ASCII
// order: the text of ids sorts as their bytes do.
var callIDEncoding = base32.NewEncoding("0123456789abcdefghijklmnopqrstuv").WithPadding(base32.NoPadding)
