package ledger

import (
	"errors"
	"fmt"
	"time"
)

// Limit is one quota a new call counts against: at most Max calls in the
// last Window (a sliding window), or, when Window is 0, at most Max calls
// in flight at once. The gateway forms Key from the limit's scope (one
// tool or all), its window and its subject (the user in an installation,
// or the installation): calls with the same Key are counted together, on
// every instance that shares the store.
type Limit struct {
	Key string `json:"key"`
	Max int    `json:"max"`
	// Window is the window's length in seconds; 0 counts calls in flight.
	Window int64 `json:"window,omitzero"`
	// Name is how a refusal names the limit: "20/1h per user".
	Name string `json:"name,omitempty"`
}

// Concurrent reports whether l counts calls in flight rather than calls
// in a window.
func (l Limit) Concurrent() bool { return l.Window == 0 }

// WindowDuration is l's window.
func (l Limit) WindowDuration() time.Duration { return time.Duration(l.Window) * time.Second }

// ErrOverLimit is what Create returns, wrapped in an *OverLimitError, for
// a new call that one of its limits refuses: nothing was recorded or
// counted.
var ErrOverLimit = errors.New("ledger: over a limit")

// OverLimitError names the limit that refused a call and when it may be
// tried again.
type OverLimitError struct {
	Limit Limit
	// RetryAfter is how long until the limit lets a call through: for a
	// window, until its oldest counted call leaves it; for calls in
	// flight, a short pause (one ending cannot be foretold).
	RetryAfter time.Duration
}

func (e *OverLimitError) Error() string {
	return fmt.Sprintf("over the limit %s; retry in %s", e.Limit.Name, e.RetryAfter.Round(time.Second))
}

// Is makes errors.Is(err, ErrOverLimit) hold.
func (e *OverLimitError) Is(target error) bool { return target == ErrOverLimit }

// ConcurrentRetry is the RetryAfter of a refusal by a limit on calls in
// flight.
const ConcurrentRetry = time.Second
