package roles

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"plaita/config"
	"plaita/engine/state"
	"plaita/internal/service"
	"plaita/queue"
	"plaita/roles/settings"
	"plaita/roles/worker"
	"plaita/store"
	"plaita/store/keys"
	"plaita/store/sqlite"
)

// The hand-over (docs/console.md, "After local mode"): a console that ran local mode and now
// starts with Redis answering moves what local mode left in its database to the cluster, once,
// before it serves — so that no execution is only in the console's database:
//
//  0. the published flow versions Redis lacks: written back (copied; they are immutable);
//  1. every execution state, of every tenant: written to Redis unless Redis has it already
//     (an earlier hand-over that was cut short wrote it; a worker may have moved it on since,
//     so it is never overwritten), and for a suspended one its wake-ups registered there as a
//     worker registers them (the delay queue's entries, the event subscription, the approval;
//     registering is idempotent); then deleted from the database;
//  2. the tasks of the embedded task stream (pending or not yet read: the next step of an
//     unfinished execution, a start no worker took): added to the cluster's stream
//     (PLAITA_CONSOLE_TASK_QUEUE), then deleted from the database;
//  3. the dead letters: added to the cluster's dead-letter stream, then deleted;
//  4. the schedules: created in Redis unless Redis has one of the same id, then deleted.
//
// Each item leaves the database only after Redis has it, so a console killed half-way hands the
// rest over at its next start. A task cut between its add and its delete is added again: the
// cluster delivers it twice, which the worker's fencing makes one outcome.

// HandOverReport is what a hand-over moved.
type HandOverReport struct {
	Executions  int `json:"executions"`   // states written to Redis
	Already     int `json:"already"`      // states Redis had already (an earlier hand-over wrote them)
	Unreadable  int `json:"unreadable"`   // states that could not be decoded: left in the database
	WakeUps     int `json:"wake_ups"`     // suspended executions whose wake-ups were registered
	Tasks       int `json:"tasks"`        // task-stream entries moved
	DeadLetters int `json:"dead_letters"` // dead letters moved
	Schedules   int `json:"schedules"`    // schedules moved
	Flows       int `json:"flows"`        // flow versions Redis lacked, written back
}

// Empty says the database held nothing to hand over (flow versions are copied, not moved:
// Redis having them all is nothing left).
func (r HandOverReport) Empty() bool { r.Flows = 0; return r == HandOverReport{} }

// handOverMaxFlows bounds the flows, and the versions of each, one tenant's hand-over reads.
const handOverMaxFlows = 100_000

// handOverFlows writes back the tenant's published flow versions Redis lacks (step 0: a task
// or a state handed over names a version the workers must find). Published versions are
// immutable: they are copied, and stay in the database.
func handOverFlows(ctx context.Context, tenant string, from store.FlowsDriver, to *store.Flows) (int, error) {
	sp, err := keys.For(keys.DefaultRoot, tenant)
	if err != nil {
		return 0, err
	}
	flows, err := from.FlowList(ctx, sp, nil, handOverMaxFlows)
	if err != nil {
		return 0, err
	}
	var items []store.FlowRestore
	for _, fl := range flows {
		versions, err := from.Versions(ctx, sp, fl.Name, handOverMaxFlows)
		if err != nil {
			return 0, err
		}
		for _, v := range versions {
			def, found, err := from.Definition(ctx, sp, fl.Name, v.Name)
			if err != nil {
				return 0, err
			}
			if found {
				items = append(items, store.FlowRestore{Tenant: tenant, FlowID: fl.Name, Version: v.Name, Definition: def,
					PublishedAt: time.UnixMilli(int64(v.Score))})
			}
		}
	}
	written := 0
	for len(items) > 0 {
		batch := items[:min(len(items), handOverPage)]
		items = items[len(batch):]
		for i, o := range to.Restore(ctx, batch) {
			if o.Err != nil {
				return written, fmt.Errorf("flow %s version %s: %w", batch[i].FlowID, batch[i].Version, o.Err)
			}
			if o.Written {
				written++
			}
		}
	}
	return written, nil
}

// handOverPage is the items one read of the database takes.
const handOverPage = 500

