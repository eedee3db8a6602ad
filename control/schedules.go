package control

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"plaita/engine/state"
	"plaita/store"
	"plaita/store/keys"
)

// Cron schedules (docs/schedules.md): what `plaita schedule add|list|show|enable|disable|delete`
// and the console edit. The schedule role fires them.

// NewScheduleID mints a schedule id.
func NewScheduleID() string {
	var b [6]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return "sch_" + hex.EncodeToString(b[:])
}

// ScheduleAdded is a schedule created, with what an operator should know (its flow is not
// published yet).
type ScheduleAdded struct {
	store.ScheduleRecord
	Warnings []string `json:"warnings,omitempty"`
}

// scheduleRefusal classifies a store error of a schedule edit.
func scheduleRefusal(err error) error {
	switch {
	case AsRefusal(err) != nil:
		return err
	case errors.Is(err, store.ErrBadSchedule):
		return refuse(Invalid, "invalid_schedule", err, "%v", err)
	case errors.Is(err, store.ErrScheduleExists):
		return refuse(Conflict, "schedule_exists", err, "%v", err)
	case errors.Is(err, store.ErrScheduleNotFound):
		return refuse(NotFound, "schedule_not_found", err, "%v", err)
	case errors.Is(err, store.ErrScheduleChanged):
		return refuse(Conflict, "schedule_changed", err, "%v: try again", err)
	}
	return err
}

// AddSchedule creates a schedule (ID "" = a new one; Input nil = {}). A flow (version) not
// published yet is a warning: its ticks are skipped until it is.
func (p *Plane) AddSchedule(ctx context.Context, s store.Schedule) (ScheduleAdded, error) {
	if s.ID == "" {
		s.ID = NewScheduleID()
	}
	if s.Input == nil {
		s.Input = json.RawMessage(`{}`)
	}
	tenant, err := p.Tenant(s.TenantID)
	if err != nil {
		return ScheduleAdded{}, err
	}
	s.TenantID = tenant
	if err := p.checkSchedule(&s); err != nil {
		return ScheduleAdded{}, err
	}
	var out ScheduleAdded
	if w, err := p.flowWarning(ctx, s); err != nil {
		return ScheduleAdded{}, err
	} else if w != "" {
		out.Warnings = append(out.Warnings, w)
	}
	if out.ScheduleRecord, err = p.d.Schedules.Create(ctx, s, p.now()); err != nil {
		return ScheduleAdded{}, scheduleRefusal(err)
	}
	return out, nil
}

// CheckSchedule normalizes a definition (the spec trimmed, no version = latest) and checks
// what can be checked without the cluster: its id, cron spec and time zone, flow and version,
// and that its input is JSON. The CLI checks a schedule with it before it connects, and every
// create and update runs it again (checkSchedule): the one place a cron spec is judged.
func CheckSchedule(s *store.Schedule) error {
	s.Cron = strings.TrimSpace(s.Cron)
	if s.FlowVersion == "" {
		s.FlowVersion = store.LatestVersion
	}
	if s.ID != "" { // none yet: AddSchedule gives it one
		if err := keys.ValidName("schedule id", s.ID); err != nil {
			return refuse(Invalid, "invalid_schedule", err, "%v", err)
		}
	}
	if _, err := store.ParseCron(s.Cron, s.TimeZone); err != nil {
		return refuse(Invalid, "invalid_cron", err, "the cron or its time zone: %v", err) // the words of every front end, not a flag
	}
	if err := keys.ValidName("flow id", s.FlowID); err != nil {
		return refuse(Invalid, "invalid_schedule", err, "--flow: %v", err)
	}
	if s.FlowVersion != store.LatestVersion {
		if err := keys.ValidName("flow version", s.FlowVersion); err != nil {
			return refuse(Invalid, "invalid_schedule", err, "--version: %v (or %s)", err, store.LatestVersion)
		}
	}
	if len(s.Input) > 0 && !json.Valid(s.Input) {
		return refuse(Invalid, "invalid_input", nil, "--input is not JSON")
	}
	return nil
}

// checkSchedule is CheckSchedule with the plane's bound on the input (a start must be able to
// carry it).
func (p *Plane) checkSchedule(s *store.Schedule) error {
	if err := CheckSchedule(s); err != nil {
		return err
	}
	if limit := p.d.StateMaxBytes; limit > 0 && len(s.Input) > limit {
		return refuse(Invalid, "invalid_input", nil,
			"--input is %d bytes, above the %d-byte bound (PLAITA_EXECUTION_STATE_MAX_BYTES): no start could carry it", len(s.Input), limit)
	}
	return nil
}

