package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"plaita/internal/callctx"
	"plaita/internal/service"
	"plaita/store/sqlite"
)

// Bulk keeps and runs a process's bulk jobs: Submit creates one (or counts, for a dry run),
// the service applies their items a batch at a time, oldest job first and one batch per job
// per round (a large job does not hold up a small one). It runs in the console, on its
// lifecycle.
//
// Restarts: a job outlives the process. Its items are in the job store; a runner claims a batch
// under the job's lease, applies it, records each outcome, and renews the lease. Stopping
// (a drain) finishes the batch in hand, records it, gives back what it had not started, and
// releases the leases: the next console resumes the job at once. A console that dies leaves its
// lease to run out (BulkSettings.Lease) and the items it was applying to the next claim, which
// fails them with the code "interrupted" — it may or may not have applied them, and no item is
// ever applied twice. So a job is resumed, never restarted from the top.
type Bulk struct {
	service.Base
	p    *Plane
	jobs JobStore
	s    BulkSettings
	wake chan struct{}

	mu   sync.Mutex
	held map[sqlite.JobRef]bool // jobs whose lease this runner took: released at Stop
}

// JobStore is where bulk jobs and their items are kept (store/sqlite's DB).
type JobStore interface {
	CreateBulkJob(ctx context.Context, nj sqlite.NewJob, items []string, truncated bool) (sqlite.Job, error)
	Job(ctx context.Context, tenant, id string) (sqlite.Job, error)
	ListJobs(ctx context.Context, tenant string, o sqlite.ListOptions) (sqlite.Page[sqlite.Job], error)
	JobItems(ctx context.Context, tenant, id string, state sqlite.JobItemState, o sqlite.ListOptions) (sqlite.Page[sqlite.JobItem], error)
	CancelJob(ctx context.Context, tenant, id string) (sqlite.Job, error)
	RunnableJobs(ctx context.Context, runner string, limit int) ([]sqlite.JobRef, error)
	ClaimJobItems(ctx context.Context, tenant, id, runner string, n int, lease time.Duration) (sqlite.Job, []sqlite.JobItem, error)
	RecordJobItems(ctx context.Context, tenant, id, runner string, lease time.Duration, out []sqlite.JobItemOutcome) (sqlite.Job, error)
	ReleaseJob(ctx context.Context, tenant, id, runner string) error
}

// BulkSettings pace a runner.
type BulkSettings struct {
	// Runner names this runner in the job leases: the console's instance id.
	Runner string
	// Batch is how many items are claimed at once (0: 16); Lease how long a claim holds the job
	// (0: 30 s; renewed by every batch); Idle how often jobs are looked for when none was
	// submitted here (0: 5 s: another console's, or one left by a console that died);
	// OpTimeout bounds one item's operation (0: 10 s).
	Batch     int
	Lease     time.Duration
	Idle      time.Duration
	OpTimeout time.Duration
	// OnError hears what kept a round from running (the job store failed); nil: nothing.
	OnError func(error)
}

// NewBulk returns the bulk jobs of p kept in jobs; Start runs them.
func NewBulk(p *Plane, jobs JobStore, s BulkSettings) *Bulk {
	s.Batch = max(s.Batch, 0)
	if s.Batch == 0 {
		s.Batch = 16
	}
	s.Lease = cmpDuration(s.Lease, 30*time.Second)
	s.Idle = cmpDuration(s.Idle, 5*time.Second)
	s.OpTimeout = cmpDuration(s.OpTimeout, 10*time.Second)
	if s.Runner == "" {
		s.Runner = "console"
	}
	if s.OnError == nil {
		s.OnError = func(error) {}
	}
	return &Bulk{p: p, jobs: jobs, s: s, wake: make(chan struct{}, 1), held: map[sqlite.JobRef]bool{}}
}

