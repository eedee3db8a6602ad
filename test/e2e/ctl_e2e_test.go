//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"plaita/engine/state"
)

// `plaita ctl` against real role processes: a worker in the middle of a step answers its status
// (one task in flight), `ctl stop --graceful` drains it exactly as SIGTERM does — the step in
// flight completes and is acked, the worker deregisters and exits 0, nothing is left pending —
// and a delay role answers and stops the same way. An unknown instance, and the stopped one, are
// exit 1 with a message that says so.
func TestE2ECtlStatusAndStop(t *testing.T) {
	t.Parallel()
	slow := newPathServer(t, map[string]time.Duration{"/slow": 3 * time.Second})
	s := newStack(t, withEnv(cliEnv()))
	worker := s.spawn("worker", map[string]string{"PLAITA_INSTANCE_ID": "w-ctl-1"})
	delay := s.spawn("delay", map[string]string{"PLAITA_INSTANCE_ID": "d-ctl-1"})
	type answer struct {
		InstanceID     string `json:"instance_id"`
		Role           string `json:"role"`
		Status         string `json:"status"`
		Draining       bool   `json:"draining"`
		Uptime         int64  `json:"uptime_ns"`
		InFlight       *int   `json:"in_flight"`
		Capacity       int    `json:"capacity"`
		DrainRequested bool   `json:"drain_requested"`
		Deregistered   bool   `json:"deregistered"`
	}
	ctl := func(args ...string) answer {
		t.Helper()
		var a answer
		if err := json.Unmarshal([]byte(s.cli(append(append([]string{"ctl"}, args...), "--json")...)), &a); err != nil {
			t.Fatalf("ctl %v --json: %v", args, err)
		}
		return a
	}
	waitFor(t, "both instances registered", 30*time.Second, func() bool {
		r := run(t, s.env, "ctl", "status", "d-ctl-1", "--quiet")
		r2 := run(t, s.env, "ctl", "status", "w-ctl-1", "--quiet")
		return r.code == 0 && r2.code == 0
	}, worker, delay)

	id := s.startDef("slow", `{"id":"slow","start":"call","nodes":[{"id":"call","type":"http","params":{"url":"`+slow.URL+
		`/slow","timeout":30},"next":"done"},{"id":"done","type":"end"}]}`, "", "")
	slow.waitSeen(t, "/slow", 30*time.Second, worker)
	// The heartbeat that carries the count of tasks in flight comes every 10 s; the answer reads
	// the worker's own count at once.
	a := ctl("status", "w-ctl-1")
	if a.Role != "worker" || a.Status != "running" || a.Draining || a.InFlight == nil || *a.InFlight != 1 || a.Capacity != 2 || a.Uptime <= 0 {
		t.Fatalf("status of the busy worker: %+v", a)
	}
	text := s.cli("ctl", "status", "w-ctl-1")
	mustContain(t, "ctl status", text, "instance w-ctl-1: worker, running", "1/2 task(s) in flight")

	a = ctl("stop", "--graceful", "w-ctl-1")
	if !a.DrainRequested || !a.Draining || a.Status != "draining" {
		t.Fatalf("stop answer: %+v", a)
	}
	if !worker.wait(30 * time.Second) {
		t.Fatalf("the worker did not drain and exit\n%s", worker.stderr.String())
	}
	if worker.err != nil {
		t.Fatalf("the worker's exit: %v\n%s", worker.err, worker.stderr.String())
	}
	if st := s.waitDone(id); st.Status != state.Completed {
		t.Fatalf("the execution in flight during the drain: %s", st.Status)
	}
	if n := s.pending(); n != 0 {
		t.Fatalf("%d entries left pending after the drain", n)
	}
	if slow.count("/slow") != 1 {
		t.Fatalf("the step ran %d times", slow.count("/slow"))
	}
	if countLog(worker, "worker.stop_requested", "ctl@") != 1 || countLog(worker, "worker.draining", "") != 1 || countLog(worker, "worker.deregistered", "") != 1 {
		t.Errorf("the worker's log does not show the requested drain:\n%s", worker.stderr.String())
	}

	d := ctl("status", "d-ctl-1")
	if d.Role != "delay" || d.InFlight != nil || d.Status != "running" {
		t.Fatalf("status of the delay role: %+v", d)
	}
	if d = ctl("stop", "--wait", "d-ctl-1", "--timeout", "20s"); !d.DrainRequested || !d.Deregistered {
		t.Fatalf("stop --wait of the delay role: %+v", d)
	}
	if !delay.wait(30*time.Second) || delay.err != nil {
		t.Fatalf("the delay role did not exit 0: %v\n%s", delay.err, delay.stderr.String())
	}

	for _, who := range []string{"w-nobody", "w-ctl-1"} {
		r := run(t, s.env, "ctl", "status", who, "--quiet")
		if r.code != 1 || !strings.Contains(r.stderr, `no instance "`+who+`" in the registry`) {
			t.Fatalf("ctl status %s: exit %d\n%s", who, r.code, r.stderr)
		}
	}
	if r := run(t, s.env, "ctl", "stop", "--quiet"); r.code != 2 || !strings.Contains(r.stderr, "name one instance") {
		t.Fatalf("ctl stop without an instance: exit %d\n%s", r.code, r.stderr)
	}
}

