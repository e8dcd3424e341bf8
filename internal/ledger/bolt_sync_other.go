//go:build !linux

package ledger

import "os"

// syncData flushes f to the disk.
func syncData(f *os.File) error {
	return f.Sync()
}
