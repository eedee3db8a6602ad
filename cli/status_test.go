package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"plaita/control"
)

// The instance table's CONFIG column says what its hash covers, and why a worker's differs
// from a filter's on one environment (a default that depends on the role), so that only a
// difference among replicas of one role reads as a problem.
func TestWriteStatusExplainsTheConfigHash(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	s := control.ClusterStatus{At: at, Instances: []control.InstanceStatus{
		{InstanceID: "filter-1", Role: "filter", Status: "running", ConfigGeneration: "cfg1-88c4c9bebc5d"},
		{InstanceID: "worker-1", Role: "worker", Status: "running", ConfigGeneration: "cfg1-cd9fb1d08ff1"},
	}}
	var b bytes.Buffer
	writeStatus(&b, s)
	out := b.String()
	for _, want := range []string{"CONFIG", "cfg1-88c4c9bebc5d", "cfg1-cd9fb1d08ff1",
		"hash of the effective values", "PLAITA_CODE_BACKEND", "replicas of one role should match"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	// No instance, no table and no note.
	b.Reset()
	writeStatus(&b, control.ClusterStatus{At: at})
	if strings.Contains(b.String(), "CONFIG") {
		t.Errorf("a note without instances:\n%s", b.String())
	}
}

// The delay queue's line counts apart the entries that wake nothing any more, and says when
// only the soonest were checked.
func TestWriteStatusCountsStaleDelayEntries(t *testing.T) {
	for _, tc := range []struct {
		d    control.DelayStatus
		want string
	}{
		{control.DelayStatus{Scheduled: 2, StaleChecked: 2}, "scheduled 2   due 0"},
		{control.DelayStatus{Scheduled: 2, Stale: 1, StaleChecked: 2}, "scheduled 2 (1 for waits already over: dropped when due)   due 0"},
		{control.DelayStatus{Scheduled: 500, Stale: 3, StaleChecked: 200}, "scheduled 500 (3 of the 200 soonest for waits already over: dropped when due)   due 0"},
	} {
		var b bytes.Buffer
		writeStatus(&b, control.ClusterStatus{Delay: tc.d})
		if !strings.Contains(b.String(), tc.want) {
			t.Errorf("%+v: no %q in\n%s", tc.d, tc.want, b.String())
		}
	}
}
