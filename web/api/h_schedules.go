package api

import (
	"context"
	"encoding/json"
	"net/http"

	"plaita/control"
)

// Cron schedules: adapters over control's schedule operations, the ones `plaita schedule
// add|list|show|enable|disable|delete` run, on the store the schedule role fires from
// (docs/schedules.md). A definition the CLI refuses is refused here with the same code.

type scheduleListIn struct {
	Cursor string `query:"cursor" maxLength:"1024" doc:"the next_cursor of the page before"`
	Limit  int    `query:"limit" minimum:"1" maximum:"1000" default:"100"` // control.MaxScheduleList
}

type scheduleListOut struct{ Body ScheduleList }

func (a *API) listSchedules(ctx context.Context, c *Call, in *scheduleListIn) (*scheduleListOut, error) {
	page, err := a.d.Plane.SchedulePage(ctx, control.ScheduleList{Tenant: c.Tenant, Cursor: in.Cursor, Limit: in.Limit})
	if err != nil {
		return nil, err
	}
	out := ScheduleList{TenantID: page.TenantID, Page: control.Page[Schedule]{Items: make([]Schedule, 0, len(page.Items)),
		NextCursor: page.NextCursor}, Bad: page.Bad}
	for _, r := range page.Items {
		out.Items = append(out.Items, scheduleOf(r))
	}
	return &scheduleListOut{Body: out}, nil
}

type scheduleCreateIn struct {
	Body struct {
		ID          string          `json:"id,omitempty" maxLength:"128" doc:"letters, digits and _ . / - (default: a new sch_… id)"`
		Cron        string          `json:"cron" minLength:"1" maxLength:"200" doc:"5 fields, 6 with seconds first, or @daily …"`
		TimeZone    string          `json:"time_zone,omitempty" maxLength:"100" doc:"IANA zone the spec is read in (default UTC)"`
		FlowID      string          `json:"flow_id" minLength:"1" maxLength:"200"`
		FlowVersion string          `json:"flow_version,omitempty" maxLength:"200" doc:"a published version, or latest (the default: resolved at each tick)"`
		Input       json.RawMessage `json:"input,omitempty" doc:"the executions' INPUT (default {})"`
		Enabled     *bool           `json:"enabled,omitempty" doc:"default true"`
	}
}

type scheduleAddedOut struct{ Body ScheduleAdded }

func (a *API) createSchedule(ctx context.Context, c *Call, in *scheduleCreateIn) (*scheduleAddedOut, error) {
	b := in.Body
	s := control.NewSchedule{Tenant: c.Tenant, ID: b.ID, Cron: b.Cron, TimeZone: b.TimeZone, FlowID: b.FlowID, FlowVersion: b.FlowVersion,
		Input: b.Input, Enabled: b.Enabled == nil || *b.Enabled}
	c.Audit.Target = b.ID
	added, err := a.d.Plane.CreateSchedule(ctx, s)
	if err != nil {
		return nil, err
	}
	c.Audit.Target = added.ID
	c.Note("cron", added.Cron)
	c.Note("flow", added.FlowID+"@"+added.FlowVersion)
	c.Note("enabled", added.Enabled)
	return &scheduleAddedOut{Body: ScheduleAdded{Schedule: scheduleOf(added.ScheduleRecord), Warnings: added.Warnings}}, nil
}

type scheduleIDIn struct {
	ID string `path:"id" minLength:"1" maxLength:"128"`
}

type scheduleOut struct{ Body Schedule }

func (a *API) getSchedule(ctx context.Context, c *Call, in *scheduleIDIn) (*scheduleOut, error) {
	rec, err := a.d.Plane.Schedule(ctx, c.Tenant, in.ID)
	if err != nil {
		return nil, err
	}
	return &scheduleOut{Body: scheduleOf(rec)}, nil
}

type scheduleUpdateIn struct {
	ID   string `path:"id" minLength:"1" maxLength:"128"`
	Body struct {
		Cron        *string         `json:"cron,omitempty" minLength:"1" maxLength:"200"`
		TimeZone    *string         `json:"time_zone,omitempty" maxLength:"100"`
		FlowID      *string         `json:"flow_id,omitempty" minLength:"1" maxLength:"200"`
		FlowVersion *string         `json:"flow_version,omitempty" maxLength:"200"`
		Input       json.RawMessage `json:"input,omitempty"`
		Enabled     *bool           `json:"enabled,omitempty"`
	}
}

