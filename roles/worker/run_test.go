package worker

import (
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/rs/zerolog"

	"plaita/engine"
	"plaita/engine/state"
)

// An execution the worker ends in error itself (crashing runs, a refused start, exhausted
// deliveries) keeps its timeline within PLAITA_EXECUTION_TIMELINE_MAX, as the engine's own
// entries do: the oldest entry goes and is counted in timeline_dropped.
func TestEndInErrorKeepsTheTimelineWithinItsMaximum(t *testing.T) {
	f := newDispatchFix(t, nil)
	const max = 3
	set := engine.DefaultSettings()
	set.TimelineMax = max
	p := NewDispatcher(Deps{Root: f.root, Queue: f.q, Store: f.st, Engine: set, Log: zerolog.Nop(), Metrics: metrics.NewSet(),
		Settings: withIdentity(SettingsFrom(f.cfg), "inst-w1", 1)})
	ts := f.ts(t)
	now := time.Now().UTC()
	st := &state.Execution{ExecutionID: "ex_full_timeline", FlowID: "f", FlowVersion: "1", Status: state.Running, CurrentNode: "n",
		StartTime: now, LastUpdate: now, TimelineDropped: 4}
	for i := range max {
		st.Timeline = append(st.Timeline, state.TimelineEntry{Seq: 5 + i, Time: state.Stamp(now), Event: "step", Node: "n"})
	}
	if err := ts.Save(dctx(t), st); err != nil {
		t.Fatal(err)
	}
	lease, err := ts.Acquire(dctx(t), st.ExecutionID, "inst-w1")
	if err != nil {
		t.Fatal(err)
	}
	if err := p.endInError(dctx(t), lease, st, ErrTypeDeterministicFailure, "crashed", true); err != nil {
		t.Fatal(err)
	}
	got, err := ts.Load(dctx(t), st.ExecutionID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != state.Error || len(got.Timeline) != max || got.TimelineDropped != 5 {
		t.Fatalf("status %s, %d timeline entries (max %d), %d dropped (want 5)", got.Status, len(got.Timeline), max, got.TimelineDropped)
	}
	last := got.Timeline[max-1]
	if last.Event != string(state.Error) || last.Seq != 8 || got.Timeline[0].Seq != 6 {
		t.Errorf("timeline %+v", got.Timeline)
	}
}
