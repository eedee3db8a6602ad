package worker

import (
	"cmp"
	"fmt"
	"sync"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"plaita/roles/settings"
)

const gib = 1 << 30

// DiskGuard is the worker's local admission gate on free disk (PLAITA_WORKER_MIN_FREE_DISK_GIB
// on PLAITA_WORKER_DISK_GUARD_PATH, settings.DiskGuard). Below the line the worker claims
// nothing and checks again on its next round; it resumes by itself when space is back. 0 turns
// the guard off. A failing probe lets work through: a broken probe must not stop the whole
// pool.
type DiskGuard struct {
	minGiB  float64 // ≤ 0 = off
	path    string
	log     zerolog.Logger
	statfs  func(path string) (free uint64, err error)
	mu      sync.Mutex
	blocked bool
	probeOK bool
}

// NewDiskGuardGate returns the guard; statfs nil = the real filesystem.
func NewDiskGuardGate(s settings.DiskGuard, log zerolog.Logger, statfs func(string) (uint64, error)) *DiskGuard {
	if statfs == nil {
		statfs = freeBytes
	}
	return &DiskGuard{minGiB: s.MinFreeGiB, path: cmp.Or(s.Path, "."), log: log, statfs: statfs, probeOK: true}
}

func freeBytes(path string) (uint64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, err
	}
	return st.Bavail * uint64(st.Bsize), nil
}

// Allow reports whether the worker may claim work now. Transitions are logged once each.
func (g *DiskGuard) Allow() bool {
	min, path := g.minGiB, g.path
	if min <= 0 {
		return true
	}
	free, err := g.statfs(path)
	g.mu.Lock()
	defer g.mu.Unlock()
	if err != nil {
		if g.probeOK {
			g.log.Warn().Str("event", "worker.disk_guard_probe_failed").Str("path", path).Err(err).
				Msg("cannot measure free disk; claiming work anyway (a broken probe must not stop the pool)")
		}
		g.probeOK = false
		return true
	}
	g.probeOK = true
	freeGiB := float64(free) / gib
	below := freeGiB < min
	if below != g.blocked {
		ev := g.log.Info()
		msg := "free disk is back above the line: claiming work again"
		if below {
			ev = g.log.Warn()
			msg = fmt.Sprintf("free disk below %g GiB (PLAITA_WORKER_MIN_FREE_DISK_GIB): claiming nothing until space is back", min)
		}
		ev.Str("event", "worker.disk_guard").Str("path", path).Float64("free_gib", freeGiB).Float64("min_gib", min).Bool("blocked", below).Msg(msg)
		g.blocked = below
	}
	return !below
}