type scheduleUpdatedOut struct{ Body ScheduleUpdated }

// updateSchedule replaces the fields the body sets; a new calendar fires only its ticks after
// the edit (control.UpdateSchedule).
func (a *API) updateSchedule(ctx context.Context, c *Call, in *scheduleUpdateIn) (*scheduleUpdatedOut, error) {
	c.Audit.Target = in.ID
	b := in.Body
	up, err := a.d.Plane.UpdateSchedule(ctx, c.Tenant, in.ID, control.SchedulePatch{Cron: b.Cron, TimeZone: b.TimeZone, FlowID: b.FlowID,
		FlowVersion: b.FlowVersion, Input: b.Input, Enabled: b.Enabled})
	if err != nil {
		return nil, err
	}
	c.Note("changed", up.Changed)
	c.Note("rev", up.Rev)
	return &scheduleUpdatedOut{Body: ScheduleUpdated{Schedule: scheduleOf(up.ScheduleRecord), Changed: up.Changed, Warnings: up.Warnings}}, nil
}

// setScheduleEnabled enables or disables a schedule: ticks while it is disabled never fire.
func (a *API) setScheduleEnabled(enable bool) func(context.Context, *Call, *scheduleIDIn) (*scheduleUpdatedOut, error) {
	return func(ctx context.Context, c *Call, in *scheduleIDIn) (*scheduleUpdatedOut, error) {
		c.Audit.Target = in.ID
		rec, changed, err := a.d.Plane.SetScheduleEnabled(ctx, c.Tenant, in.ID, enable)
		if err != nil {
			return nil, err
		}
		c.Note("changed", changed)
		return &scheduleUpdatedOut{Body: ScheduleUpdated{Schedule: scheduleOf(rec), Changed: changed}}, nil
	}
}

func (a *API) deleteSchedule(ctx context.Context, c *Call, in *scheduleIDIn) (*struct{}, error) {
	c.Audit.Target = in.ID
	return &struct{}{}, a.d.Plane.DeleteSchedule(ctx, c.Tenant, in.ID)
}

// runSchedule starts what the schedule starts, now and once; the audit row names the
// execution.
func (a *API) runSchedule(ctx context.Context, c *Call, in *scheduleIDIn) (*startOut, error) {
	c.Audit.Target = in.ID
	started, err := a.d.Plane.RunScheduleNow(ctx, c.Tenant, in.ID)
	if err != nil {
		return nil, err
	}
	c.Note("execution_id", started.ExecutionID)
	c.Note("flow", started.FlowID+"@"+started.FlowVersion)
	return &startOut{Status: http.StatusCreated, Body: ExecutionStarted{Started: started}}, nil
}

type scheduleFiresIn struct {
	ID    string `path:"id" minLength:"1" maxLength:"128"`
	Limit int    `query:"limit" minimum:"1" maximum:"100" default:"20" doc:"the newest ticks to list"` // control.MaxScheduleFires
}

// ScheduleFires is a schedule's fire history, newest first.
type ScheduleFires struct {
	ScheduleID string                    `json:"schedule_id"`
	Items      []control.ScheduleFireRow `json:"items" doc:"the newest past ticks of the current spec (up to the last tick handled), newest first"`
}

type scheduleFiresOut struct{ Body ScheduleFires }

// scheduleFires lists a schedule's newest past ticks with the execution each one's start is
// (one id per tick wherever it is sent) and that execution's status now.
func (a *API) scheduleFires(ctx context.Context, c *Call, in *scheduleFiresIn) (*scheduleFiresOut, error) {
	rows, err := a.d.Plane.ScheduleFires(ctx, c.Tenant, in.ID, in.Limit)
	if err != nil {
		return nil, err
	}
	return &scheduleFiresOut{Body: ScheduleFires{ScheduleID: in.ID, Items: rows}}, nil
}