// handOverLocal moves local mode's executions, tasks, dead letters and schedules from local (the
// console database's drivers) to cluster (Redis), as cfg (the console's configuration) names
// the streams.
func handOverLocal(ctx context.Context, cfg *config.Config, db *sqlite.DB, local, cluster Backend) (HandOverReport, error) {
	var rep HandOverReport
	wcfg := cfg.AsWith(config.RoleWorker, map[string]string{"PLAITA_QUEUE_NAME": config.ConsoleTaskQueue.In(cfg)})
	delay, err := queue.NewDelay(cluster.Delay, settings.DelayQueue(wcfg))
	if err != nil {
		return rep, err
	}
	from, to := local.Storage(settings.Store(cfg)), cluster.Storage(settings.Store(cfg))
	wakeups := worker.NewWakeups(to, delay, settings.WorkerWakeups(wcfg))
	tenants, err := handOverTenants(ctx, db, local)
	if err != nil {
		return rep, err
	}
	for _, tenant := range tenants {
		n, err := handOverFlows(ctx, tenant, local.Flows, store.NewFlows(cluster.Flows, keys.DefaultRoot))
		rep.Flows += n
		if err != nil {
			return rep, fmt.Errorf("hand-over of tenant %s's flows: %w", tenant, err)
		}
	}
	for _, tenant := range tenants {
		if err := handOverStates(ctx, tenant, from, to, wakeups, &rep); err != nil {
			return rep, fmt.Errorf("hand-over of tenant %s's executions: %w", tenant, err)
		}
	}
	// An earlier version's local mode may have left executions running: settled first, as
	// PLAITA_CONSOLE_RECONCILE_ORPHANS says (nothing would take them up in the cluster either).
	if _, err := db.Executions().ReconcileOrphans(ctx, sqlite.OrphanMode(config.ConsoleReconcileOrphans.In(cfg)), time.Now()); err != nil {
		return rep, fmt.Errorf("hand-over: orphan reconcile: %w", err)
	}
	if err := handOverEarlier(ctx, db.Executions(), to, wakeups, &rep); err != nil {
		return rep, fmt.Errorf("hand-over of an earlier version's local executions: %w", err)
	}
	qs := settings.Queue(wcfg)
	if rep.Tasks, err = handOverStream(ctx, local.Queue, cluster.Queue, qs.Stream, qs.Group); err != nil {
		return rep, fmt.Errorf("hand-over of the task stream %s: %w", qs.Stream, err)
	}
	if rep.DeadLetters, err = handOverStream(ctx, local.Queue, cluster.Queue, qs.DLQ, ""); err != nil {
		return rep, fmt.Errorf("hand-over of the dead letters %s: %w", qs.DLQ, err)
	}
	fromSch, toSch := store.NewSchedules(local.Schedules, keys.DefaultRoot), store.NewSchedules(cluster.Schedules, keys.DefaultRoot)
	for _, tenant := range tenants {
		n, err := handOverSchedules(ctx, tenant, fromSch, toSch)
		rep.Schedules += n
		if err != nil {
			return rep, fmt.Errorf("hand-over of tenant %s's schedules: %w", tenant, err)
		}
	}
	return rep, nil
}

