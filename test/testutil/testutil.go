// Package testutil holds small helpers shared by tests: an environment that changes while a
// configuration is loaded, and waits on processes that tests spawn.
package testutil

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Env is an environment for config.WithLookup that tests can change while a configuration is
// loaded, to exercise call-timed variables.
type Env struct {
	mu sync.Mutex
	m  map[string]string
}

// NewEnv starts from a copy of m.
func NewEnv(m map[string]string) *Env {
	e := &Env{m: map[string]string{}}
	for k, v := range m {
		e.m[k] = v
	}
	return e
}

// Lookup is the config.WithLookup function.
func (e *Env) Lookup(k string) (string, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	v, ok := e.m[k]
	return v, ok
}

// Set sets a variable.
func (e *Env) Set(k, v string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.m[k] = v
}

// Snapshot returns a copy of the variables.
func (e *Env) Snapshot() map[string]string {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make(map[string]string, len(e.m))
	for k, v := range e.m {
		out[k] = v
	}
	return out
}

// Unset removes a variable.
func (e *Env) Unset(k string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.m, k)
}

// WaitGone waits until pid no longer runs (gone, or a zombie waiting for init to reap it).
func WaitGone(t testing.TB, pid int) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return
		}
		if b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); err == nil {
			if f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:])); len(f) > 0 && f[0] == "Z" {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("process %d still runs", pid)
}

// ReadPid waits (up to 5 s) for a file holding a process id and returns it.
func ReadPid(t testing.TB, file string) int {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, err := os.ReadFile(file)
		if s := strings.TrimSpace(string(b)); err == nil && s != "" {
			pid, err := strconv.Atoi(s)
			if err != nil {
				t.Fatal(err)
			}
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("no pid in %s", file)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
