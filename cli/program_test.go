package cli

import (
	"strings"
	"testing"
)

// TestBuiltByGoRun: the printed commands say `go run .` for an executable `go run` built, wherever
// the go command keeps it — the build cache (Go ≥ 1.24: $GOCACHE, default
// os.UserCacheDir()/go-build) or a go-build temporary directory (older Go, and the first run of
// a build) — and the binary's own path otherwise.
func TestBuiltByGoRun(t *testing.T) {
	t.Parallel()
	hash := strings.Repeat("fa", 32)
	cached := "/fa/" + hash + "-d/plaita"
	for _, c := range []struct {
		name, exe, gocache, userCache string
		want                          bool
	}{
		{"the default build cache", "/root/.cache/go-build" + cached, "", "/root/.cache", true},
		{"GOCACHE in the environment", "/srv/gocache" + cached, "/srv/gocache", "/root/.cache", true},
		{"GOCACHE with a trailing separator", "/srv/gocache" + cached, "/srv/gocache/", "/root/.cache", true},
		// `go env -w GOCACHE=…` is kept in the go command's own file, not in the environment the
		// program gets: the cache's layout still tells.
		{"a cache the environment does not name", "/data/caches/go" + cached, "", "/root/.cache", true},
		{"a go-build temporary directory", "/tmp/go-build1382703904/b001/exe/plaita", "", "/root/.cache", true},
		{"GOTMPDIR's go-build directory", "/scratch/go-build42/b001/exe/plaita", "/srv/gocache", "/root/.cache", true},
		{"an installed binary", "/root/go/bin/plaita", "", "/root/.cache", false},
		{"a build in the clone", "/home/me/src/plaita/plaita", "/home/me/.gocache", "/home/me/.cache", false},
		{"a directory named like the cache", "/home/me/go-builder/plaita", "", "/home/me/.cache", false},
		{"a short hash is not a cache entry", "/srv/x/fa/fa12-d/plaita", "", "/root/.cache", false},
		{"no cache known", "/usr/local/bin/plaita", "", "", false},
	} {
		if got := builtByGoRun(c.exe, c.gocache, c.userCache); got != c.want {
			t.Errorf("%s: builtByGoRun(%q, GOCACHE=%q, user cache %q) = %v, want %v", c.name, c.exe, c.gocache, c.userCache, got, c.want)
		}
	}
}
