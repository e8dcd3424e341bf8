package connect_test

import (
	"testing"

	"github.com/toolgate/toolgate/internal/clock"
	"github.com/toolgate/toolgate/internal/connect"
	"github.com/toolgate/toolgate/internal/connect/connecttest"
)

func TestMemory(t *testing.T) {
	connecttest.RunStore(t, func(t *testing.T, c *clock.Manual) connect.Store {
		m := connect.NewMemory(c)
		t.Cleanup(func() { _ = m.Close() })
		return m
	})
}
