package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/toolgate/toolgate/internal/gateway"
)

// Only a caller's mistake is told as it is. Any other error may name the
// ledger's file, a key or a user: it goes to the log, and the answer says
// only that something failed.
func TestWriteAnswerErrors(t *testing.T) {
	secretish := fmt.Errorf("recorded card of %q: reading /var/lib/caddy/toolgate/ledger.db: u_1\x1fin_1\x1fc1", "c1")
	for _, c := range []struct {
		name     string
		err      error
		status   int
		code     string
		logged   bool
		mustHide string
	}{
		{"caller's mistake", &gateway.RequestError{Code: "unknown_call", Msg: "no call c1 for this caller"}, http.StatusInternalServerError, "unknown_call", false, ""},
		{"internal error", secretish, http.StatusInternalServerError, "internal", true, "ledger.db"},
		{"caller went away", fmt.Errorf("waiting: %w", context.Canceled), http.StatusInternalServerError, "internal", false, "waiting"},
	} {
		t.Run(c.name, func(t *testing.T) {
			core, logs := observer.New(zap.ErrorLevel)
			a := &API{logger: zap.New(core)}
			rec := httptest.NewRecorder()
			a.writeAnswer(rec, nil, c.err)
			var re *gateway.RequestError
			if errors.As(c.err, &re) {
				c.status = StatusOf(c.err)
			}
			body := rec.Body.String()
			if rec.Code != c.status || !strings.Contains(body, `"code":"`+c.code+`"`) {
				t.Errorf("answer %d %s, want %d with code %s", rec.Code, body, c.status, c.code)
			}
			if c.mustHide != "" && strings.Contains(body, c.mustHide) {
				t.Errorf("the answer shows %q: %s", c.mustHide, body)
			}
			if re != nil && !strings.Contains(body, re.Msg) {
				t.Errorf("a caller's mistake lost its message: %s", body)
			}
			if got := logs.Len() > 0; got != c.logged {
				t.Errorf("logged: %v, want %v", got, c.logged)
			}
		})
	}
}

// Each kind of caller's mistake the core reports has its status.
func TestStatusOf(t *testing.T) {
	for _, c := range []struct {
		kind   error
		status int
	}{
		{gateway.ErrUnknownTool, http.StatusNotFound},
		{gateway.ErrUnknownCall, http.StatusNotFound},
		{gateway.ErrBadRequest, http.StatusBadRequest},
		{gateway.ErrForbidden, http.StatusForbidden},
		{gateway.ErrConflict, http.StatusConflict},
		{gateway.ErrReuse, http.StatusUnprocessableEntity},
		{gateway.ErrUnavailable, http.StatusServiceUnavailable},
		{gateway.ErrTooMany, http.StatusTooManyRequests},
		{errors.New("anything else"), http.StatusInternalServerError},
	} {
		if got := StatusOf(fmt.Errorf("wrapped: %w", c.kind)); got != c.status {
			t.Errorf("%v: %d, want %d", c.kind, got, c.status)
		}
	}
}
