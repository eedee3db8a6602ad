//go:build !e2e

package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"plaita/engine/state"
)

// `plaita reap` beside a real worker: an execution on a long node (its lease held by the
// worker's watchdog, its last update as stale as the zombie's) is never reaped and completes; a
// zombie (running, no lease, no task: its task was dead-lettered) is reaped — after a dry run
// that writes nothing and alerts nothing — with one zombie_reaped alert.
func TestE2EReap(t *testing.T) {
	t.Parallel()
	slow := newPathServer(t, map[string]time.Duration{"/slow": 6 * time.Second})
	var mu sync.Mutex
	var alerts []map[string]any
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev map[string]any
		b, _ := io.ReadAll(r.Body)
		if json.Unmarshal(b, &ev) == nil {
			mu.Lock()
			alerts = append(alerts, ev)
			mu.Unlock()
		}
	}))
	t.Cleanup(hook.Close)

	s := newStack(t, withEnv(cliEnv()))
	s.start("worker", nil)
	s.publish("slow", `{"id":"slow","start":"call","nodes":[{"id":"call","type":"http","params":{"url":"`+slow.URL+`/slow","timeout":30},"next":"done"},{"id":"done","type":"end"}]}`)
	live := s.enqueue("slow")
	slow.waitSeen(t, "/slow", 30*time.Second, s.procs...)

	old := time.Now().UTC().Add(-2 * time.Hour)
	zombie := &state.Execution{ExecutionID: "ex_zombie", TenantID: "default", FlowID: "slow", FlowVersion: "1", Status: state.Running,
		CurrentNode: "call", Context: map[string]any{}, StartTime: old, LastUpdate: old}
	if err := s.ts.Save(s.ctx, zombie); err != nil {
		t.Fatal(err)
	}
	const idle = "0.02" // 1.2 s: the live execution's last update is older than that while its node runs
	waitFor(t, "the live execution idle past the bound", 30*time.Second, func() bool {
		st := s.show(live, "")
		return st.Status == state.Running && time.Since(st.LastUpdate) > 2*time.Second
	}, s.procs...)

	type item struct {
		ExecutionID string `json:"execution_id"`
		Outcome     string `json:"outcome"`
	}
	type report struct {
		Reaped  []item `json:"reaped"`
		Skipped []item `json:"skipped"`
	}
	reap := func(args ...string) report {
		t.Helper()
		var rep report
		out := s.cli(append([]string{"reap", "--idle-minutes", idle, "--json", "--alert-webhook", hook.URL}, args...)...)
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("reap --json: %v\n%s", err, out)
		}
		return rep
	}
	rep := reap("--dry-run")
	if len(rep.Reaped) != 1 || rep.Reaped[0].ExecutionID != "ex_zombie" || rep.Reaped[0].Outcome != "would_reap" ||
		len(rep.Skipped) != 1 || rep.Skipped[0].ExecutionID != live || rep.Skipped[0].Outcome != "lease_held" {
		t.Fatalf("dry run: %+v", rep)
	}
	if st := s.show("ex_zombie", ""); st.Status != state.Running {
		t.Fatalf("the dry run wrote: %s", st.Status)
	}
	rep = reap("--all-tenants")
	if len(rep.Reaped) != 1 || rep.Reaped[0].Outcome != "reaped" || len(rep.Skipped) != 1 || rep.Skipped[0].Outcome != "lease_held" {
		t.Fatalf("reap: %+v", rep)
	}
	if st := s.show("ex_zombie", ""); st.Status != state.Error || st.Error == nil || st.Error.Type != "Orphaned" {
		t.Fatalf("the zombie after the reap: %s %+v", st.Status, st.Error)
	}
	if done := s.waitStatus(live, "", state.Completed, 60*time.Second); resumes(done) != 0 {
		t.Fatalf("the live execution: %+v", done.Status)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(alerts) != 1 || alerts[0]["event"] != "zombie_reaped" || alerts[0]["fields"].(map[string]any)["execution_id"] != "ex_zombie" {
		t.Fatalf("alerts: %v (want one zombie_reaped, none from the dry run)", alerts)
	}
}

// `plaita reindex` after the index was lost and left with garbage: every execution is listed
// again and the listing is no longer degraded.
func TestE2EReindex(t *testing.T) {
	t.Parallel()
	s := newStack(t, withEnv(cliEnv()))
	s.start("worker", nil)
	s.publish("hi", `{"id":"hi","start":"done","nodes":[{"id":"done","type":"end","params":{"output":"hi"}}]}`)
	ids := []string{s.enqueue("hi"), s.enqueue("hi"), s.enqueue("hi")}
	for _, id := range ids {
		s.waitStatus(id, "", state.Completed, 60*time.Second)
	}
	idx := s.ts.Space().Index()
	if err := s.c.Do(s.ctx, s.c.B().Del().Key(idx).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if err := s.c.Do(s.ctx, s.c.B().Zadd().Key(idx).ScoreMember().ScoreMember(1, "ex_gone").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Tenants []struct {
			Added   int `json:"added"`
			Removed int `json:"removed"`
		} `json:"tenants"`
	}
	if err := json.Unmarshal([]byte(s.cli("reindex", "--json")), &rep); err != nil || len(rep.Tenants) != 1 ||
		rep.Tenants[0].Added != 3 || rep.Tenants[0].Removed != 1 {
		t.Fatalf("reindex: %+v %v", rep, err)
	}
	var list struct {
		Items    []struct{ ExecutionID string } `json:"items"`
		Degraded bool                           `json:"degraded"`
	}
	if err := json.Unmarshal([]byte(s.cli("execution", "list", "--json")), &list); err != nil || len(list.Items) != 3 || list.Degraded {
		t.Fatalf("execution list after the reindex: %+v %v", list, err)
	}
}
