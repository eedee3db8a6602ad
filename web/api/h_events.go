package api

import (
	"context"
	"encoding/json"
	"net/http"

	"plaita/control"
)

// Events: adapters over control's event operations, the ones `plaita event publish|list` run.
// A published event wakes the executions of the tenant waiting for it, through the filter
// role (docs/events.md); the answer says how many wait and whether a filter is alive.

type eventPublishIn struct {
	Body struct {
		Type string          `json:"type" minLength:"1" maxLength:"200" doc:"the event type a wait_event node waits for"`
		ID   string          `json:"id,omitempty" maxLength:"200" doc:"the event id (default: a new one); publishing an id again with the same type and data changes nothing"`
		Data json.RawMessage `json:"data,omitempty" doc:"what a waiting execution sees as EVENT (default {})"`
	}
}

type eventPublishedOut struct {
	Status int
	Body   EventPublished
}

// EventBodyLimit bounds a publish: the largest data an event may carry, and room for the rest.
const EventBodyLimit = control.MaxEventDataBytes + 64<<10

// publishEvent publishes an event (control.PublishEvent): 201 when it is new, 200 when that id
// was published before with the same type and data (a waiting execution is woken once).
func (a *API) publishEvent(ctx context.Context, c *Call, in *eventPublishIn) (*eventPublishedOut, error) {
	c.Note("type", in.Body.Type)
	ev, err := control.PublishNewEvent(ctx, a.d.Plane, control.NewEvent{Tenant: c.Tenant, ID: in.Body.ID, Type: in.Body.Type, Data: in.Body.Data})
	if err != nil {
		c.Audit.Target = in.Body.ID
		return nil, err
	}
	c.Audit.Target = ev.ID
	c.Note("duplicate", ev.Duplicate)
	c.Note("waiting", ev.Waiting)
	status := http.StatusCreated
	if ev.Duplicate {
		status = http.StatusOK
	}
	return &eventPublishedOut{Status: status, Body: eventPublishedOf(ev)}, nil
}

type eventListIn struct {
	Type   string `query:"type" maxLength:"200" doc:"only events of this type"`
	Cursor string `query:"cursor" maxLength:"4096" doc:"the next_cursor of the page before"`
	Limit  int    `query:"limit" minimum:"1" maximum:"1000" default:"50"` // control.MaxEventList, control.DefaultListLimit
}

type eventListOut struct{ Body EventList }

func (a *API) listEvents(ctx context.Context, c *Call, in *eventListIn) (*eventListOut, error) {
	page, err := a.d.Plane.ListEvents(ctx, control.EventList{Tenant: c.Tenant, Type: in.Type, Cursor: in.Cursor, Limit: in.Limit})
	if err != nil {
		return nil, err
	}
	out := EventList{TenantID: c.Tenant, Type: in.Type, Page: control.Page[Event]{Items: make([]Event, 0, len(page.Events)),
		NextCursor: page.NextCursor}, Expired: page.Expired, Skipped: page.Corrupt + page.Invalid}
	for _, ev := range page.Events {
		out.Items = append(out.Items, Event{ID: ev.ID, Type: ev.Type, TenantID: ev.TenantID, Data: ev.Data, PublishedAt: ev.PublishedAt})
	}
	out.Degraded = out.Skipped > 0
	return &eventListOut{Body: out}, nil
}
