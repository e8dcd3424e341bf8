package gateway

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"
)

// Errors that are the caller's mistakes, not the tool's failures.
var (
	ErrUnknownTool = errors.New("unknown tool")
	ErrUnknownCall = errors.New("unknown call")
	ErrBadRequest  = errors.New("bad request")
	ErrForbidden   = errors.New("forbidden")
	ErrConflict    = errors.New("conflict")
	ErrReuse       = errors.New("idempotency key reuse")
	ErrUnavailable = errors.New("unavailable")
	// ErrTooMany: a client tool call over a pages limit; try again later.
	ErrTooMany = errors.New("too many")
)

// RequestError is a caller's mistake with a stable code.
type RequestError struct {
	Code string
	Msg  string
	// RetryAfter is when a call over a quota may be tried again, and
	// Limit names the quota; zero otherwise.
	RetryAfter time.Duration
	Limit      string
	kind       error
}

func (e *RequestError) Error() string { return e.Msg }
func (e *RequestError) Unwrap() error { return e.kind }

func badRequest(code, format string, args ...any) error {
	return &RequestError{Code: code, Msg: fmt.Sprintf(format, args...), kind: ErrBadRequest}
}

// unavailable answers a ledger failure. Its detail names the bolt file or
// the Redis address and the call's key, which holds the user: it is logged
// for the operator, and the caller gets a fixed message.
func (g *Gateway) unavailable(err error) error {
	g.logger.Error("the call ledger is unavailable", zap.Error(err))
	return &RequestError{Code: "unavailable", Msg: "the call ledger is unavailable, nothing was run", kind: ErrUnavailable}
}

// Told returns what a caller may be told of an error of Invoke, Status or
// Resume, and whether the error belongs in the log. A caller's mistake (a
// RequestError) is told as it is. Any other error may name the ledger's
// file, a key or a user: the caller is told only that the gateway failed,
// and the error is logged, unless the caller went away (context.Canceled).
func Told(err error) (msg string, logIt bool) {
	var re *RequestError
	if errors.As(err, &re) {
		return err.Error(), false
	}
	return "the gateway failed to answer; the error is in its log", !errors.Is(err, context.Canceled)
}
