package dispatch

import (
	"fmt"
	"strings"

	"github.com/toolgate/toolgate/internal/result"
)

// A Kind is what a target's type means: which fields its spec takes, what a
// call of it needs, and how it runs. Each kind is a file of this package
// (app.go, url.go, clienttool.go, mcp.go), listed once in kinds; nothing else branches
// on a target's type.
type Kind interface {
	// Name is the kind's spelling on the wire: a spec's "type".
	Name() string

	// compile checks t.Spec, which names this kind, and fills t: its
	// references parsed, its component looked up in env. A field the
	// kind does not take must be empty.
	compile(t *Target, env Env) error

	// NeedsUser reports whether a call must name its user: the target is
	// sent an identity token signed for them.
	NeedsUser() bool

	// InPage reports whether a call runs in the user's page, through the
	// client bridge: a call from a thread waits for a page (the ledger's
	// awaiting_client) and is admitted only within the pages limits.
	InPage() bool

	// AnswersCards reports whether the target is the app's own: it may
	// answer an action-required card, whose buttons run targets of this
	// kind on the same component, and its embeds need no embed origin.
	AnswersCards() bool

	// ShowsUI reports whether a tool of this kind may show its answers in
	// the MCP Apps view, and does unless its config says otherwise.
	ShowsUI() bool

	// Execute runs one call of t through x, the gateway's ways to run one.
	Execute(t *Target, x Executor) Outcome

	// Describe names t in logs and errors, without the values its
	// references resolve to, which may be secret.
	Describe(t *Target) string
}

// kinds are the target kinds, in the order messages list them. A new
// kind is a file of its own and a line here.
var kinds = []Kind{appKind{}, urlKind{}, clientKind{}, mcpKind{}}

// KindOf returns the kind spelled name on the wire.
func KindOf(name string) (Kind, bool) {
	for _, k := range kinds {
		if k.Name() == name {
			return k, true
		}
	}
	return nil, false
}

// Kinds returns every target kind, in the order messages list them.
func Kinds() []Kind { return append([]Kind(nil), kinds...) }

// KindNames lists the kinds' wire names for a message: "app, url, kazzle or mcp".
func KindNames() string {
	names := make([]string, len(kinds))
	for i, k := range kinds {
		names[i] = k.Name()
	}
	if len(names) == 1 {
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

func lookupKind(name string) (Kind, error) {
	if name == "" {
		return nil, fmt.Errorf("target type is required (%s)", KindNames())
	}
	k, ok := KindOf(name)
	if !ok {
		return nil, fmt.Errorf("unknown target type %q (want %s)", name, KindNames())
	}
	return k, nil
}

// Executor is how the gateway runs a call, lent to a kind's Execute for
// one call: the kind says which way, the gateway does it. It keeps
// package dispatch free of the gateway, the ledger and the client bridge.
type Executor interface {
	// Send sends t's request over HTTP and reads the answer.
	Send(t *Target, how Sending) Outcome
	// RunInPage offers the call to the pages of its thread and waits for
	// one of them to answer.
	RunInPage(t *Target) Outcome
	// CallMCP calls t's tool on its upstream MCP server.
	CallMCP(t *Target) Outcome
}

// Sending says how Executor.Send sends a target.
type Sending struct {
	// Identity adds the gateway's own headers: an identity token signed
	// for the call's user, the call's context and its idempotency key.
	Identity bool
	// CheckEmbeds refuses an embedUrl on an origin that is not one of the
	// embed origins: the answer is not the app's to vouch for.
	CheckEmbeds bool
}

// Outcome is what running a target gave.
type Outcome struct {
	Result result.Result
	// Card is an action-required card the target answered, as it came,
	// not yet checked; nil when it answered none.
	Card []byte
	// Upstream is the target's HTTP status; 0 when none answered.
	Upstream int
	// Connect names the connection the call needs and the user has not
	// made: nothing was sent, and Result says so. The gateway answers a
	// call in a conversation with its card that connects it.
	Connect string
}
