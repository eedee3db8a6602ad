package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"plaita/config"
	"plaita/control"
)

// program is how the commands plaita prints invoke plaita, so that each can be run as printed:
// "plaita" when that name on PATH is this very binary; "go run ." for a binary `go run` built
// (it is deleted when it exits, or replaced by the next build — the hint is for the clone it
// was run from); else this binary's path.
func program() string {
	exe, err := os.Executable()
	if err != nil {
		return "plaita"
	}
	if startedByGoRun(exe) {
		return "go run ."
	}
	if onPath, err := exec.LookPath("plaita"); err == nil && sameFile(onPath, exe) {
		return "plaita"
	}
	return control.ShellQuote(exe)
}

// startedByGoRun is builtByGoRun for this process: its GOCACHE, its user cache directory.
func startedByGoRun(exe string) bool {
	userCache, _ := os.UserCacheDir()
	gocache, _ := config.HostEnv("GOCACHE")
	return builtByGoRun(exe, gocache, userCache)
}

// builtByGoRun reports whether exe is an executable `go run` built, given the environment's
// GOCACHE ("" unset) and the user cache directory (os.UserCacheDir; "" unknown). Go ≥ 1.24
// keeps the executables of `go run` in the build cache: GOCACHE, else <user cache>/go-build, as
// <cache>/<xx>/<xx…64 hex>-d/<name>. A GOCACHE written with `go env -w` is in the go command's
// own file, not in the environment the program gets, so that layout counts wherever it is. The
// first run of a build, and older Go, run it from the go command's temporary directory,
// $GOTMPDIR or $TMPDIR/go-build<digits>/….
func builtByGoRun(exe, gocache, userCache string) bool {
	exe = filepath.Clean(exe)
	cache := gocache
	if cache == "" && userCache != "" {
		cache = filepath.Join(userCache, "go-build")
	}
	if cache != "" && cache != "off" { // off: no cache (and no directory of that name)
		if rel, err := filepath.Rel(filepath.Clean(cache), exe); err == nil && filepath.IsLocal(rel) {
			return true
		}
	}
	dir := filepath.Dir(exe)
	entry, shard := filepath.Base(dir), filepath.Base(filepath.Dir(dir))
	if hash, ok := strings.CutSuffix(entry, "-d"); ok && len(hash) == 64 && isHex(hash) && shard == hash[:2] {
		return true
	}
	for _, elem := range strings.Split(dir, string(filepath.Separator)) {
		if digits, ok := strings.CutPrefix(elem, "go-build"); ok && digits != "" && strings.Trim(digits, "0123456789") == "" {
			return true
		}
	}
	return false
}

func isHex(s string) bool {
	return strings.Trim(s, "0123456789abcdef") == ""
}

// EndWithGoRun makes a plaita that `go run` started end with the go command: an IDE or a
// supervisor stops `go run` with SIGTERM, of which the go command dies without passing it on
// (Ctrl-C works only because the terminal sends it to plaita too), so its plaita would keep
// serving and the next start would find the port taken. Linux sends this process SIGTERM when
// its parent dies (PR_SET_PDEATHSIG: when the go command's thread that started it ends, and the
// go command's threads end with it), and SIGTERM drains as usual. main calls it first of all,
// before anything runs; it reports false when the go command died before the request took
// effect (the parent is no longer the one it was): main then exits at once, as that signal would
// have made it. A plaita started any other way is left to its parent as it was.
func EndWithGoRun() (parentAlive bool) {
	exe, err := os.Executable()
	if err != nil || !startedByGoRun(exe) {
		return true
	}
	parent := os.Getppid()
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGTERM), 0, 0, 0); err != nil {
		return true // the process works as before: only `go run`'s SIGTERM is not passed on
	}
	return os.Getppid() == parent
}

func sameFile(a, b string) bool {
	fa, err1 := os.Stat(a)
	fb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(fa, fb)
}
