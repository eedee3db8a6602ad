package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"plaita/control"
)

// program is how the commands plaita prints invoke plaita, so that each can be run as printed:
// "plaita" when that name on PATH is this very binary; "go run ." for a binary `go run` built
// (it is deleted when it exits — the hint is for the clone it was run from); else this binary's
// path.
func program() string {
	exe, err := os.Executable()
	if err != nil {
		return "plaita"
	}
	if strings.Contains(exe, string(filepath.Separator)+"go-build") {
		return "go run ."
	}
	if onPath, err := exec.LookPath("plaita"); err == nil && sameFile(onPath, exe) {
		return "plaita"
	}
	return control.ShellQuote(exe)
}

func sameFile(a, b string) bool {
	fa, err1 := os.Stat(a)
	fb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(fa, fb)
}
