//go:build e2e

package e2e

import (
	"slices"
	"syscall"
	"testing"
	"time"

	"plaita/engine/state"
	"plaita/store/keys"
)

// Executions listed by the INPUT fields their flow indexes and by start time, through the
// binary: `plaita execution list --index FIELD=VALUE --started-after --started-before`
// (docs/flows.md, "Indexed fields").

// A start whose first step calls out writes its state, and indexes it, before that step; the
// worker is killed in the step and the start is redelivered to another worker, which finds the
// state and runs it to the end: the execution is indexed once, under its start time, and listed
// once.
func TestE2EIndexedStartRedeliveredAfterKill9(t *testing.T) {
	t.Parallel()
	s := newStack(t, withTimeout(120*time.Second), withEnv(map[string]string{"PLAITA_CLAIM_MIN_IDLE_MS": "500", "PLAITA_LEASE_TTL_SECONDS": "2"}))
	hs := newPathServer(t, map[string]time.Duration{"/slow": 3 * time.Second})
	def := writeFile(t, "slow.json", `{"id": "slow-shop", "start": "slow", "index": ["order_id"], "nodes": [
		{"id": "slow", "type": "http", "params": {"url": "`+hs.URL+`/slow", "timeout": 20}, "next": "done"},
		{"id": "done", "type": "end", "params": {"output": "ok"}}]}`)
	a := s.spawn("worker", nil)
	id := s.startFlow(def, "", `{"order_id": "ord-7"}`)
	hs.waitSeen(t, "/slow", 30*time.Second, a)
	by, _ := keys.MustFor("", "").IndexBy("order_id", `"ord-7"`)
	if _, err := s.c.Do(s.ctx, s.c.B().Zscore().Key(by).Member(id).Build()).AsFloat64(); err != nil {
		t.Fatalf("during the first step, %s is not indexed in %s: %v", id, by, err)
	}
	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if !a.wait(10 * time.Second) {
		t.Fatal("worker A survived kill -9")
	}
	b := s.spawn("worker", nil)
	var st *state.Execution
	waitFor(t, "the redelivered start to complete", 60*time.Second, func() bool {
		var err error
		st, err = s.ts.Peek(s.ctx, id) // Peek: a Load would repair a missing index member
		return err == nil && st.Status.Terminal()
	}, a, b)
	if st.Status != state.Completed || hs.count("/slow") != 2 {
		t.Fatalf("status %s, /slow requested %d times (want completed, 2)", st.Status, hs.count("/slow"))
	}
	rows, err := s.c.Do(s.ctx, s.c.B().Zrange().Key(by).Min("0").Max("-1").Withscores().Build()).AsZScores()
	if err != nil || len(rows) != 1 || rows[0].Member != id || rows[0].Score != float64(st.StartTime.UnixMilli()) {
		t.Fatalf("%s: %v %v, want only %s at %d", by, rows, err, id, st.StartTime.UnixMilli())
	}
	if got, _, _ := s.listJSON("--index", "order_id=ord-7"); !slices.Equal(got, []string{id}) {
		t.Errorf("listed %v, want [%s]", got, id)
	}
}
