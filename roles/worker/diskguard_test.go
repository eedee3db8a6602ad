package worker

import (
	"errors"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"plaita/config"
	"plaita/roles/settings"
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
	var probed []string
	s := settings.WorkerDiskGuard(cfgWith(t, map[string]string{"PLAITA_WORKER_MIN_FREE_DISK_GIB": "2.5", "PLAITA_WORKER_DISK_GUARD_PATH": "/srv/work"}))
	g := NewDiskGuardGate(s, zerolog.New(&logs), func(path string) (uint64, error) { probed = append(probed, path); return free, probeErr })
	if !g.Allow() {
		t.Fatal("5 GiB free, line 2.5: must allow")
	}
	if len(probed) != 1 || probed[0] != "/srv/work" {
		t.Errorf("probed %v, want the configured path", probed)
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
	g := NewDiskGuardGate(settings.WorkerDiskGuard(cfgWith(t, nil)), zerolog.Nop(), func(string) (uint64, error) { calls++; return 0, nil })
	if !g.Allow() || calls != 0 {
		t.Fatal("0 = off: no probe, always allow")
	}
	// The zero settings are off too; a line without a path measures the working directory.
	if !NewDiskGuardGate(settings.DiskGuard{}, zerolog.Nop(), func(string) (uint64, error) { calls++; return 0, nil }).Allow() || calls != 0 {
		t.Fatal("zero settings: off")
	}
	var probed string
	if NewDiskGuardGate(settings.DiskGuard{MinFreeGiB: 1}, zerolog.Nop(), func(p string) (uint64, error) { probed = p; return 0, nil }).Allow() || probed != "." {
		t.Fatalf("line without a path: probed %q", probed)
	}
	// The real probe on the test's temp dir: an absurd line blocks.
	real := NewDiskGuardGate(settings.WorkerDiskGuard(cfgWith(t, map[string]string{"PLAITA_WORKER_MIN_FREE_DISK_GIB": "1e9", "PLAITA_WORKER_DISK_GUARD_PATH": t.TempDir()})), zerolog.Nop(), nil)
	if real.Allow() {
		t.Fatal("nobody has an exabyte free")
	}
}
