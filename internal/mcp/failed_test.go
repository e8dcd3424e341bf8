package mcp

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/toolgate/toolgate/internal/gateway"
)

// A client is told a caller's mistake as it is, and of any other error only
// that it happened: the error may name the ledger's file or a user, and
// goes to the log.
func TestFailedTellsNothingInternal(t *testing.T) {
	for _, c := range []struct {
		name   string
		err    error
		want   string
		hide   string
		logged bool
	}{
		{"caller's mistake", &gateway.RequestError{Code: "too_many_client_calls", Msg: "client tool where: too many; try again later"}, "try again later", "", false},
		{"internal", fmt.Errorf("recorded card of c1: /var/lib/caddy/toolgate/ledger.db: u_1"), "the error is in its log", "ledger.db", true},
		{"caller went away", fmt.Errorf("waiting: %w", context.Canceled), "the error is in its log", "waiting", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			core, logs := observer.New(zap.ErrorLevel)
			s := &Server{logger: zap.New(core)}
			res := s.failed(c.err)
			text := res.Content[0].(*sdk.TextContent).Text
			if !res.IsError || !strings.Contains(text, c.want) || (c.hide != "" && strings.Contains(text, c.hide)) {
				t.Errorf("result %q (isError %v), want %q without %q", text, res.IsError, c.want, c.hide)
			}
			if got := logs.Len() > 0; got != c.logged {
				t.Errorf("logged %v, want %v", got, c.logged)
			}
			var re *gateway.RequestError
			if errors.As(c.err, &re) && text != re.Msg {
				t.Errorf("a caller's mistake became %q", text)
			}
		})
	}
}
