package queue

import (
	"testing"
	"time"

	"plaita/engine/state"
	"plaita/test/redistest"
)

// Soonest reads the members due or not, soonest first, up to its limit; a member that does not
// decode is read and left out.
func TestDelaySoonestReadsEveryMember(t *testing.T) {
	t.Parallel()
	c := redistest.Client(t)
	f := newDelayFix(t, c, redistest.Root(t, c))
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	if es, read, err := f.d.Soonest(testCtx(t), 10); err != nil || len(es) != 0 || read != 0 {
		t.Fatalf("empty queue: %v %d %v", es, read, err)
	}
	past, soon := entryAt("ex_past", state.ResumeContinue, now.Add(-time.Minute)), entryAt("ex_soon", state.ResumeTimeout, now.Add(time.Hour))
	last := entryAt("ex_last", state.ResumeTimeout, time.UnixMilli(MaxDelayDueMillis).UTC())
	f.schedule(t, last, soon, past)
	f.zadd(t, "junk", now)
	es, read, err := f.d.Soonest(testCtx(t), 10)
	if err != nil || read != 4 || len(es) != 3 ||
		es[0].ExecutionID != "ex_past" || es[1].ExecutionID != "ex_soon" || es[2].ExecutionID != "ex_last" || !es[2].Due.Equal(last.Due) {
		t.Fatalf("every member: %+v read %d %v", es, read, err)
	}
	es, read, err = f.d.Soonest(testCtx(t), 2)
	if err != nil || read != 2 || len(es) != 1 || es[0].ExecutionID != "ex_past" {
		t.Fatalf("the two soonest: %+v read %d %v", es, read, err)
	}
}

// Wakes is the worker's rule for a suspended state: the entry's node, due time and a kind its
// resume type ends; anything else (another suspension, a running or ended execution, none) is
// stale.
func TestDelayEntryWakes(t *testing.T) {
	t.Parallel()
	due := time.Date(2026, 11, 29, 12, 0, 0, 123456789, time.UTC)
	other := due.Add(time.Second)
	suspended := func(kind, node string, due *time.Time) *state.Execution {
		return &state.Execution{ExecutionID: "ex_1", Status: state.Suspended, Suspend: &state.Suspend{Kind: kind, Node: node, Due: due}}
	}
	timeout := DelayEntry{ExecutionID: "ex_1", ResumeType: state.ResumeTimeout, Node: "ask", Due: due.Truncate(time.Millisecond)}
	cont := DelayEntry{ExecutionID: "ex_1", ResumeType: state.ResumeContinue, Node: "ask", Due: due}
	for _, tc := range []struct {
		name  string
		e     DelayEntry
		st    *state.Execution
		wakes bool
	}{
		{"the approval's timeout", timeout, suspended(state.SuspendApproval, "ask", &due), true},
		{"the wait's timeout", timeout, suspended(state.SuspendEvent, "ask", &due), true},
		{"the delay", cont, suspended(state.SuspendDelay, "ask", &due), true},
		{"a timeout for a delay", timeout, suspended(state.SuspendDelay, "ask", &due), false},
		{"a continue for an approval", cont, suspended(state.SuspendApproval, "ask", &due), false},
		{"another node", timeout, suspended(state.SuspendApproval, "other", &due), false},
		{"another due time", timeout, suspended(state.SuspendApproval, "ask", &other), false},
		{"no due time", timeout, suspended(state.SuspendApproval, "ask", nil), false},
		{"answered and completed", timeout, &state.Execution{ExecutionID: "ex_1", Status: state.Completed}, false},
		{"running on", timeout, &state.Execution{ExecutionID: "ex_1", Status: state.Running}, false},
		{"suspended without a record", timeout, &state.Execution{ExecutionID: "ex_1", Status: state.Suspended}, false},
		{"no state", timeout, nil, false},
	} {
		if got := tc.e.Wakes(tc.st); got != tc.wakes {
			t.Errorf("%s: wakes %v, want %v", tc.name, got, tc.wakes)
		}
	}
}
