package sqlite

import (
	"fmt"
	"testing"
	"time"

	"plaita/store"
)

func items(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("ex_%d", i+1)
	}
	return out
}

// A job's items are claimed a batch at a time under a lease, recorded with their outcomes, and
// the job completes when none is left; another runner waits for the lease, a tenant sees only
// its own jobs, and the failures page in order.
func TestBulkJobClaimAndRecord(t *testing.T) {
	t.Parallel()
	f := setup(t)
	c := ctx(t)
	j := must[Job](t)(f.CreateBulkJob(c, NewJob{Tenant: "acme", Kind: "executions.cancel", Filter: []byte(`{"status":"running"}`), CreatedBy: "ann"}, items(450), true))
	if j.Total != 450 || j.Status != JobPending || !j.Truncated {
		t.Fatalf("created %+v", j)
	}
	j, got, err := f.ClaimJobItems(c, "acme", j.ID, "r1", 100, time.Minute)
	if err != nil || len(got) != 100 || got[0].Seq != 1 || got[99].Item != "ex_100" || got[0].State != ItemApplying || j.Status != JobRunning {
		t.Fatalf("claim: %+v %d items %v", j, len(got), err)
	}
	_, _, err = f.ClaimJobItems(c, "acme", j.ID, "r2", 100, time.Minute)
	wantErr(t, "another runner's claim", err, ErrPrecondition, ErrJobLeased)
	_, _, err = f.ClaimJobItems(c, "other", j.ID, "r1", 100, time.Minute)
	wantErr(t, "another tenant's claim", err, store.ErrNotFound, ErrJobNotFound)

	var out []JobItemOutcome
	for _, it := range got {
		switch {
		case it.Seq <= 90:
			out = append(out, JobItemOutcome{Seq: it.Seq, State: ItemDone, Result: "cancel_requested"})
		case it.Seq < 100:
			out = append(out, JobItemOutcome{Seq: it.Seq, State: ItemFailed, Code: "terminal", Error: "already completed"})
		default:
			out = append(out, JobItemOutcome{Seq: it.Seq, State: ItemPending}) // given back
		}
	}
	j = must[Job](t)(f.RecordJobItems(c, "acme", j.ID, "r1", time.Minute, out))
	if j.Succeeded != 90 || j.Failed != 9 || j.Status != JobRunning {
		t.Fatalf("recorded %+v", j)
	}
	_, again, err := f.ClaimJobItems(c, "acme", j.ID, "r1", 5, time.Minute)
	if err != nil || len(again) != 5 || again[0].Seq != 100 {
		t.Fatalf("the item given back comes first: %+v %v", again, err)
	}
	p := must[Page[JobItem]](t)(f.JobItems(c, "acme", j.ID, ItemFailed, ListOptions{Limit: 5}))
	if len(p.Items) != 5 || p.Items[0].Seq != 91 || p.Items[0].Code != "terminal" || p.Next == "" {
		t.Fatalf("failures page 1 %+v", p)
	}
	p = must[Page[JobItem]](t)(f.JobItems(c, "acme", j.ID, ItemFailed, ListOptions{Limit: 5, Cursor: p.Next}))
	if len(p.Items) != 4 || p.Items[0].Seq != 96 || p.Next != "" {
		t.Fatalf("failures page 2 %+v", p)
	}
	_, err = f.JobItems(c, "other", j.ID, "", ListOptions{})
	wantErr(t, "another tenant's items", err, store.ErrNotFound, ErrJobNotFound)
	_, err = f.JobItems(c, "acme", j.ID, "", ListOptions{Cursor: "bogus"})
	wantErr(t, "a bad cursor", err, store.ErrInvalid, ErrBadCursor)

	// Runner r1 dies with 5 items applying; once its lease runs out r2 takes the job over and
	// those 5 are failed, not applied again. r1's late report changes nothing.
	f.clock.Advance(2 * time.Minute)
	refs := must[[]JobRef](t)(f.RunnableJobs(c, "r2", 10))
	if len(refs) != 1 || refs[0] != (JobRef{Tenant: "acme", ID: j.ID}) {
		t.Fatalf("runnable %+v", refs)
	}
	j, next, err := f.ClaimJobItems(c, "acme", j.ID, "r2", 1000, time.Minute)
	if err != nil || len(next) != 346 || next[0].Seq != 105 || j.Failed != 14 {
		t.Fatalf("take-over: %+v %d items (first %+v) %v", j, len(next), next[0], err)
	}
	p = must[Page[JobItem]](t)(f.JobItems(c, "acme", j.ID, ItemFailed, ListOptions{Limit: 500}))
	if last := p.Items[len(p.Items)-1]; last.Seq != 104 || last.Code != CodeInterrupted {
		t.Fatalf("the interrupted items %+v", p.Items)
	}
	j = must[Job](t)(f.RecordJobItems(c, "acme", j.ID, "r1", time.Minute, []JobItemOutcome{{Seq: 100, State: ItemDone}}))
	if j.Succeeded != 90 || j.Failed != 14 {
		t.Fatalf("a late report counted: %+v", j)
	}
	var rest []JobItemOutcome
	for _, it := range next {
		rest = append(rest, JobItemOutcome{Seq: it.Seq, State: ItemDone, Result: "cancel_requested"})
	}
	j = must[Job](t)(f.RecordJobItems(c, "acme", j.ID, "r2", time.Minute, rest))
	if j.Status != JobCompleted || j.Succeeded+j.Failed != j.Total {
		t.Fatalf("all recorded: %+v", j)
	}
	if refs := must[[]JobRef](t)(f.RunnableJobs(c, "r2", 10)); len(refs) != 0 {
		t.Fatalf("a completed job is runnable: %+v", refs)
	}
	_, err = f.CancelJob(c, "acme", j.ID)
	wantErr(t, "cancel a completed job", err, ErrPrecondition, ErrJobFinished)
}