// `plaita probe`, the image's health check: 0 while the role is ready, 1 with the answer once it
// drains (its /readyz says 503 as soon as SIGTERM arrives, while the step in flight finishes),
// 1 when nothing answers; the default URL is the role's own /readyz on PLAITA_METRICS_PORT.
func TestE2EProbe(t *testing.T) {
	t.Parallel()
	slow := newPathServer(t, map[string]time.Duration{"/slow": 4 * time.Second})
	s := newStack(t, withEnv(cliEnv()))
	worker := s.start("worker", nil)
	probeEnv := map[string]string{"PLAITA_METRICS_PORT": strconv.Itoa(worker.port), "PLAITA_METRICS_HOST": "0.0.0.0"}
	waitFor(t, "the worker ready", 30*time.Second, func() bool { return run(t, probeEnv, "probe", "--quiet").code == 0 }, worker)
	r := run(t, probeEnv, "probe", "--quiet")
	if want := fmt.Sprintf("ready: http://127.0.0.1:%d/readyz\n", worker.port); r.code != 0 || r.stdout != want {
		t.Fatalf("probe of a ready worker: exit %d %q, want %q\n%s", r.code, r.stdout, want, r.stderr)
	}

	id := s.startDef("slow", `{"id":"slow","start":"call","nodes":[{"id":"call","type":"http","params":{"url":"`+slow.URL+
		`/slow","timeout":30},"next":"done"},{"id":"done","type":"end"}]}`, "", "")
	slow.waitSeen(t, "/slow", 30*time.Second, worker)
	if err := worker.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	worker.ended = true
	waitFor(t, "the draining worker not ready", 10*time.Second, func() bool {
		r = run(t, probeEnv, "probe", "--quiet")
		return r.code == 1
	}, worker)
	if !strings.Contains(r.stderr, "answered 503") {
		t.Fatalf("probe of a draining worker: %s", r.stderr)
	}
	if !worker.wait(30*time.Second) || worker.err != nil {
		t.Fatalf("the worker did not drain and exit 0: %v\n%s", worker.err, worker.stderr.String())
	}
	if st := s.waitDone(id); st.Status != state.Completed {
		t.Fatalf("the step in flight: %s", st.Status)
	}
	r = run(t, nil, "probe", fmt.Sprintf("http://127.0.0.1:%d/readyz", worker.port), "--quiet")
	if r.code != 1 || !strings.Contains(r.stderr, "not ready") {
		t.Fatalf("probe of a port nobody serves: exit %d\n%s", r.code, r.stderr)
	}
	if r = run(t, nil, "probe", "--quiet"); r.code != 2 || !strings.Contains(r.stderr, "PLAITA_METRICS_PORT is off") {
		t.Fatalf("probe without a port: exit %d\n%s", r.code, r.stderr)
	}
}
