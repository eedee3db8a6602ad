package web

import (
	"context"
	"encoding/json"
	"net/http"

	"plaita/control"
	"plaita/store"
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
	Body   control.EventPublished
}

// eventBody bounds a publish: the largest data an event may carry, and room for the rest.
const eventBody = store.MaxEventDataBytes + 64<<10

// publishEvent publishes an event (control.PublishEvent): 201 when it is new, 200 when that id
// was published before with the same type and data (a waiting execution is woken once).
func (a *api) publishEvent(ctx context.Context, c *Call, in *eventPublishIn) (*eventPublishedOut, error) {
	c.Note("type", in.Body.Type)
	ev, err := a.ops().PublishEvent(ctx, store.Event{ID: in.Body.ID, Type: in.Body.Type, TenantID: c.Tenant, Data: in.Body.Data})
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
	return &eventPublishedOut{Status: status, Body: ev}, nil
}

type eventListIn struct {
	Type   string `query:"type" maxLength:"200" doc:"only events of this type"`
	Cursor string `query:"cursor" maxLength:"4096" doc:"the next_cursor of the page before"`
	Limit  int    `query:"limit" minimum:"1" maximum:"1000" default:"50"`
}

// EventList is a page of the tenant's events, newest first.
type EventList struct {
	TenantID   string        `json:"tenant_id"`
	Type       string        `json:"type,omitempty"`
	Items      []store.Event `json:"items"`
	NextCursor string        `json:"next_cursor,omitempty" doc:"the cursor of the next page (none on the last)"`
	Expired    int           `json:"expired" doc:"index members whose event expired (removed from the index)"`
	Skipped    int           `json:"skipped" doc:"index members that are no readable event"`
	Degraded   bool          `json:"degraded" doc:"skipped > 0: an empty page is not proof that there is nothing"`
}

type eventListOut struct{ Body EventList }

func (a *api) listEvents(ctx context.Context, c *Call, in *eventListIn) (*eventListOut, error) {
	page, err := a.d.Plane.ListEvents(ctx, control.EventList{Tenant: c.Tenant, Type: in.Type, Cursor: in.Cursor, Limit: in.Limit})
	if err != nil {
		return nil, err
	}
	out := EventList{TenantID: c.Tenant, Type: in.Type, Items: page.Events, NextCursor: page.NextCursor, Expired: page.Expired,
		Skipped: page.Corrupt + page.Invalid}
	out.Degraded = out.Skipped > 0
	return &eventListOut{Body: out}, nil
}