// A cancelled job gives out nothing more, and still records what was in hand; a released lease
// lets another runner in at once; an empty job completes at its first claim.
func TestBulkJobCancelReleaseAndEmpty(t *testing.T) {
	t.Parallel()
	f := setup(t)
	c := ctx(t)
	j := must[Job](t)(f.CreateBulkJob(c, NewJob{Tenant: "acme", Kind: "executions.retry"}, items(3), false))
	_, got, err := f.ClaimJobItems(c, "acme", j.ID, "r1", 1, time.Minute)
	if err != nil || len(got) != 1 {
		t.Fatal(got, err)
	}
	must[Job](t)(f.RecordJobItems(c, "acme", j.ID, "r1", time.Minute, []JobItemOutcome{{Seq: 1, State: ItemDone}}))
	if err := f.ReleaseJob(c, "acme", j.ID, "r1"); err != nil {
		t.Fatal(err)
	}
	_, got, err = f.ClaimJobItems(c, "acme", j.ID, "r2", 1, time.Minute)
	if err != nil || len(got) != 1 || got[0].Seq != 2 {
		t.Fatalf("after a release: %+v %v", got, err)
	}
	j = must[Job](t)(f.CancelJob(c, "acme", j.ID))
	if j.Status != JobCancelled {
		t.Fatalf("cancel: %+v", j)
	}
	// What r2 had in hand when the job was cancelled is still recorded; nothing more is given out.
	j = must[Job](t)(f.RecordJobItems(c, "acme", j.ID, "r2", time.Minute, []JobItemOutcome{{Seq: 2, State: ItemFailed, Code: "terminal"}}))
	j, more, err := f.ClaimJobItems(c, "acme", j.ID, "r2", 10, time.Minute)
	if err != nil || len(more) != 0 || j.Status != JobCancelled || j.Succeeded != 1 || j.Failed != 1 {
		t.Fatalf("claim of a cancelled job: %+v %v %v", j, more, err)
	}
	_, err = f.CancelJob(c, "other", j.ID)
	wantErr(t, "another tenant's cancel", err, store.ErrNotFound, ErrJobNotFound)

	e := must[Job](t)(f.CreateBulkJob(c, NewJob{Tenant: "acme", Kind: "executions.delete"}, nil, false))
	if e, got, err := f.ClaimJobItems(c, "acme", e.ID, "r1", 10, time.Minute); err != nil || len(got) != 0 || e.Status != JobCompleted {
		t.Fatalf("an empty job: %+v %v %v", e, got, err)
	}
	_, err = f.RecordJobItems(c, "acme", e.ID, "r1", time.Minute, []JobItemOutcome{{Seq: 1, State: "maybe"}})
	wantErr(t, "a bad outcome", err, store.ErrInvalid, nil)
	_, err = f.CreateBulkJob(c, NewJob{Tenant: "acme", Kind: "executions.delete"}, make([]string, MaxJobItems+1), false)
	wantErr(t, "too many items", err, store.ErrInvalid, nil)
}
