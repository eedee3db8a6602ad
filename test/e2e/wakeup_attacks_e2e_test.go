//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Inputs that once broke the wake-up path, each through the binary with a real worker, filter
// and delay role on a private Redis. The setup of each: a wait_event flow matching
// EVENT.k == INPUT.k, started with {"k":"u"} and left waiting.

// Every @file read is bounded by what it feeds: /dev/zero as an event's data, an input, resume
// data or a flow file is refused at the bound within moments (it once grew to 4.3 GB in 4 s),
// and a read that blocks ends at SIGTERM.
func TestE2EAttackReadsAreBoundedAndInterruptible(t *testing.T) {
	t.Parallel()
	s := newAttackStack(t, nil)
	flow := writeFile(t, "attack.json", attackFlow)
	stateDir := t.TempDir()
	for _, tc := range []struct {
		entry string
		args  []string
		want  string
	}{
		{"event data", []string{"event", "publish", "T", "--data", "@/dev/zero"}, "over the 1048576-byte bound (the event data bound)"},
		{"start input", []string{"start", flow, "--input", "@/dev/zero"}, "over the 16777216-byte bound (PLAITA_EXECUTION_STATE_MAX_BYTES)"},
		{"schedule input", []string{"schedule", "add", "--cron", "* * * * * *", "--flow", "attack", "--input", "@/dev/zero"}, "over the 16777216-byte bound"},
		{"resume data", []string{"execution", "resume", s.waiting, "--type", "event", "--data", "@/dev/zero"}, "over the 16777216-byte bound"},
		{"run input", []string{"run", flow, "--input", "@/dev/zero", "--state-dir", stateDir}, "over the 16777216-byte bound"},
		{"start flow file", []string{"start", "/dev/zero"}, "over the 4194304-byte bound (the flow definition bound)"},
		{"run flow file", []string{"run", "/dev/zero", "--state-dir", stateDir}, "over the 4194304-byte bound (the flow definition bound)"},
	} {
		t.Run(tc.entry, func(t *testing.T) { s.refused(2, tc.want, tc.args...) })
	}

	// A FIFO with a writer that never writes: the read blocks until SIGTERM ends it.
	fifo := filepath.Join(t.TempDir(), "data")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	w, err := os.OpenFile(fifo, os.O_RDWR, 0) // a writer, so that the reader's open returns and its read blocks
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	p := spawn(t, s.env, "event", "publish", "T", "--data", "@"+fifo, "--quiet")
	waitFor(t, "the publish has the FIFO open", 30*time.Second, func() bool { return hasOpen(p.cmd.Process.Pid, fifo) }, p)
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if !p.wait(10 * time.Second) {
		t.Fatalf("event publish reading a FIFO ignored SIGTERM\n%s", p.stderr.String())
	}
	if !strings.Contains(p.stderr.String(), "interrupted while reading") {
		t.Fatalf("exit %v\n%s", p.err, p.stderr.String())
	}
	if n := s.events(); n != 0 {
		t.Fatalf("%d events stored", n)
	}
	s.wakes(`{"k":"u"}`)
}

// hasOpen reports whether process pid has path open.
func hasOpen(pid int, path string) bool {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if target, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil && target == path {
			return true
		}
	}
	return false
}

// With PLAITA_QUEUE_NAME=plaita:flow:jobs the dead letters go to plaita:flow:jobs:dlq — the key
// of flow jobs version dlq. Publishing that version is refused; a key already there (from an
// earlier build) stops the worker at start and `plaita doctor --redis` names it, instead of
// every dead letter failing with WRONGTYPE and staying pending for good.
func TestE2EAttackFlowKeysCannotBeTheQueueKeys(t *testing.T) {
	t.Parallel()
	s := newFilterStack(t, map[string]string{"PLAITA_QUEUE_NAME": "plaita:flow:jobs"})
	jobs := writeFile(t, "jobs.json", `{"id":"jobs","version":"dlq","start":"done","nodes":[{"id":"done","type":"end"}]}`)
	r := run(t, s.env, "start", jobs, "--quiet")
	if r.code != 2 || !strings.Contains(r.stderr, "flow key is reserved") || !strings.Contains(r.stderr, "plaita:flow:jobs:dlq") {
		t.Fatalf("start jobs version dlq: exit %d %s", r.code, r.stderr)
	}
	c := s.srv.Client(t)
	if n, err := c.Do(t.Context(), c.B().Exists().Key("plaita:flow:jobs:dlq").Build()).AsInt64(); err != nil || n != 0 {
		t.Fatalf("the refused publication wrote the DLQ key (%d, %v)", n, err)
	}
	if r := run(t, s.env, "doctor", "--role", "worker", "--redis", "--quiet"); r.code != 0 || !strings.Contains(r.stdout, "are streams or absent") {
		t.Fatalf("doctor --redis on a clean database: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// What an earlier build let through: the definition stored at the DLQ key.
	if err := c.Do(t.Context(), c.B().Set().Key("plaita:flow:jobs:dlq").Value(`{"id":"jobs"}`).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	r = run(t, s.env, "doctor", "--role", "worker", "--redis", "--quiet")
	if r.code != 2 || !strings.Contains(r.stdout, `PLAITA_DLQ_KEY "plaita:flow:jobs:dlq" holds a string`) {
		t.Fatalf("doctor --redis: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	w := spawn(t, s.env, "worker", "--log-format", "json")
	if !w.wait(60*time.Second) || w.err == nil || !strings.Contains(w.stderr.String(), "queue key is not a stream") {
		t.Fatalf("the worker started over a DLQ key that is not a stream: %v\n%s", w.err, w.stderr.String())
	}
}
