//go:build !e2e

package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"plaita/control"
	"plaita/engine/state"
)

// `plaita status` against a stack the test builds step by step: each step changes one count and
// the status says so, and exits 1 exactly while something needs attention.
func TestE2EStatus(t *testing.T) {
	t.Parallel()
	s := newStack(t, withEnv(cliEnv()))
	status := func() (control.ClusterStatus, result) {
		t.Helper()
		r := run(t, s.env, "status", "--json", "--quiet")
		var st control.ClusterStatus
		if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
			t.Fatalf("status --json: %v\n%s%s", err, r.stdout, r.stderr)
		}
		return st, r
	}
	codes := func(st control.ClusterStatus) []string {
		var out []string
		for _, f := range st.Attention {
			out = append(out, f.Code)
		}
		return out
	}

	// Nothing yet: healthy, an empty queue with no group.
	if st, r := status(); r.code != 0 || st.Queue.GroupExists || st.Queue.Length != 0 || len(st.Instances) != 0 {
		t.Fatalf("empty stack: exit %d %+v", r.code, st)
	}

	// Three starts and no worker: the backlog and who is missing.
	s.publish("nap", `{"id":"nap","start":"nap","nodes":[{"id":"nap","type":"delay","params":{"seconds":3600},"next":"done"},{"id":"done","type":"end"}]}`)
	s.publish("wait", `{"id":"wait","start":"w","nodes":[{"id":"w","type":"wait_event","params":{"event_type":"paid","match":"EVENT.order == 7"},"next":"done"},{"id":"done","type":"end"}]}`)
	naps := []string{s.enqueue("nap"), s.enqueue("nap")}
	wait := s.enqueue("wait")
	st, r := status()
	if r.code != 1 || st.Queue.Length != 3 || st.Queue.Lag != 3 || st.Queue.Pending != 0 || codes(st)[0] != "no_worker" {
		t.Fatalf("three starts, no worker: exit %d codes %v %+v", r.code, codes(st), st.Queue)
	}
	mustContain(t, "status table", run(t, s.env, "status", "--quiet").stdout, "length 3", "lag 3", "no worker alive", "needs attention")

	// A worker runs them into their waits; no delay or filter role is alive to wake them.
	s.start("worker", nil)
	for _, id := range append(naps, wait) {
		s.waitStatus(id, "", state.Suspended, 60*time.Second)
	}
	waitFor(t, "the worker registered", 30*time.Second, func() bool {
		st, _ := status()
		return len(st.Instances) == 1
	}, s.procs...)
	st, r = status()
	want := []string{"no_delay_role", "unwoken_delay", "unwoken_filter"}
	if r.code != 1 || strings.Join(codes(st), ",") != strings.Join(want, ",") {
		t.Fatalf("suspended with no delay or filter role: exit %d codes %v, want %v\n%s", r.code, codes(st), want, r.stdout)
	}
	if sp := st.Suspended; sp.Total != 3 || sp.ByKind["delay"] != 2 || sp.ByKind["event"] != 1 || sp.Unwoken["delay"] != 2 ||
		sp.Unwoken["filter"] != 1 || !sp.Complete || st.Delay.Scheduled != 2 || st.Queue.Length != 0 {
		t.Fatalf("suspended: %+v delay %+v queue %+v", sp, st.Delay, st.Queue)
	}
	if in := st.Instances[0]; in.Role != "worker" || in.Status != "running" || in.Capacity != 2 || in.ConfigGeneration == "" {
		t.Fatalf("the worker's row: %+v", in)
	}

	// The delay and filter roles start: healthy.
	s.start("delay", nil)
	s.start("filter", nil)
	waitFor(t, "status healthy", 30*time.Second, func() bool {
		_, r := status()
		return r.code == 0
	}, s.procs...)
	st, _ = status()
	roles := map[string]int{}
	for _, r := range st.Roles {
		roles[r.Role] = r.Running
	}
	if roles["worker"] != 1 || roles["delay"] != 1 || roles["filter"] != 1 || roles["schedule"] != 0 || len(st.Unreadable) != 0 {
		t.Fatalf("roles: %+v", st.Roles)
	}

	// A second worker with another delivery budget: a generation mismatch on the queue.
	second := s.start("worker", map[string]string{"PLAITA_MAX_DELIVERIES": "9"})
	waitFor(t, "the second worker registered", 30*time.Second, func() bool {
		st, _ := status()
		return len(st.Mismatches) > 0
	}, s.procs...)
	st, r = status()
	gens := map[string]bool{}
	for _, m := range st.Mismatches {
		gens[m.Generation] = len(m.Values) == 2 && m.Role == "worker"
	}
	if r.code != 1 || !gens["budget_generation"] || !gens["config_generation"] || gens["config_family"] {
		t.Fatalf("two budgets on one queue: exit %d %+v", r.code, st.Mismatches)
	}
	second.stop(t)
	waitFor(t, "the second worker deregistered", 30*time.Second, func() bool {
		_, r := status()
		return r.code == 0
	}, s.procs...)

	// A start of a flow no one published is dead-lettered.
	s.enqueue("missing")
	waitFor(t, "the dead letter", 60*time.Second, func() bool { return s.dlqLen() == 1 }, s.procs...)
	if st, r = status(); r.code != 1 || strings.Join(codes(st), ",") != "dead_letters" || st.Queue.DLQLength != 1 {
		t.Fatalf("a dead letter: exit %d %v", r.code, codes(st))
	}

	if r := run(t, map[string]string{"PLAITA_REDIS_URL": s.env["PLAITA_REDIS_URL"], "PLAITA_MAX_DELIVERIES": "x"}, "status"); r.code != 2 {
		t.Fatalf("status with a rejected configuration: exit %d %s", r.code, r.stderr)
	}
}
