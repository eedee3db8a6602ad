package control

import (
	"context"
	"fmt"

	"plaita/engine"
	"plaita/engine/state"
	"plaita/queue"
)

// A dry run's forecast (docs/console.md, "Bulk jobs"): beside the count, what the job will do
// to each item — act on it, find nothing to do, or be refused, with the refusal's code. A count
// alone said "7 executions match" and offered "Retry these 7" to a job that then refused all 7.
// Each item is decided by the single-item operation's own decision, on the state the selection
// read (the listing returns it): cancel by cancelled, delete by deletable, retry by admitResume
// (Resume's check, each flow version read once per forecast), so the forecast and the job
// cannot disagree by rule, only by time: an item that changes between the dry run and the job's
// turn is decided then, and the job records what happened. A replay is forecast from the list's
// replay marks: a dead letter replayed already is nothing to do; one whose payload the replay
// refuses (replay_refused: none, truncated, undecodable) is only found out by the job.

// BulkForecast is what a job of a selection's action would do to its items, by outcome.
type BulkForecast struct {
	WillApply   int `json:"will_apply" doc:"items the operation will act on (cancel_requested, enqueued, deleted, replayed)"`
	NothingToDo int `json:"nothing_to_do" doc:"items already as asked (already_cancelled, already_replayed): the job counts them done and changes nothing"`
	// Refused counts the refusals by code; never nil.
	Refused map[string]int `json:"refused" doc:"items the operation will refuse, by the refusal's code (terminal, running, resume_refused, retry_budget, flow_hash_mismatch …): the job records each as failed with that code"`
}

// add counts one item's outcome.
func (f *BulkForecast) add(o BulkOutcome) {
	switch {
	case o.Code != "":
		f.Refused[o.Code]++
	case o.Result == resultAlreadyCancelled || o.Result == string(queue.ReplayAlreadyReplayed):
		f.NothingToDo++
	default:
		f.WillApply++
	}
}

// forecaster decides a selection's items one by one.
type forecaster struct {
	p      *Plane
	tenant string
	action BulkAction
	filter BulkFilter
	flows  map[flowKey]flowRead // each flow version an item runs, read once
	out    BulkForecast
}

type flowKey struct{ id, version string }

type flowRead struct {
	f   *engine.Flow
	err error
}

func (p *Plane) newForecaster(tenant string, action BulkAction, f BulkFilter) *forecaster {
	return &forecaster{p: p, tenant: tenant, action: action, filter: f, flows: map[flowKey]flowRead{},
		out: BulkForecast{Refused: map[string]int{}}}
}

// execution is the outcome BulkApply would report for st, decided by the operation's own
// decision without acting. An error is what that decision could not read (Redis): the forecast
// cannot be given.
func (fc *forecaster) execution(ctx context.Context, st *state.Execution) (BulkOutcome, error) {
	var result string
	var err error
	switch fc.action {
	case BulkCancel:
		var d Done
		var stop bool
		d, stop, err = cancelled(Done{}, st)
		if result = d.Result; !stop {
			result = resultCancelRequested
		}
	case BulkDelete:
		_, err = deletable(st, nil, false, fc.filter.Force)
		result = resultDeleted
	case BulkRetry:
		_, err = fc.p.admitResume(ctx, fc.tenant, st, bulkResume(fc.tenant, st.ExecutionID), fc.flow)
		result = resultEnqueued
	default:
		return BulkOutcome{}, fmt.Errorf("forecast %s of an execution: %s selects dead letters", fc.action, fc.action)
	}
	if err != nil && AsRefusal(err) == nil {
		return BulkOutcome{}, fmt.Errorf("forecast %s of %s: %w", fc.action, st.ExecutionID, err)
	}
	return bulkOutcome(result, err), nil
}

// deadLetter is the outcome a replay of e would report, as far as the list knows: its replay
// marker makes it "already_replayed"; anything else is replayed.
func (fc *forecaster) deadLetter(e queue.DLQEntry) BulkOutcome {
	if e.Replayed {
		return BulkOutcome{Result: string(queue.ReplayAlreadyReplayed)}
	}
	return BulkOutcome{Result: string(queue.ReplayDone)}
}

// flow is Plane.executionFlow read once per flow version for the whole forecast (a flowReader).
func (fc *forecaster) flow(ctx context.Context, tenant string, st *state.Execution) (*engine.Flow, error) {
	k := flowKey{st.FlowID, st.FlowVersion}
	r, ok := fc.flows[k]
	if !ok {
		r.f, r.err = fc.p.executionFlow(ctx, tenant, st)
		fc.flows[k] = r
	}
	return r.f, r.err
}
