package worker

import (
	"errors"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"plaita/config"
)

func cfgWith(t *testing.T, env map[string]string) *config.Config {
	t.Helper()
	cfg, err := config.Load(config.RoleWorker, true, config.WithEnv(env))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestDiskGuard(t *testing.T) {
	var logs strings.Builder
	free := uint64(5 * gib)
	var probeErr error
	g := NewDiskGuard(cfgWith(t, map[string]string{"PLAITA_WORKER_MIN_FREE_DISK_GIB": "2.5"}), zerolog.New(&logs),
		func(string) (uint64, error) { return free, probeErr })
	if !g.Allow() {
		t.Fatal("5 GiB free, line 2.5: must allow")
	}
	free = 1 * gib
	for range 2 {
		if g.Allow() {
			t.Fatal("1 GiB free: must block")
		}
	}
	if n := strings.Count(logs.String(), `"blocked":true`); n != 1 {
		t.Errorf("the transition is logged once, got %d:\n%s", n, logs.String())
	}
	free = 3 * gib
	if !g.Allow() {
		t.Fatal("space back: must resume by itself")
	}
	probeErr = errors.New("statfs: input/output error")
	if !g.Allow() {
		t.Fatal("a failing probe lets work through")
	}
	if !strings.Contains(logs.String(), "worker.disk_guard_probe_failed") {
		t.Errorf("probe failure not logged: %s", logs.String())
	}
}

func TestDiskGuardOffAndReal(t *testing.T) {
	calls := 0
	g := NewDiskGuard(cfgWith(t, nil), zerolog.Nop(), func(string) (uint64, error) { calls++; return 0, nil })
	if !g.Allow() || calls != 0 {
		t.Fatal("0 = off: no probe, always allow")
	}
	// The real probe on the test's temp dir: an absurd line blocks.
	real := NewDiskGuard(cfgWith(t, map[string]string{"PLAITA_WORKER_MIN_FREE_DISK_GIB": "1e9", "PLAITA_WORKER_DISK_GUARD_PATH": t.TempDir()}), zerolog.Nop(), nil)
	if real.Allow() {
		t.Fatal("nobody has an exabyte free")
	}
}