// handOverTenants are the tenants whose executions may be in the database: the default one,
// the console's, and those local mode published a status of — a tenant deleted since is
// disabled there, its executions still to hand over.
func handOverTenants(ctx context.Context, db *sqlite.DB, local Backend) ([]string, error) {
	all, err := db.AllTenants(ctx)
	if err != nil {
		return nil, err
	}
	sp, err := keys.For(keys.DefaultRoot, "")
	if err != nil {
		return nil, err
	}
	published, err := local.Store.Tenants.StatusTenants(ctx, sp)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{keys.DefaultTenant: true}
	out := []string{keys.DefaultTenant}
	for _, t := range all {
		published = append(published, t.Slug)
	}
	for _, t := range published {
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	return out, nil
}

// handOverStates moves one tenant's execution states (step 1).
func handOverStates(ctx context.Context, tenant string, from, to *store.Redis, wakeups *worker.Wakeups, rep *HandOverReport) error {
	lts, err := from.Tenant(tenant)
	if err != nil {
		return err
	}
	rts, err := to.Tenant(tenant)
	if err != nil {
		return err
	}
	for cursor := ""; ; {
		page, err := lts.List(ctx, store.ListRequest{Cursor: cursor, Limit: handOverPage})
		if err != nil {
			return err
		}
		ids := make([]string, len(page.Items))
		for i, it := range page.Items {
			ids[i] = it.ExecutionID
		}
		if err := handOverIDs(ctx, ids, lts.Load, lts.Delete, rts, wakeups, rep); err != nil {
			return err
		}
		if page.NextCursor == "" {
			return nil
		}
		cursor = page.NextCursor
	}
}

// handOverIDs moves the states of ids, read with load and removed with remove once the target
// has them (handOverState); one gone meanwhile is skipped, one that no longer decodes is left
// where it is and counted.
func handOverIDs(ctx context.Context, ids []string, load func(context.Context, string) (*state.Execution, error),
	remove func(context.Context, string) error, rts *store.TenantStore, wakeups *worker.Wakeups, rep *HandOverReport) error {
	for _, id := range ids {
		st, err := load(ctx, id)
		var corrupt *store.CorruptStateError
		switch {
		case errors.Is(err, store.ErrNotFound):
			continue
		case errors.As(err, &corrupt):
			rep.Unreadable++
			continue
		case err != nil:
			return err
		}
		if err := handOverState(ctx, rts, wakeups, st, func() error { return remove(ctx, id) }, rep); err != nil {
			return fmt.Errorf("execution %s: %w", id, err)
		}
	}
	return nil
}

// handOverState moves one state: written unless the target has it, its wake-ups registered
// while the target holds it as the database does (not moved on by a worker since), then
// removed from where it was (remove).
func handOverState(ctx context.Context, rts *store.TenantStore, wakeups *worker.Wakeups, st *state.Execution, remove func() error,
	rep *HandOverReport) error {
	have, err := rts.Peek(ctx, st.ExecutionID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		if err := rts.Save(ctx, st); err != nil {
			return err
		}
		rep.Executions++
		have = st
	case err != nil:
		return err
	default:
		rep.Already++
	}
	// An execution an orphan reconcile suspended has nothing to wake it: an operator continues
	// it.
	orphan := st.Suspend != nil && st.Suspend.Kind == sqlite.SuspendOrphan
	if st.Status == state.Suspended && !orphan && have.Status == state.Suspended && have.LastUpdate.Equal(st.LastUpdate) {
		if err := wakeups.Register(ctx, st); err != nil {
			return err
		}
		rep.WakeUps++
	}
	return remove()
}

// handOverEarlier moves the executions an earlier version's local mode wrote to the console
// database's local_executions into to — Redis, or local mode's own storage — as handOverState
// moves a state (an orphan reconcile has settled those it left running). Rows that no longer
// decode stay, counted.
func handOverEarlier(ctx context.Context, x *sqlite.Executions, to *store.Redis, wakeups *worker.Wakeups, rep *HandOverReport) error {
	tenants, err := x.Tenants(ctx)
	if err != nil {
		return err
	}
	for _, tenant := range tenants {
		rts, err := to.Tenant(tenant)
		if err != nil {
			return err
		}
		for cursor := ""; ; {
			page, err := x.List(ctx, sqlite.ExecutionQuery{Tenant: tenant, ListOptions: sqlite.ListOptions{Cursor: cursor, Limit: sqlite.MaxLimit}})
			if err != nil {
				return err
			}
			ids := make([]string, len(page.Items))
			for i, it := range page.Items {
				ids[i] = it.ExecutionID
			}
			if err := handOverIDs(ctx, ids, x.Load, x.Delete, rts, wakeups, rep); err != nil {
				return err
			}
			if page.Next == "" {
				break
			}
			cursor = page.Next
		}
	}
	return nil
}

// handOverStream moves every entry of stream (step 2, step 3): added to the cluster's stream of
// the same name, then acknowledged (in group, when not "") and deleted here.
func handOverStream(ctx context.Context, from, to queue.Driver, stream, group string) (int, error) {
	moved := 0
	for {
		pages, err := from.Range(ctx, stream, queue.Span{Start: "-", End: "+", Count: handOverPage})
		if err != nil {
			return moved, err
		}
		if len(pages) == 0 || len(pages[0]) == 0 {
			return moved, nil
		}
		for _, e := range pages[0] {
			fields := make([]string, 0, 2*len(e.Fields))
			for k, v := range e.Fields {
				fields = append(fields, k, v)
			}
			if _, err := to.Add(ctx, stream, fields...); err != nil {
				return moved, err
			}
			if group != "" {
				if _, err := from.AckDelete(ctx, stream, group, e.ID); err != nil {
					return moved, err
				}
			} else if _, err := from.Delete(ctx, stream, e.ID); err != nil {
				return moved, err
			}
			moved++
		}
	}
}

// handOverSchedules moves one tenant's schedules (step 4): created in Redis with their
// definitions (the next fire computed from now, as a new schedule's is) unless Redis has one of
// the same id, then deleted here.
func handOverSchedules(ctx context.Context, tenant string, from, to *store.Schedules) (int, error) {
	recs, _, err := from.List(ctx, tenant)
	if err != nil {
		return 0, err
	}
	moved := 0
	for _, rec := range recs {
		_, err := to.Get(ctx, tenant, rec.ID)
		switch {
		case errors.Is(err, store.ErrNotFound):
			if _, err := to.Create(ctx, rec.Schedule, time.Now()); err != nil {
				return moved, err
			}
			moved++
		case err != nil:
			return moved, err
		}
		if _, err := from.Delete(ctx, tenant, rec.ID); err != nil {
			return moved, err
		}
	}
	return moved, nil
}

// handOverService runs the hand-over once as the console starts (after the engine sync, before
// the HTTP server): a failure fails the start — the next start hands the rest over.
type handOverService struct {
	run     func(ctx context.Context) (HandOverReport, error)
	log     zerolog.Logger
	stopped atomic.Bool
}

func (h *handOverService) Start(ctx context.Context) error {
	if h.stopped.Load() {
		return service.ErrStopped
	}
	rep, err := h.run(ctx)
	if err != nil {
		return fmt.Errorf("local mode's executions were not all handed to Redis (the next start goes on where this one stopped): %w", err)
	}
	if !rep.Empty() {
		h.log.Warn().Str("event", "console.handed_over").Int("executions", rep.Executions).Int("already", rep.Already).
			Int("unreadable", rep.Unreadable).Int("wake_ups", rep.WakeUps).Int("tasks", rep.Tasks).Int("dead_letters", rep.DeadLetters).
			Int("schedules", rep.Schedules).
			Msg("what this console ran in local mode is handed to Redis: the cluster's roles run it from now on")
	}
	return nil
}

func (h *handOverService) Stop(context.Context) { h.stopped.Store(true) }
