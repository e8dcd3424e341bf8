package dispatch

import "context"

// SocketOf is the path of the socket a request's context was marked for
// (Socket), or "", for the tests of package dispatch_test.
func SocketOf(ctx context.Context) string {
	s, _ := Socket(ctx).(string)
	return s
}
