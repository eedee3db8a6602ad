package api

import (
	"encoding/json"
	"time"

	"plaita/control"
)

// The wire types of the schedule routes (h_schedules.go): the console's own, copied field by
// field from control's results.

// Schedule is a cron schedule: its definition and its firing state.
type Schedule struct {
	ID          string          `json:"id"`
	TenantID    string          `json:"tenant_id"`
	Cron        string          `json:"cron"`
	TimeZone    string          `json:"time_zone"`
	Enabled     bool            `json:"enabled"`
	FlowID      string          `json:"flow_id"`
	FlowVersion string          `json:"flow_version"`
	Input       json.RawMessage `json:"input"`
	CreatedAt   time.Time       `json:"created_at"`
	UpdatedAt   time.Time       `json:"updated_at"`
	Rev         int64           `json:"rev"`
	LastTick    time.Time       `json:"last_tick" doc:"the newest tick handled, or the baseline"`
	Next        time.Time       `json:"next_tick,omitzero" doc:"absent while disabled"`
	Pending     []PendingFire   `json:"pending,omitempty"`
	LastFire    *ScheduleFire   `json:"last_fire,omitempty"`
	LastSkip    *ScheduleSkip   `json:"last_skip,omitempty"`
}

// PendingFire is a tick a scheduler claimed and has not finished firing.
type PendingFire struct {
	TickMS         int64  `json:"tick_ms"`
	ExecutionID    string `json:"execution_id"`
	FlowID         string `json:"flow_id"`
	FlowVersion    string `json:"flow_version"`
	By             string `json:"by"`
	ClaimedMS      int64  `json:"claimed_ms"`
	FirstClaimedMS int64  `json:"first_claimed_ms"`
}

// ScheduleFire is the last tick a schedule fired.
type ScheduleFire struct {
	Tick        time.Time `json:"tick"`
	ExecutionID string    `json:"execution_id"`
	FlowVersion string    `json:"flow_version"`
	MessageID   string    `json:"message_id,omitempty"`
	At          time.Time `json:"at"`
	By          string    `json:"by"`
	Recovered   bool      `json:"recovered,omitempty"`
}

// ScheduleSkip is the last tick a schedule did not fire, and why.
type ScheduleSkip struct {
	Tick   time.Time `json:"tick"`
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
}

func scheduleOf(r control.ScheduleRecord) Schedule {
	s := Schedule{ID: r.ID, TenantID: r.TenantID, Cron: r.Cron, TimeZone: r.TimeZone, Enabled: r.Enabled, FlowID: r.FlowID,
		FlowVersion: r.FlowVersion, Input: r.Input, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, Rev: r.Rev, LastTick: r.LastTick,
		Next: r.Next}
	for _, p := range r.Pending {
		s.Pending = append(s.Pending, PendingFire{TickMS: p.TickMS, ExecutionID: p.ExecutionID, FlowID: p.FlowID, FlowVersion: p.FlowVersion,
			By: p.By, ClaimedMS: p.ClaimedMS, FirstClaimedMS: p.FirstClaimedMS})
	}
	if f := r.LastFire; f != nil {
		s.LastFire = &ScheduleFire{Tick: f.Tick, ExecutionID: f.ExecutionID, FlowVersion: f.FlowVersion, MessageID: f.MessageID, At: f.At,
			By: f.By, Recovered: f.Recovered}
	}
	if k := r.LastSkip; k != nil {
		s.LastSkip = &ScheduleSkip{Tick: k.Tick, Reason: k.Reason, At: k.At}
	}
	return s
}

// ScheduleList is a page of the tenant's schedules, oldest first, and (on the first page) the
// records that do not decode.
type ScheduleList struct {
	TenantID string `json:"tenant_id"`
	control.Page[Schedule]
	Bad []control.BadScheduleView `json:"bad"`
}

// ScheduleAdded is a schedule created, with what an operator should know (its flow is not
// published yet).
type ScheduleAdded struct {
	Schedule
	Warnings []string `json:"warnings,omitempty"`
}

// ScheduleUpdated is a schedule after an edit: Changed is false when the edit changed nothing.
type ScheduleUpdated struct {
	Schedule
	Changed  bool     `json:"changed"`
	Warnings []string `json:"warnings,omitempty"`
}
