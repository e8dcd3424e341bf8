package ledger

import (
	"os"

	"golang.org/x/sys/unix"
)

// syncData flushes f's data to the disk, and of its metadata only what
// reading the data back needs (its size): fdatasync, as bbolt does on
// Linux.
func syncData(f *os.File) error {
	return unix.Fdatasync(int(f.Fd()))
}
