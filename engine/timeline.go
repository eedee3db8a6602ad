package engine

import "plaita/engine/state"

// AppendTimeline records entry as the newest of st's timeline, bounded to limit entries
// (PLAITA_EXECUTION_TIMELINE_MAX, Settings.TimelineMax; < 1 counts as 1): when the timeline is
// full the oldest entries go and are counted in st.TimelineDropped, so Seq keeps numbering every
// entry ever recorded. Every entry after a state's first ("started", NewState) is appended
// here — the executor's and the worker's own error endings alike (roles/worker/run.go
// endInError) — and it returns the entry as recorded (its Seq set). The caller stamps
// entry.Time.
func AppendTimeline(st *state.Execution, entry state.TimelineEntry, limit int) state.TimelineEntry {
	limit = max(limit, 1)
	entry.Seq = st.TimelineDropped + len(st.Timeline) + 1
	if len(st.Timeline) >= limit {
		drop := len(st.Timeline) - limit + 1
		st.Timeline = append(st.Timeline[:0], st.Timeline[drop:]...)
		st.TimelineDropped += drop
	}
	st.Timeline = append(st.Timeline, entry)
	return entry
}
