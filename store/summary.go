package store

import "plaita/engine/state"

// SummaryOf is the listing's summary of a state, for a listing that reads states from another
// backend (the console's local mode, store/sqlite): the same fields a Redis listing gives.
func SummaryOf(st *state.Execution) Summary { return summarize(st, false) }
