package engine

import (
	"testing"

	"plaita/engine/state"
)

func TestAppendTimelineKeepsTheNewestAndCountsTheDropped(t *testing.T) {
	st := &state.Execution{}
	for i := range 5 {
		e := AppendTimeline(st, state.TimelineEntry{Event: "step"}, 3)
		if e.Seq != i+1 {
			t.Fatalf("entry %d recorded with seq %d", i+1, e.Seq)
		}
	}
	if len(st.Timeline) != 3 || st.TimelineDropped != 2 || st.Timeline[0].Seq != 3 || st.Timeline[2].Seq != 5 {
		t.Fatalf("timeline %+v, %d dropped", st.Timeline, st.TimelineDropped)
	}
	// A limit below 1 keeps the newest entry only.
	AppendTimeline(st, state.TimelineEntry{Event: "error"}, 0)
	if len(st.Timeline) != 1 || st.TimelineDropped != 5 || st.Timeline[0].Seq != 6 {
		t.Fatalf("limit 0: timeline %+v, %d dropped", st.Timeline, st.TimelineDropped)
	}
}
