package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"plaita/internal/tracing"
	"plaita/store"
	"plaita/store/keys"
)

// EventPublished is a publish: the event as stored, and whether that id was published before
// with the same type and data (then nothing changed, and a waiting execution is woken once);
// and who may take it: how many executions of the tenant wait for its type and may take this
// event (the uncorrelated waits of the type, and the correlated ones indexed under its values:
// docs/events.md, "Correlation"), and how many filters are alive to deliver it (without one,
// it wakes nothing until one runs).
type EventPublished struct {
	store.Event
	Duplicate bool `json:"duplicate"`
	// Waiting is -1 when it cannot be read.
	Waiting      int64  `json:"waiting"`
	FiltersAlive int    `json:"filters_alive"`
	Text         string `json:"text"`
}

// PublishEvent publishes an event (docs/events.md); the filter role wakes what waits for it. Its
// id ("" = a new one), type and data are checked before anything is written (Invalid); an id
// taken by another type or other data is a Conflict.
//
// The waits are counted before the event is written: those are the ones it may wake (a wait
// takes only events published after it began), and a filter that wakes one at once cannot take
// it out of the count first.
func (p *Plane) PublishEvent(ctx context.Context, ev store.Event) (EventPublished, error) {
	tenant, err := checkEvent(p, ev)
	if err != nil {
		return EventPublished{}, err
	}
	ev.TenantID = tenant
	waiting, countErr := int64(-1), error(nil)
	if ts, err := p.tenantStore(tenant); err == nil {
		var data any
		if json.Unmarshal(ev.Data, &data) == nil { // else Publish refuses it below
			if waiting, countErr = ts.WaitingFor(ctx, ev.Type, data, p.now()); countErr != nil {
				waiting = -1
			}
		}
	}
	out, err := p.PublishEventUncounted(ctx, ev)
	if err != nil {
		return out, err
	}
	out.Waiting = waiting
	var notes []string
	if countErr != nil {
		notes = append(notes, fmt.Sprintf("the waits cannot be counted: %v", countErr))
	}
	if filters, err := p.Alive(ctx, roleFilter); err == nil {
		out.FiltersAlive = filters.Alive
	} else {
		notes = append(notes, fmt.Sprintf("the registry cannot be read: %v", err))
	}
	switch {
	case out.Waiting == 0:
		notes = append(notes, fmt.Sprintf("no execution of tenant %s waits for an event of type %q like this one: it wakes nothing (a wait takes only events published after it began)", tenant, ev.Type))
	case out.Waiting > 0 && out.FiltersAlive == 0:
		notes = append(notes, fmt.Sprintf("%d execution(s) wait for %q, but no filter role is registered: nothing delivers it until one runs (%s)", out.Waiting, ev.Type, p.Command("filter")))
	case out.Waiting > 0:
		notes = append(notes, fmt.Sprintf("%d execution(s) of tenant %s wait for %q; filter role: %d alive", out.Waiting, tenant, ev.Type, out.FiltersAlive))
	}
	out.Text = strings.Join(notes, "; ")
	return out, nil
}

// PublishEventUncounted is PublishEvent without the count of who waits and of the filters
// alive (Waiting and FiltersAlive are -1, Text is empty): the publish alone, for producers
// that send many events and read nothing back (signed hooks, `event publish --no-count`).
func (p *Plane) PublishEventUncounted(ctx context.Context, ev store.Event) (EventPublished, error) {
	tenant, err := checkEvent(p, ev)
	if err != nil {
		return EventPublished{}, err
	}
	ev.TenantID = tenant
	if tracing.Enabled() {
		var span trace.Span
		ctx, span = tracing.Start(ctx, "publish event "+ev.Type, trace.SpanKindProducer)
		defer span.End()
		span.SetAttributes(attribute.String(tracing.AttrEventType, ev.Type), attribute.String(tracing.AttrTenant, tenant))
		tc := tracing.Of(ctx)
		ev.TraceParent, ev.TraceState = tc.TraceParent, tc.TraceState
	}
	stored, dup, err := p.d.Events.Publish(ctx, ev)
	switch {
	case errors.Is(err, store.ErrEventConflict):
		return EventPublished{}, refuse(Conflict, "event_conflict", err, "%v", err)
	case errors.Is(err, store.ErrBadEvent):
		return EventPublished{}, refuse(Invalid, "invalid_event", err, "%v", err)
	case err != nil:
		return EventPublished{}, err
	}
	return EventPublished{Event: stored, Duplicate: dup, Waiting: -1, FiltersAlive: -1}, nil
}

// checkEvent checks an event's type, id and tenant before anything is written, in both modes.
func checkEvent(ops interface{ Tenant(string) (string, error) }, ev store.Event) (string, error) {
	if err := keys.ValidName("event type", ev.Type); err != nil {
		return "", refuse(Invalid, "invalid_event", err, "%v", err)
	}
	if ev.ID != "" {
		if err := keys.ValidID(ev.ID); err != nil {
			return "", refuse(Invalid, "invalid_event", err, "event id %q: %v", ev.ID, err)
		}
	}
	return ops.Tenant(ev.TenantID)
}

// EventList asks for a page of a tenant's events, newest first: of one type ("" = all), after
// Cursor ("" = from the newest; else the NextCursor of the page before), Limit (1 to
// store.MaxEventList) index members.
type EventList struct {
	Tenant string
	Type   string
	Cursor string
	Limit  int
}

// ListEvents is one page of the tenant's newest events.
func (p *Plane) ListEvents(ctx context.Context, req EventList) (store.EventPage, error) {
	if req.Type != "" {
		if err := keys.ValidName("event type", req.Type); err != nil {
			return store.EventPage{}, refuse(Invalid, "invalid_event_type", err, "%v", err)
		}
	}
	if err := checkLimit(req.Limit, MaxEventList); err != nil {
		return store.EventPage{}, err
	}
	tenant, err := p.Tenant(req.Tenant)
	if err != nil {
		return store.EventPage{}, err
	}
	page, err := p.d.Events.Page(ctx, store.EventQuery{Tenant: tenant, Type: req.Type, Cursor: req.Cursor, Limit: req.Limit})
	if errors.Is(err, store.ErrInvalid) {
		return page, refuse(Invalid, "invalid_cursor", err, "cursor: %v", err)
	}
	if err != nil {
		return page, fmt.Errorf("list events: %w", err)
	}
	return page, nil
}
