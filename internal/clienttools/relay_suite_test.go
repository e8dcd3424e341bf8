package clienttools

import (
	"testing"

	"github.com/toolgate/toolgate/internal/redistest"
)

// relaySuite is the contract every Relay meets, as a bridge over it shows
// it to its callers and pages: offers reach the thread's streams and no
// other, the first claim and the first outcome win, a timeout finishes
// the call, claims lapse when the thread's last stream closes, a call
// whose caller went away is kept for a streaming page or dropped. A relay
// is known done when it passes every case (TestRelaySuite).
var relaySuite = []struct {
	name string
	run  func(t *testing.T, b *Bridge, clk *fakeClock)
}{
	{"Timeout", relayTimeout},
	{"ClaimAndPost", relayClaimAndPost},
	{"PostWithoutClaim", relayPostWithoutClaim},
	{"OpenOffersWaitingUnclaimed", relayOpenOffersWaitingUnclaimed},
	{"PushToThreadStreams", relayPushToThreadStreams},
	{"ClaimLapse", relayClaimLapse},
	{"CallerGoneNoPage", relayCallerGoneNoPage},
	{"CallerGoneWhilePageStreams", relayCallerGoneWhilePageStreams},
	{"SameIDWhileWaiting", relaySameIDWhileWaiting},
	{"PostRacesTimer", relayPostRacesTimer},
	{"InstallsApart", relayInstallsApart},
}

// TestRelaySuite runs the relay suite on the in-process relay and on the
// Redis relay, each case on a bridge of its own (for Redis, under a prefix
// of its own on one server).
func TestRelaySuite(t *testing.T) {
	t.Run("local", func(t *testing.T) {
		runRelaySuite(t, func(t *testing.T) (*Bridge, *fakeClock) {
			b := NewBridge()
			return b, newFakeClock(b)
		})
	})
	t.Run("redis", func(t *testing.T) {
		rs := redistest.Start(t)
		runRelaySuite(t, func(t *testing.T) (*Bridge, *fakeClock) {
			return instance(t, rs.Addr, t.Name()+":", streamBeat)
		})
	})
}

func runRelaySuite(t *testing.T, open func(t *testing.T) (*Bridge, *fakeClock)) {
	for _, c := range relaySuite {
		t.Run(c.name, func(t *testing.T) {
			b, clk := open(t)
			c.run(t, b, clk)
		})
	}
}