// Submit counts what req matches and forecasts what a job would do to it (dryRun), or creates
// a job of it and wakes the runner; the selection is returned either way.
func (b *Bulk) Submit(ctx context.Context, req BulkRequest, dryRun bool, createdBy string) (BulkSelection, *BulkJob, error) {
	sel, err := b.p.bulkSelect(ctx, req, dryRun)
	if err != nil || dryRun {
		return sel, nil, err
	}
	filter, err := json.Marshal(req.Filter)
	if err != nil {
		return sel, nil, fmt.Errorf("bulk filter: %w", err)
	}
	j, err := b.jobs.CreateBulkJob(ctx, sqlite.NewJob{Tenant: sel.TenantID, Kind: BulkKind(req.Action), Filter: filter, CreatedBy: createdBy},
		sel.Items, sel.Truncated)
	if err != nil {
		return sel, nil, fmt.Errorf("create the job: %w", err)
	}
	select {
	case b.wake <- struct{}{}:
	default:
	}
	job := bulkJobOf(j)
	return sel, &job, nil
}

// BulkJobPage is a page of a tenant's jobs, newest first.
type BulkJobPage struct {
	Items []BulkJob `json:"items"`
	Next  string    `json:"next_cursor,omitempty" doc:"the cursor of the next page"`
}

// Jobs pages a tenant's jobs, newest first.
func (b *Bulk) Jobs(ctx context.Context, tenant, cursor string, limit int) (BulkJobPage, error) {
	tenant, err := b.p.Tenant(tenant)
	if err != nil {
		return BulkJobPage{}, err
	}
	page, err := b.jobs.ListJobs(ctx, tenant, sqlite.ListOptions{Cursor: cursor, Limit: limit})
	if err != nil {
		return BulkJobPage{}, err
	}
	out := BulkJobPage{Items: make([]BulkJob, 0, len(page.Items)), Next: page.Next}
	for _, j := range page.Items {
		out.Items = append(out.Items, bulkJobOf(j))
	}
	return out, nil
}

// Job reads one job of a tenant.
func (b *Bulk) Job(ctx context.Context, tenant, id string) (BulkJob, error) {
	tenant, err := b.p.Tenant(tenant)
	if err != nil {
		return BulkJob{}, err
	}
	j, err := b.jobs.Job(ctx, tenant, id)
	if err != nil {
		return BulkJob{}, jobRefusal(err, id)
	}
	return bulkJobOf(j), nil
}

// BulkItemPage is a page of a job's items, in order.
type BulkItemPage struct {
	JobID string           `json:"job_id"`
	Items []sqlite.JobItem `json:"items"`
	Next  string           `json:"next_cursor,omitempty" doc:"the cursor of the next page"`
}

// Items pages a job's items, of one state when state is set (the failures: failed).
func (b *Bulk) Items(ctx context.Context, tenant, id string, state sqlite.JobItemState, cursor string, limit int) (BulkItemPage, error) {
	tenant, err := b.p.Tenant(tenant)
	if err != nil {
		return BulkItemPage{}, err
	}
	page, err := b.jobs.JobItems(ctx, tenant, id, state, sqlite.ListOptions{Cursor: cursor, Limit: limit})
	if err != nil {
		return BulkItemPage{}, jobRefusal(err, id)
	}
	return BulkItemPage{JobID: id, Items: page.Items, Next: page.Next}, nil
}

// Cancel cancels a pending or running job: no item is applied after the batch in hand; the
// remaining ones stay pending. A finished job is a Conflict.
func (b *Bulk) Cancel(ctx context.Context, tenant, id string) (BulkJob, error) {
	tenant, err := b.p.Tenant(tenant)
	if err != nil {
		return BulkJob{}, err
	}
	j, err := b.jobs.CancelJob(ctx, tenant, id)
	if err != nil {
		return BulkJob{}, jobRefusal(err, id)
	}
	return bulkJobOf(j), nil
}

// ---- the runner ----

// Start runs the jobs: at once (a job left by the console before, or one submitted since), then
// whenever one is submitted, and every Idle.
func (b *Bulk) Start(ctx context.Context) error {
	return b.Run(ctx, func(ctx context.Context) {
		for {
			n, err := b.RunOnce(ctx)
			if err != nil && ctx.Err() == nil {
				b.s.OnError(err)
			}
			if n > 0 && ctx.Err() == nil {
				continue // more may be left
			}
			select {
			case <-ctx.Done():
				return
			case <-b.wake:
			case <-time.After(b.s.Idle):
			}
		}
	})
}