// SchedulePatch is an edit of a schedule: every field that is set replaces the stored one.
type SchedulePatch struct {
	Cron        *string
	TimeZone    *string
	FlowID      *string
	FlowVersion *string // "" or "latest": the latest published version at each tick
	Input       json.RawMessage
	Enabled     *bool
}

// ScheduleUpdated is a schedule after an edit: Changed is false when the edit changed nothing.
type ScheduleUpdated struct {
	store.ScheduleRecord
	Changed  bool     `json:"changed"`
	Warnings []string `json:"warnings,omitempty"`
}

// UpdateSchedule edits a schedule, checked as AddSchedule checks a new one. A new calendar
// (cron or time zone) moves its baseline to now, so ticks of the old calendar are never fired
// under the new one (store.Schedules.Update); a flow (version) not published yet is a warning.
func (p *Plane) UpdateSchedule(ctx context.Context, tenant, id string, patch SchedulePatch) (ScheduleUpdated, error) {
	if err := scheduleID(id); err != nil {
		return ScheduleUpdated{}, err
	}
	tenant, err := p.Tenant(tenant)
	if err != nil {
		return ScheduleUpdated{}, err
	}
	rec, changed, err := p.d.Schedules.Update(ctx, tenant, id, p.now(), func(s *store.Schedule) error {
		for _, f := range []struct {
			v  *string
			to *string
		}{{patch.Cron, &s.Cron}, {patch.TimeZone, &s.TimeZone}, {patch.FlowID, &s.FlowID}, {patch.FlowVersion, &s.FlowVersion}} {
			if f.v != nil {
				*f.to = *f.v
			}
		}
		if patch.Input != nil {
			s.Input = patch.Input
		}
		if patch.Enabled != nil {
			s.Enabled = *patch.Enabled
		}
		return p.checkSchedule(s)
	})
	if err != nil {
		return ScheduleUpdated{}, scheduleRefusal(err)
	}
	out := ScheduleUpdated{ScheduleRecord: rec, Changed: changed}
	if w, err := p.flowWarning(ctx, rec.Schedule); err != nil {
		return ScheduleUpdated{}, err
	} else if w != "" {
		out.Warnings = append(out.Warnings, w)
	}
	return out, nil
}

// flowWarning says when the schedule's flow (version) is not published yet.
func (p *Plane) flowWarning(ctx context.Context, s store.Schedule) (string, error) {
	var err error
	if s.FlowVersion == store.LatestVersion {
		_, err = p.d.Flows.Latest(ctx, s.TenantID, s.FlowID)
	} else {
		_, err = p.d.Flows.Get(ctx, s.TenantID, s.FlowID, s.FlowVersion)
	}
	switch {
	case errors.Is(err, store.ErrFlowNotFound):
		return fmt.Sprintf("flow %s version %s is not published in tenant %s yet: its ticks are skipped until it is (%s publishes it)",
			s.FlowID, s.FlowVersion, s.TenantID, p.Command("flow", "publish", "FLOW.json")), nil
	case err != nil:
		return "", err
	}
	return "", nil
}

// Schedules lists the tenant's schedules, and the records that do not decode.
func (p *Plane) Schedules(ctx context.Context, tenant string) ([]store.ScheduleRecord, []store.BadSchedule, error) {
	tenant, err := p.Tenant(tenant)
	if err != nil {
		return nil, nil, err
	}
	return p.d.Schedules.List(ctx, tenant)
}

// ScheduleList asks for a page of the tenant's schedules, oldest first: after Cursor ("" =
// from the first; else the NextCursor of the page before), at most Limit (1 to
// MaxScheduleList).
type ScheduleList struct {
	Tenant string
	Cursor string
	Limit  int
}

// MaxScheduleList bounds a page of schedules.
const MaxScheduleList = 1000

// SchedulePage is a page of schedules. Bad are the records that do not decode (on the first
// page only: they have no position of their own).
type SchedulePage struct {
	TenantID   string                 `json:"tenant_id"`
	Items      []store.ScheduleRecord `json:"items"`
	Bad        []BadScheduleView      `json:"bad"`
	NextCursor string                 `json:"next_cursor,omitempty"`
}

// BadScheduleView is a schedule whose record does not decode: delete it, or write it again.
type BadScheduleView struct {
	ID    string `json:"id"`
	Error string `json:"error"`
}

// scheduleCursor is where a page of schedules ends: the creation time (ms) and id of its last
// schedule, the order the tenant's index keeps them in. Opaque to callers (base64 JSON).
type scheduleCursor struct {
	CreatedMS int64  `json:"c"`
	ID        string `json:"i"`
}

