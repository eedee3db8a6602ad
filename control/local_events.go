package control

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"slices"

	"plaita/engine"
	"plaita/engine/state"
	"plaita/store"
	"plaita/store/keys"
	"plaita/store/sqlite"
)

// Events and approvals in local mode. An event is delivered when it is published: the
// executions of its tenant waiting for its type (since before it was published) are read, and
// each whose match the event satisfies — engine.CheckResume, the check the filter role makes in
// cluster mode — is resumed by the runner. Local mode keeps no event records: an event that
// finds no wait is gone, as in cluster mode once its TTL passes; listing events needs Redis.

// localEventMemory bounds the event ids a console remembers, to answer a publish of the same id
// again as idempotent (the same type and data: nothing is delivered twice) or a conflict.
const localEventMemory = 10000

type seenEvent struct {
	typ  string
	data [sha256.Size]byte
}

// PublishEvent delivers an event to the waits it satisfies (see above). The same rules as in
// cluster mode refuse an event before anything runs (store.PrepareEvent).
func (l *Local) PublishEvent(ctx context.Context, ev store.Event) (EventPublished, error) {
	tenant, err := checkEvent(l, ev)
	if err != nil {
		return EventPublished{}, err
	}
	ev.TenantID = tenant
	if ev, err = store.PrepareEvent(ev); err != nil {
		return EventPublished{}, refuse(Invalid, "invalid_event", err, "%v", err)
	}
	ev.PublishedAt = l.now().UTC()
	if dup, err := l.remember(ev); err != nil || dup {
		return EventPublished{Event: ev, Duplicate: dup, Waiting: -1, FiltersAlive: 1,
			Text: "already published: delivered when it was first published"}, err
	}
	var data any
	if err := json.Unmarshal(ev.Data, &data); err != nil {
		return EventPublished{}, refuse(Invalid, "invalid_event", err, "data: %v", err)
	}
	waiting, woken, err := l.deliver(ctx, ev, data)
	if err != nil {
		if woken == 0 {
			l.forget(ev.ID) // nothing took it: publishing it again is a first publish, not a duplicate
		}
		return EventPublished{}, fmt.Errorf("deliver event %s: %w", ev.ID, err)
	}
	out := EventPublished{Event: ev, Waiting: int64(woken), FiltersAlive: 1}
	switch {
	case waiting == 0:
		out.Text = fmt.Sprintf("no execution of tenant %s waits for a %q event: it wakes nothing (local mode keeps no events for waits that begin later)", tenant, ev.Type)
	default:
		out.Text = fmt.Sprintf("%d of the %d execution(s) of tenant %s waiting for %q take it (local mode: delivered in this process)", woken, waiting, tenant, ev.Type)
	}
	return out, nil
}

// remember records an event id: a duplicate (the same type and data) or a conflict (another
// type or other data under the id) when it was seen already.
func (l *Local) remember(ev store.Event) (bool, error) {
	seen := seenEvent{typ: ev.Type, data: sha256.Sum256(ev.Data)}
	l.mu.Lock()
	defer l.mu.Unlock()
	if prev, ok := l.events[ev.ID]; ok {
		if prev != seen {
			return false, refuse(Conflict, "event_conflict", store.ErrEventConflict, "event %s was published with another type or other data", ev.ID)
		}
		return true, nil
	}
	if len(l.order) == localEventMemory {
		delete(l.events, l.order[0])
		l.order = l.order[1:]
	}
	l.events[ev.ID] = seen
	l.order = append(l.order, ev.ID)
	return false, nil
}

// forget drops an event id remember recorded.
func (l *Local) forget(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.events[id]; !ok {
		return
	}
	delete(l.events, id)
	if i := slices.Index(l.order, id); i >= 0 {
		l.order = slices.Delete(l.order, i, i+1)
	}
}

// deliver resumes the tenant's waits ev satisfies: how many waited for its type, how many take it.
func (l *Local) deliver(ctx context.Context, ev store.Event, data any) (waiting, woken int, err error) {
	flows := map[[2]string]*engine.Flow{}
	lim := l.d.Engine().Expr
	for after := ""; ; {
		page, next, err := l.x.Suspended(ctx, sqlite.SuspendedQuery{Tenant: ev.TenantID, After: after, Limit: sqlite.MaxLimit})
		if err != nil {
			return waiting, woken, err
		}
		for _, st := range page {
			s := st.Suspend
			if s == nil || s.Kind != state.SuspendEvent || s.EventType != ev.Type || ev.PublishedAt.Before(s.Since) {
				continue
			}
			waiting++
			k := [2]string{st.FlowID, st.FlowVersion}
			f, ok := flows[k]
			if !ok {
				if f, _, err = l.publishedFlow(ctx, ev.TenantID, st.FlowID, st.FlowVersion); err != nil {
					f = nil // the wait cannot be checked: it is not woken (its own read says why)
				}
				flows[k] = f
			}
			if f == nil || engine.CheckResume(f, st, engine.ResumeEvent, data, lim, l.now()) != nil {
				continue
			}
			j := l.resumeJob(ev.TenantID, st, engine.ResumeEvent, data, "event:"+ev.ID)
			j.mark = markOf(st)
			if err := l.run.submit(ctx, j); err != nil {
				return waiting, woken, err
			}
			woken++
		}
		if next == "" {
			return waiting, woken, nil
		}
		after = next
	}
}

// Approvals is one page of the tenant's pending approvals, by execution id; cursor is the
// next_cursor of the page before.
func (l *Local) Approvals(ctx context.Context, tenant, cursor string, limit int) (store.ApprovalPage, error) {
	limit = cmp.Or(limit, DefaultListLimit)
	if err := checkLimit(limit, MaxListLimit); err != nil {
		return store.ApprovalPage{}, err
	}
	tenant, err := l.Tenant(tenant)
	if err != nil {
		return store.ApprovalPage{}, err
	}
	if cursor != "" {
		if err := keys.ValidID(cursor); err != nil {
			return store.ApprovalPage{}, refuse(Invalid, "invalid_cursor", err, "cursor: %v", err)
		}
	}
	out := store.ApprovalPage{Items: []store.PendingApproval{}}
	for after := cursor; ; {
		unreadable := 0
		page, next, err := l.x.Suspended(ctx, sqlite.SuspendedQuery{Tenant: tenant, After: after, Limit: sqlite.MaxLimit, Unreadable: &unreadable})
		if err != nil {
			return store.ApprovalPage{}, err
		}
		out.Skipped += unreadable
		for _, st := range page {
			s := st.Suspend
			if s == nil || s.Kind != state.SuspendApproval {
				continue
			}
			if len(out.Items) == limit {
				out.NextCursor = after
				return out, nil
			}
			ap := store.Approval{ExecutionID: st.ExecutionID, TenantID: tenant, FlowID: st.FlowID, FlowVersion: st.FlowVersion,
				Node: s.Node, Message: s.Message, Since: s.Since}
			if s.Due != nil {
				ap.Due = *s.Due
			}
			out.Items = append(out.Items, store.PendingApproval{Approval: ap, Status: st.Status})
			after = st.ExecutionID
		}
		if next == "" {
			return out, nil
		}
		after = next
	}
}

// AnswerApproval checks the answer (as Plane.AnswerApproval) and resumes the execution with it.
func (l *Local) AnswerApproval(ctx context.Context, a Answer) (Done, error) {
	data, err := answerData(a)
	if err != nil {
		return Done{}, err
	}
	return l.Resume(ctx, ResumeRequest{Tenant: a.Tenant, ID: a.ID, Type: engine.ResumeApproval, Data: data})
}