// Stop finishes the batch in hand, then releases the leases this runner holds.
func (b *Bulk) Stop(ctx context.Context) {
	b.Base.Stop(ctx)
	b.mu.Lock()
	held := b.held
	b.held = map[sqlite.JobRef]bool{}
	b.mu.Unlock()
	for ref := range held {
		if err := b.jobs.ReleaseJob(context.WithoutCancel(ctx), ref.Tenant, ref.ID, b.s.Runner); err != nil {
			b.s.OnError(fmt.Errorf("release job %s: %w", ref.ID, err))
		}
	}
}

// RunOnce gives every runnable job one batch and returns how many items were applied.
func (b *Bulk) RunOnce(ctx context.Context) (int, error) {
	refs, err := b.jobs.RunnableJobs(ctx, b.s.Runner, 100)
	if err != nil {
		return 0, fmt.Errorf("bulk jobs: %w", err)
	}
	total := 0
	var errs []error
	for _, ref := range refs {
		if ctx.Err() != nil {
			break
		}
		n, err := b.batch(ctx, ref)
		total += n
		if err != nil {
			errs = append(errs, err)
		}
	}
	return total, errors.Join(errs...)
}

// batch claims, applies and records one batch of a job. An item is not started once ctx has
// ended (it is given back), and one that was started finishes: its operation runs on a context
// of its own, bounded by OpTimeout, so a drain never leaves it half applied.
func (b *Bulk) batch(ctx context.Context, ref sqlite.JobRef) (int, error) {
	j, items, err := b.jobs.ClaimJobItems(ctx, ref.Tenant, ref.ID, b.s.Runner, b.s.Batch, b.s.Lease)
	switch {
	case errors.Is(err, sqlite.ErrJobLeased):
		return 0, nil // another console runs it
	case err != nil:
		return 0, fmt.Errorf("job %s: claim: %w", ref.ID, err)
	case len(items) == 0:
		b.hold(ref, false)
		return 0, nil
	}
	b.hold(ref, true)
	action := bulkAction(j.Kind)
	var f BulkFilter
	if json.Unmarshal(j.Filter, &f) != nil {
		action = "" // BulkApply refuses it: every item fails with the reason
	}
	out := make([]sqlite.JobItemOutcome, 0, len(items))
	applied := 0
	for _, it := range items {
		if ctx.Err() != nil {
			out = append(out, sqlite.JobItemOutcome{Seq: it.Seq, State: sqlite.ItemPending})
			continue
		}
		opCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.s.OpTimeout)
		o := b.p.BulkApply(opCtx, j.Tenant, action, f, it.Item)
		cancel()
		applied++
		rec := sqlite.JobItemOutcome{Seq: it.Seq, State: sqlite.ItemDone, Result: o.Result}
		if o.Err != nil {
			rec = sqlite.JobItemOutcome{Seq: it.Seq, State: sqlite.ItemFailed, Code: o.Code, Error: o.Err.Error()}
		}
		out = append(out, rec)
	}
	rctx, cancel := callctx.Detached(ctx, callctx.RedisOp)
	defer cancel()
	j, err = b.jobs.RecordJobItems(rctx, j.Tenant, j.ID, b.s.Runner, b.s.Lease, out)
	if err != nil {
		return applied, fmt.Errorf("job %s: record: %w", j.ID, err)
	}
	switch {
	case j.Status.Finished():
		b.hold(ref, false)
	case ctx.Err() != nil: // stopping: a batch that outlived Stop's wait releases its job itself
		b.hold(ref, false)
		if err := b.jobs.ReleaseJob(rctx, j.Tenant, j.ID, b.s.Runner); err != nil {
			return applied, fmt.Errorf("job %s: release: %w", j.ID, err)
		}
	}
	return applied, nil
}

func (b *Bulk) hold(ref sqlite.JobRef, on bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if on {
		b.held[ref] = true
	} else {
		delete(b.held, ref)
	}
}