// SchedulePage lists a page of the tenant's schedules, oldest first. A schedule deleted since
// the page before does not shift the next one.
func (p *Plane) SchedulePage(ctx context.Context, req ScheduleList) (SchedulePage, error) {
	if err := checkLimit(req.Limit, MaxScheduleList); err != nil {
		return SchedulePage{}, err
	}
	var after *scheduleCursor
	if req.Cursor != "" {
		var c scheduleCursor
		b, err := base64.RawURLEncoding.DecodeString(req.Cursor)
		if err == nil {
			err = json.Unmarshal(b, &c)
		}
		if err != nil || c.ID == "" {
			return SchedulePage{}, refuse(Invalid, "invalid_cursor", err, "cursor %q is not a position in a list of schedules", req.Cursor)
		}
		after = &c
	}
	recs, bad, err := p.Schedules(ctx, req.Tenant)
	if err != nil {
		return SchedulePage{}, err
	}
	tenant, _ := p.Tenant(req.Tenant) // checked by Schedules
	out := SchedulePage{TenantID: tenant, Items: []store.ScheduleRecord{}, Bad: []BadScheduleView{}}
	if after == nil {
		for _, b := range bad {
			out.Bad = append(out.Bad, BadScheduleView{ID: b.ID, Error: b.Err.Error()})
		}
	}
	for _, rec := range recs {
		ms := rec.CreatedAt.UnixMilli()
		if after != nil && (ms < after.CreatedMS || ms == after.CreatedMS && rec.ID <= after.ID) {
			continue
		}
		if len(out.Items) == req.Limit {
			last := out.Items[len(out.Items)-1]
			b, _ := json.Marshal(scheduleCursor{CreatedMS: last.CreatedAt.UnixMilli(), ID: last.ID})
			out.NextCursor = base64.RawURLEncoding.EncodeToString(b)
			break
		}
		out.Items = append(out.Items, rec)
	}
	return out, nil
}

// scheduleID checks a schedule id argument.
func scheduleID(id string) error {
	if err := keys.ValidName("schedule id", id); err != nil {
		return refuse(Invalid, "invalid_schedule", err, "%v", err)
	}
	return nil
}

// Schedule reads one schedule with its firing state.
func (p *Plane) Schedule(ctx context.Context, tenant, id string) (store.ScheduleRecord, error) {
	if err := scheduleID(id); err != nil {
		return store.ScheduleRecord{}, err
	}
	tenant, err := p.Tenant(tenant)
	if err != nil {
		return store.ScheduleRecord{}, err
	}
	rec, err := p.d.Schedules.Get(ctx, tenant, id)
	if err != nil {
		return rec, scheduleRefusal(err)
	}
	return rec, nil
}

// SetScheduleEnabled enables or disables a schedule; changed is false when it already was.
// Ticks while a schedule is disabled never fire.
func (p *Plane) SetScheduleEnabled(ctx context.Context, tenant, id string, enabled bool) (rec store.ScheduleRecord, changed bool, err error) {
	if err := scheduleID(id); err != nil {
		return rec, false, err
	}
	if tenant, err = p.Tenant(tenant); err != nil {
		return rec, false, err
	}
	rec, changed, err = p.d.Schedules.SetEnabled(ctx, tenant, id, enabled, p.now())
	if err != nil {
		return rec, false, scheduleRefusal(err)
	}
	return rec, changed, nil
}

// DisableSchedules disables every enabled schedule of the tenant (what disabling a tenant does
// to its schedules, so that its ticks stop even where the schedule role's tenant-status check
// cannot see the status) and returns the ids it disabled, sorted. A record that does not
// decode is left as it is: the schedule role skips it anyway.
func (p *Plane) DisableSchedules(ctx context.Context, tenant string) ([]string, error) {
	recs, _, err := p.Schedules(ctx, tenant)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, rec := range recs {
		if !rec.Enabled {
			continue
		}
		if _, changed, err := p.SetScheduleEnabled(ctx, tenant, rec.ID, false); err != nil {
			if r := AsRefusal(err); r != nil && r.Class == NotFound {
				continue // deleted meanwhile
			}
			return out, fmt.Errorf("disable schedule %s: %w", rec.ID, err)
		} else if changed {
			out = append(out, rec.ID)
		}
	}
	sort.Strings(out)
	return out, nil
}

// DeleteSchedule deletes a schedule (a start already enqueued still runs): NotFound when there
// is none.
func (p *Plane) DeleteSchedule(ctx context.Context, tenant, id string) error {
	if err := scheduleID(id); err != nil {
		return err
	}
	tenant, err := p.Tenant(tenant)
	if err != nil {
		return err
	}
	ok, err := p.d.Schedules.Delete(ctx, tenant, id)
	if err != nil {
		return err
	}
	if !ok {
		return refuse(NotFound, "schedule_not_found", store.ErrScheduleNotFound, "no schedule %s in tenant %s", id, tenant)
	}
	return nil
}

