//go:build !e2e

package e2e

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"plaita/engine/state"
)

// An approval answered before its timeout leaves the timeout's entry on the delay queue until
// it is due (the delay role then sends it and the worker drops it as stale). `plaita status`
// counts such an entry apart — scheduled, and stale — and does not call it a wake-up nothing
// sends: with no delay role alive, only a live entry needs one.
func TestE2EStatusCountsStaleDelayEntries(t *testing.T) {
	t.Parallel()
	s := newStack(t, withEnv(cliEnv()))
	s.start("worker", nil)
	type delayJSON struct {
		Scheduled    int64 `json:"scheduled"`
		Stale        int64 `json:"stale"`
		StaleChecked int64 `json:"stale_checked"`
	}
	status := func() (delayJSON, []string, result) {
		t.Helper()
		r := run(t, s.env, "status", "--json", "--quiet")
		var st struct {
			Delay     delayJSON `json:"delay"`
			Attention []struct {
				Code string `json:"code"`
			} `json:"attention"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
			t.Fatalf("status --json: %v\n%s%s", err, r.stdout, r.stderr)
		}
		var codes []string
		for _, f := range st.Attention {
			codes = append(codes, f.Code)
		}
		return st.Delay, codes, r
	}

	// Suspended at an approval with a day's timeout: its entry is live.
	id := s.startFlow(repoFlow(t, "expense-approval.json"), "", `{"amount": 500}`)
	s.waitStatus(id, "", state.Suspended, 60*time.Second)
	d, codes, _ := status()
	if d.Scheduled != 1 || d.Stale != 0 || d.StaleChecked != 1 || !slices.Contains(codes, "no_delay_role") {
		t.Fatalf("suspended at the approval: delay %+v, attention %v", d, codes)
	}

	// Answered: the execution completes; the timeout's entry stays until due, counted stale.
	s.cli("approval", "approve", id, "--by", "lee")
	s.waitStatus(id, "", state.Completed, 60*time.Second)
	d, codes, r := status()
	if d.Scheduled != 1 || d.Stale != 1 || d.StaleChecked != 1 || slices.Contains(codes, "no_delay_role") {
		t.Fatalf("answered: delay %+v, attention %v\n%s", d, codes, r.stdout)
	}
	mustContain(t, "status table", run(t, s.env, "status", "--quiet").stdout,
		"scheduled 1 (1 for waits already over: dropped when due)")
}
