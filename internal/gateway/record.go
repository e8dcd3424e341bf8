package gateway

import (
	"context"
	"errors"
	"time"

	"go.uber.org/zap"

	"github.com/toolgate/toolgate/internal/ledger"
)

// recordRetry bounds the pause between tries to record a finished call
// while the ledger is unavailable.
const recordRetry = time.Second

// record writes a call that ran, even if the caller went away: a repeat must
// find it, so ctx is one the caller's going away does not cancel
// (context.WithoutCancel; ledger.Off, which writes nothing, takes any). While the ledger is unavailable (Redis restarting) it tries again
// in the background until the call's deadline, so that a repeat, which waits
// for the call meanwhile, gets its result rather than "outcome unknown".
func (g *Gateway) record(ctx context.Context, c *ledger.Call, from ledger.State) {
	_, err := g.ledger.Update(ctx, c, from)
	if err == nil {
		return
	}
	fields := []zap.Field{zap.String("tool", c.Tool), zap.String("call_id", c.CallID)}
	if !errors.Is(err, ledger.ErrUnavailable) {
		g.logger.Error("recording a finished call", append(fields, zap.Error(err))...)
		return
	}
	g.logger.Warn("recording a finished call: the ledger is unavailable; trying again until the call's deadline",
		append(fields, zap.Time("deadline", c.Deadline), zap.Error(err))...)
	if !g.startRetry() {
		g.logger.Error("recording a finished call: the gateway is closing, so it is not tried again", fields...)
		return
	}
	done := *c
	go func() {
		defer g.retries.Done()
		// Close ends the retry: its ledger may be released next.
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		defer context.AfterFunc(g.closing, cancel)()
		var cur *ledger.Call
		pause := recordRetry / 10
		for g.clock.Now().Add(pause).Before(done.Deadline) {
			if !sleep(ctx, pause) {
				break
			}
			cur, err = g.ledger.Update(ctx, &done, from)
			if !errors.Is(err, ledger.ErrUnavailable) || ctx.Err() != nil {
				break
			}
			pause = min(2*pause, recordRetry)
		}
		switch {
		case g.closing.Err() != nil && err != nil:
			g.logger.Error("recording a finished call: the gateway closed before the ledger returned", append(fields, zap.Error(err))...)
		case err == nil:
			g.logger.Info("recorded a finished call after the ledger returned", fields...)
		case errors.Is(err, ledger.ErrConflict) && cur != nil && cur.State == done.State && cur.Result != nil && done.Result != nil && cur.Result.Equal(*done.Result):
			// An earlier try was written, though its reply was lost.
		case errors.Is(err, ledger.ErrConflict):
			// A waiter closed it as outcome unknown at its deadline: the
			// first outcome recorded stands.
			g.logger.Error("recording a finished call: it was closed as outcome unknown first", fields...)
		default:
			g.logger.Error("recording a finished call: giving up at its deadline", append(fields, zap.Error(err))...)
		}
	}()
}

// startRetry counts a retry about to start, unless Close was called.
func (g *Gateway) startRetry() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.retries.Add(1)
	return true
}

// sleep waits d, or until ctx is done; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// InFlightMargin is added to a call's time limit (the upstream timeout, or
// the client tool timeout) to form its deadline in the ledger, after which
// a waiter gives it up as "outcome unknown": room for the answer to be
// recorded once the limit cut the call short.
const InFlightMargin = 15 * time.Second

// inFlightLimit is how long a call may stay in flight before a waiter
// gives it up as "outcome unknown": the upstream timeout and a margin.
func (g *Gateway) inFlightLimit() time.Duration {
	return g.client.Timeout() + InFlightMargin
}
