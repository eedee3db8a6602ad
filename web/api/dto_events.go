package api

import (
	"encoding/json"
	"time"

	"plaita/control"
)

// The wire types of the event routes (h_events.go): the console's own, copied field by field
// from control's results.

// Event is a published event.
type Event struct {
	ID          string          `json:"id"`
	Type        string          `json:"type"`
	TenantID    string          `json:"tenant_id"`
	Data        json.RawMessage `json:"data"`
	PublishedAt time.Time       `json:"published_at"`
}

// EventPublished is an event published (or, for an id published before with the same type and
// data, found: duplicate) and who may take it: how many executions wait for it (-1 when that
// cannot be read) and how many filters are alive to deliver it.
type EventPublished struct {
	Event
	Duplicate    bool   `json:"duplicate"`
	Waiting      int64  `json:"waiting"`
	FiltersAlive int    `json:"filters_alive"`
	Text         string `json:"text"`
}

func eventPublishedOf(p control.EventPublished) EventPublished {
	return EventPublished{Event: Event{ID: p.ID, Type: p.Type, TenantID: p.TenantID, Data: p.Data, PublishedAt: p.PublishedAt},
		Duplicate: p.Duplicate, Waiting: p.Waiting, FiltersAlive: p.FiltersAlive, Text: p.Text}
}

// EventList is a page of the tenant's events, newest first.
type EventList struct {
	TenantID string `json:"tenant_id"`
	Type     string `json:"type,omitempty"`
	control.Page[Event]
	Expired  int  `json:"expired" doc:"index members whose event expired (removed from the index)"`
	Skipped  int  `json:"skipped" doc:"index members that are no readable event"`
	Degraded bool `json:"degraded" doc:"skipped > 0: an empty page is not proof that there is nothing"`
}