// RunScheduleNow starts what a schedule starts — its flow version (the latest when it names
// none) with its input — now, once, as an operator's start: the schedule's ticks, its last
// fire and its pending claims are left as they are. A disabled schedule runs too (it is the
// operator's own start).
func (p *Plane) RunScheduleNow(ctx context.Context, tenant, id string) (Started, error) {
	rec, err := p.Schedule(ctx, tenant, id)
	if err != nil {
		return Started{}, err
	}
	version := rec.FlowVersion
	if version == store.LatestVersion {
		version = ""
	}
	return p.Start(ctx, StartRequest{Tenant: tenant, FlowID: rec.FlowID, Version: version, Input: rec.Input})
}

// Ticks are the n ticks of a cron spec in its time zone strictly after t (UTC; fewer when the
// spec has no more within five years): what a schedule's page lists after its next tick, so
// the spec reads as the times it fires.
func Ticks(spec, tz string, after time.Time, n int) ([]time.Time, error) {
	c, err := store.ParseCron(spec, tz)
	if err != nil {
		return nil, err
	}
	var out []time.Time
	for t := after; len(out) < n; {
		if t = c.Next(t); t.IsZero() {
			break
		}
		out = append(out, t)
	}
	return out, nil
}

// ScheduleFireRow is one past tick of a schedule and the execution its start is (the start of
// a tick has one id wherever and however often it is sent: store.ScheduleExecutionID).
type ScheduleFireRow struct {
	Tick        time.Time    `json:"tick"`
	ExecutionID string       `json:"execution_id"`
	Status      state.Status `json:"status,omitempty" doc:"the execution's status now; absent when there is none (the tick was skipped, or its execution deleted or expired)"`
}

// MaxScheduleFires bounds a fire history's ticks.
const MaxScheduleFires = 100

// maxTickWalk bounds the ticks a fire history walks to find the newest ones (a spec that fires
// every second over a long window).
const maxTickWalk = 100_000

// ScheduleFires is the schedule's newest n past ticks (up to the last tick it handled, none
// before it was created), newest first, each with its execution and that execution's status:
// the schedule's fire history, read from the executions themselves. The ticks are the current
// spec's: ticks of an earlier spec are not listed.
func (p *Plane) ScheduleFires(ctx context.Context, tenant, id string, n int) ([]ScheduleFireRow, error) {
	if n < 1 || n > MaxScheduleFires {
		return nil, refuse(Invalid, "invalid_limit", nil, "limit %d: use 1 to %d", n, MaxScheduleFires)
	}
	rec, err := p.Schedule(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	c, err := store.ParseCron(rec.Cron, rec.TimeZone)
	if err != nil {
		return nil, fmt.Errorf("schedule %s: %w", id, err)
	}
	ts, err := p.tenantStore(rec.TenantID)
	if err != nil {
		return nil, err
	}
	out := []ScheduleFireRow{}
	for _, tick := range pastTicks(c, rec.CreatedAt, rec.LastTick, n) {
		row := ScheduleFireRow{Tick: tick, ExecutionID: store.ScheduleExecutionID(rec.TenantID, rec.ID, rec.CreatedAt, tick)}
		st, err := ts.Load(ctx, row.ExecutionID)
		switch {
		case err == nil:
			row.Status = st.Status
		case errors.Is(err, store.ErrStateCorrupt):
			row.Status = wasCorrupt
		case !errors.Is(err, store.ErrNotFound):
			return nil, fmt.Errorf("schedule %s: the execution of tick %s: %w", id, tick.Format(time.RFC3339), err)
		}
		out = append(out, row)
	}
	return out, nil
}

// pastTicks are the newest n ticks of c in (created, last], newest first. A cron has no
// "previous", so it walks forward from a window before last that it widens until it holds n
// ticks or reaches created, keeping the newest n (at most maxTickWalk ticks walked in all).
func pastTicks(c *store.Cron, created, last time.Time, n int) []time.Time {
	if last.IsZero() || !last.After(created) {
		return nil
	}
	step := c.Next(last).Sub(last)
	if step <= 0 {
		step = time.Hour
	}
	walked := 0
	for w := step * time.Duration(n+1); ; w *= 2 {
		from := created // w stops doubling once it reaches back to created: no overflow
		if w < last.Sub(created) {
			from = last.Add(-w)
		}
		ring := make([]time.Time, 0, n)
		for t := c.Next(from); !t.IsZero() && !t.After(last) && walked < maxTickWalk; t = c.Next(t) {
			walked++
			if len(ring) == n {
				ring = ring[1:]
			}
			ring = append(ring, t)
		}
		if len(ring) == n || from.Equal(created) || walked >= maxTickWalk {
			slices.Reverse(ring)
			return ring
		}
	}
}
