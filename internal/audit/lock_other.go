//go:build !unix || aix

package audit

import (
	"errors"
	"os"
)

// errLocked: another process holds the trail. Never returned here.
var errLocked = errors.New("locked")

// lock does nothing where flock(2) is missing: two processes appending to
// one trail there fork its chain, which Verify then reports.
func lock(*os.File) error { return nil }

func unlock(*os.File) {}
