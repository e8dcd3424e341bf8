//go:build unix && !aix

package audit

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// errLocked: another open file description holds the trail's lock.
var errLocked = errors.New("locked")

// lock takes an exclusive flock(2) on f without waiting. flock belongs to
// the open file description, so it holds against other processes and
// against another open of the file in this one.
func lock(f *os.File) error {
	err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	if errors.Is(err, unix.EWOULDBLOCK) {
		return errLocked
	}
	return err
}

func unlock(f *os.File) { _ = unix.Flock(int(f.Fd()), unix.LOCK_UN) }
