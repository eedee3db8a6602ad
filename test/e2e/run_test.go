//go:build e2e

package e2e

import (
	"bufio"
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// `plaita run` interrupted by SIGINT, as a process (the rest of run's tests run in process:
// run_inproc_test.go).

// TestRunInterrupt stops a long loop with SIGINT (Ctrl-C): the state is saved at the last
// step boundary, and the execution can then be cancelled.
func TestRunInterrupt(t *testing.T) {
	t.Parallel()
	flow := writeFile(t, "loop.json", `{"id": "loop", "start": "init", "max_steps": 10000000, "nodes": [
	  {"id": "init", "type": "set", "params": {"vars": {"i": 0}}, "next": "inc"},
	  {"id": "inc", "type": "set", "params": {"vars": {"i": "{{ VARS.i + 1 }}"}}, "next": "check"},
	  {"id": "check", "type": "condition", "params": {"expr": "VARS.i < 100000000"}, "branches": {"true": "inc", "false": "done"}},
	  {"id": "done", "type": "end"}
	]}`)
	stateDir := t.TempDir()
	cmd := exec.Command(binary, "run", flow, "--state-dir", stateDir, "--log-format", "json", "--log-level", "debug")
	cmd.Env = processEnv(t, nil)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stdout strings.Builder
	cmd.Stdout = &stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	// The preflight's config.effective line (at debug for run) comes after the signal handler
	// is installed.
	lines := bufio.NewReader(stderr)
	if _, err := lines.ReadString('\n'); err != nil {
		cmd.Process.Kill()
		t.Fatalf("no log line before the run: %v", err)
	}
	time.Sleep(300 * time.Millisecond)
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	var rest []byte
	go func() {
		rest, _ = io.ReadAll(lines) // until the process closes stderr
		done <- cmd.Wait()
	}()
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatal("the run did not stop on SIGINT")
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("exit %v, want status 1\nstderr:\n%s", err, rest)
	}
	if !strings.Contains(string(rest), "interrupted: execution ") || !strings.Contains(string(rest), "--type continue") {
		t.Fatalf("stderr:\n%s", rest)
	}
	entries, _ := os.ReadDir(stateDir)
	if len(entries) != 1 {
		t.Fatalf("state dir holds %d entries, want the one state file", len(entries))
	}
	id := strings.TrimSuffix(entries[0].Name(), ".json")
	if st := readState(t, stateDir, id); st.Status != "running" || st.StepCount == 0 {
		t.Fatalf("interrupted state: %+v", st)
	}

	r := run(t, nil, "run", flow, "--resume", id, "--type", "cancel", "--state-dir", stateDir, "--quiet")
	if r.code != 1 || !strings.Contains(r.stdout, "execution "+id+": cancelled") {
		t.Fatalf("cancel: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	noStateFile(t, stateDir, id)
}
