//go:build unix

package writefile

import (
	"io/fs"
	"syscall"
)

// linkCount is the number of names (hard links) of the file fi describes; false when the
// platform does not say.
func linkCount(fi fs.FileInfo) (uint64, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return uint64(st.Nlink), true // a uint16 on darwin, a uint64 on linux
}
