package control

import (
	"context"
	"encoding/json"

	"plaita/store"
	"plaita/store/sqlite"
)

// The requests of the operations whose parameter is a storage type, in control's terms: a front
// end builds these and names no storage package.

// NewEvent is an event to publish: its tenant, its id ("" = a new one), its type and its data.
type NewEvent struct {
	Tenant string
	ID     string
	Type   string
	Data   json.RawMessage
}

// PublishNewEvent publishes ev through the plane, as PublishEvent does.
func PublishNewEvent(ctx context.Context, p *Plane, ev NewEvent) (EventPublished, error) {
	return p.PublishEvent(ctx, store.Event{ID: ev.ID, Type: ev.Type, TenantID: ev.Tenant, Data: ev.Data})
}

// NewSchedule is a cron schedule to create: its id ("" = a new one), its calendar and the flow it
// starts with which input.
type NewSchedule struct {
	Tenant      string
	ID          string
	Cron        string
	TimeZone    string
	FlowID      string
	FlowVersion string
	Input       json.RawMessage
	Enabled     bool
}

// CreateSchedule creates s, checked as AddSchedule checks it.
func (p *Plane) CreateSchedule(ctx context.Context, s NewSchedule) (ScheduleAdded, error) {
	return p.AddSchedule(ctx, store.Schedule{ID: s.ID, TenantID: s.Tenant, Cron: s.Cron, TimeZone: s.TimeZone, FlowID: s.FlowID,
		FlowVersion: s.FlowVersion, Input: s.Input, Enabled: s.Enabled})
}

// BulkItemFailed is the state of a job's item that failed: a job's failures are its items in it.
const BulkItemFailed = string(sqlite.ItemFailed)

// ItemsInState pages a job's items in state (pending, applying, done, failed; "" = every item),
// as Items does.
func (b *Bulk) ItemsInState(ctx context.Context, tenant, id, state, cursor string, limit int) (BulkItemPage, error) {
	return b.Items(ctx, tenant, id, sqlite.JobItemState(state), cursor, limit)
}
