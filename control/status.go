package control

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"plaita/engine/state"
	"plaita/internal/presence"
	"plaita/queue"
	"plaita/store"
)

// Status is what an operator checks first: the task queue's backlog, the dead letters, the
// delay queue, who is alive and on which configuration generation, and the suspended executions
// that no live role will wake. Attention lists what needs a person; empty means healthy.

// statusScanPages bounds the pages of suspended executions one status call reads (each page
// examines at most store.MaxListLimit × 10 index members), so a status over a huge index
// returns in bounded time; Suspended.Complete says whether the scan saw the whole index.
const statusScanPages = 5

// ClusterStatus is the answer of Status.
type ClusterStatus struct {
	At        time.Time        `json:"at"`
	Queue     queue.Backlog    `json:"queue"`
	Delay     DelayStatus      `json:"delay"`
	Roles     []RoleStatus     `json:"roles"`
	Instances []InstanceStatus `json:"instances"`
	// Mismatches are the generations that differ among the live instances of one task queue.
	Mismatches []GenerationMismatch `json:"generation_mismatches"`
	Suspended  SuspendedStatus      `json:"suspended"`
	Attention  []Finding            `json:"attention"`
	// Unreadable are the registry members whose record does not decode.
	Unreadable []string `json:"unreadable_instances,omitempty"`
}

// DelayStatus is the delay queue at a glance.
type DelayStatus struct {
	Key       string     `json:"key"`
	Scheduled int64      `json:"scheduled"`
	Due       int64      `json:"due"` // of the scheduled, those whose time has come (the backlog)
	Dead      int64      `json:"dead"`
	OldestDue *time.Time `json:"oldest_due,omitempty"`
	// Stale counts, of the scheduled entries checked (StaleChecked: the soonest ones, all of
	// them when it equals Scheduled), those that no longer wake their execution — the timeout
	// of a wait or an approval already answered, an execution ended or deleted since: the delay
	// role drops them when due (delay_stale.go).
	Stale        int64 `json:"stale"`
	StaleChecked int64 `json:"stale_checked"`
}

// RoleStatus counts the live instances of one role by status.
type RoleStatus struct {
	Role     string `json:"role"`
	Running  int    `json:"running"`
	Draining int    `json:"draining"`
	Stopping int    `json:"stopping"`
	Built    bool   `json:"built"`
}

// InstanceStatus is one live instance.
type InstanceStatus struct {
	InstanceID       string        `json:"instance_id"`
	Role             string        `json:"role"`
	Status           string        `json:"status"`
	Host             string        `json:"host"`
	PID              int           `json:"pid"`
	Queue            string        `json:"queue,omitempty"`
	ActiveTasks      int           `json:"active_tasks"`
	Capacity         int           `json:"capacity"`
	ConfigFamily     string        `json:"config_family,omitempty"`
	ConfigGeneration string        `json:"config_generation,omitempty"`
	BudgetGeneration string        `json:"budget_generation,omitempty"`
	HeartbeatAge     time.Duration `json:"heartbeat_age_ns"`
	Uptime           time.Duration `json:"uptime_ns"`
	// MetricsAddr is where it serves /metrics, /healthz and /readyz ("" when it serves none).
	MetricsAddr string `json:"metrics_addr,omitempty"`
}

// GenerationMismatch is one generation that takes more than one value among the live instances
// of one task queue (of one role, for the configuration and the budget).
type GenerationMismatch struct {
	Queue      string `json:"queue"`
	Role       string `json:"role,omitempty"` // "" for the family: it is compared across roles
	Generation string `json:"generation"`     // config_family | config_generation | budget_generation
	// Values maps each value to the instances that run it.
	Values map[string][]string `json:"values"`
	Text   string              `json:"text"`
}

// SuspendedStatus counts a tenant's suspended executions by what wakes them.
type SuspendedStatus struct {
	TenantID string `json:"tenant_id"`
	Total    int    `json:"total"`
	// ByKind counts them by suspension (delay | event | approval); WithTimeout those of them
	// with a due time (a delay's, or a wait's or an approval's timeout: the delay role sends it).
	ByKind      map[string]int `json:"by_kind"`
	WithTimeout int            `json:"with_timeout"`
	// Unwoken counts, by role, the suspended executions that wait on a role with no live
	// instance: nothing wakes them until one runs.
	Unwoken  map[string]int `json:"unwoken"`
	Complete bool           `json:"complete"` // false: the scan stopped at its bound
	Skipped  int            `json:"skipped"`  // index members that are no readable execution
}

// Finding is one thing that needs a person.
type Finding struct {
	Code string `json:"code"`
	Text string `json:"text"`
}

// Healthy reports whether nothing needs attention.
func (s ClusterStatus) Healthy() bool { return len(s.Attention) == 0 }

// Status reads the cluster's state for the tenant's suspended executions ("" is the default
// tenant). A read that fails is an error: a status that cannot see must not say healthy.
func (p *Plane) Status(ctx context.Context, tenant string) (ClusterStatus, error) {
	tenant, err := p.Tenant(tenant)
	if err != nil {
		return ClusterStatus{}, err
	}
	now := p.now()
	s := ClusterStatus{At: now.UTC(), Roles: []RoleStatus{}, Instances: []InstanceStatus{}, Mismatches: []GenerationMismatch{}, Attention: []Finding{}}
	if s.Queue, err = p.d.Queue.Backlog(ctx); err != nil {
		return ClusterStatus{}, err
	}
	ds, err := p.d.Delay.Stats(ctx, now)
	if err != nil {
		return ClusterStatus{}, err
	}
	s.Delay = DelayStatus{Key: p.d.Delay.ScheduledKey(), Scheduled: ds.Scheduled, Due: ds.Due, Dead: ds.Dead}
	if !ds.OldestDue.IsZero() {
		s.Delay.OldestDue = &ds.OldestDue
	}
	if ds.Scheduled > 0 {
		if s.Delay.Stale, s.Delay.StaleChecked, err = p.staleDelayEntries(ctx); err != nil {
			return ClusterStatus{}, err
		}
	}
	list, err := p.d.Registry.Instances(ctx, now, presence.TTLFactor*presence.DefaultHeartbeatInterval)
	if err != nil {
		return ClusterStatus{}, fmt.Errorf("instance registry: %w", err)
	}
	for _, bad := range list.Unreadable {
		s.Unreadable = append(s.Unreadable, bad.Error())
	}
	s.instances(list.Live, now, p.d.Built)
	s.Mismatches = mismatches(list.Live)
	if s.Suspended, err = p.suspended(ctx, tenant, liveInstances{recs: list.Live}); err != nil {
		return ClusterStatus{}, err
	}
	s.Attention = p.findings(s, now)
	return s, nil
}

// instances fills the instance rows and the per-role counts (every role that wakes or runs
// executions has a row, alive or not, so that "none" shows).
func (s *ClusterStatus) instances(live []store.InstanceRecord, now time.Time, built func(string) bool) {
	roles := map[string]*RoleStatus{}
	for _, r := range []string{roleWorker, roleFilter, roleDelay, roleSchedule, roleConsole} {
		roles[r] = &RoleStatus{Role: r, Built: built(r)}
	}
	for _, rec := range live {
		s.Instances = append(s.Instances, InstanceStatus{InstanceID: rec.InstanceID, Role: rec.Role, Status: rec.Status,
			Host: rec.Host, PID: rec.PID, Queue: rec.Queue, ActiveTasks: rec.ActiveTasks, Capacity: rec.Capacity,
			ConfigFamily: rec.ConfigFamily, ConfigGeneration: rec.ConfigGeneration, BudgetGeneration: rec.BudgetGeneration,
			HeartbeatAge: max(now.Sub(rec.HeartbeatAt), 0), Uptime: max(now.Sub(rec.StartedAt), 0), MetricsAddr: rec.MetricsAddr})
		r, ok := roles[rec.Role]
		if !ok {
			r = &RoleStatus{Role: rec.Role, Built: built(rec.Role)}
			roles[rec.Role] = r
		}
		switch rec.Status {
		case presence.StatusRunning:
			r.Running++
		case presence.StatusDraining:
			r.Draining++
		default:
			r.Stopping++
		}
	}
	for _, r := range roles {
		s.Roles = append(s.Roles, *r)
	}
	slices.SortFunc(s.Roles, func(a, b RoleStatus) int { return strings.Compare(a.Role, b.Role) })
	slices.SortFunc(s.Instances, func(a, b InstanceStatus) int {
		if c := strings.Compare(a.Role, b.Role); c != 0 {
			return c
		}
		return strings.Compare(a.InstanceID, b.InstanceID)
	})
}

// mismatches are the generations that differ among the live instances of one queue: the
// family among all of them (it names the queue's identity), the configuration and the budget
// among the instances of one role (each role hashes its own settings). Legacy instances (no
// generation recorded) are left out: they are never gated.
func mismatches(live []store.InstanceRecord) []GenerationMismatch {
	byQueue := map[string][]store.InstanceRecord{}
	for _, rec := range live {
		if rec.Queue != "" {
			byQueue[rec.Queue] = append(byQueue[rec.Queue], rec)
		}
	}
	out := []GenerationMismatch{}
	gens := []struct {
		name, why string
		perRole   bool
		of        func(store.InstanceRecord) string
	}{
		{"config_family", "messages of one family are not executed by the other's workers: they stay pending", false,
			func(r store.InstanceRecord) string { return r.ConfigFamily }},
		{"config_generation", "they run different configurations (a rollout in progress, or one left behind)", true,
			func(r store.InstanceRecord) string { return r.ConfigGeneration }},
		{"budget_generation", "a redelivery of one budget is left pending for a worker of the same budget", true,
			func(r store.InstanceRecord) string { return r.BudgetGeneration }},
	}
	for _, q := range sortedKeys(byQueue) {
		for _, g := range gens {
			groups := map[string]map[string][]string{} // role ("" for all) → value → instances
			for _, rec := range byQueue[q] {
				v := g.of(rec)
				if v == "" {
					continue
				}
				role := ""
				if g.perRole {
					role = rec.Role
				}
				if groups[role] == nil {
					groups[role] = map[string][]string{}
				}
				groups[role][v] = append(groups[role][v], rec.InstanceID)
			}
			for _, role := range sortedKeys(groups) {
				values := groups[role]
				if len(values) < 2 {
					continue
				}
				who := "instances"
				if role != "" {
					who = role + " instances"
				}
				out = append(out, GenerationMismatch{Queue: q, Role: role, Generation: g.name, Values: values,
					Text: fmt.Sprintf("%d %s values among the %s of %s: %s", len(values), g.name, who, q, g.why)})
			}
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// suspended counts the tenant's suspended executions and those no live role wakes.
func (p *Plane) suspended(ctx context.Context, tenant string, live liveInstances) (SuspendedStatus, error) {
	out := SuspendedStatus{TenantID: tenant, ByKind: map[string]int{}, Unwoken: map[string]int{}}
	alive := map[string]bool{}
	for _, r := range []string{roleDelay, roleFilter} {
		alive[r] = live.count(r, true).Alive > 0
	}
	cursor := ""
	for range statusScanPages {
		// Redis's alone: what the roles wake (the executions a console ran in local mode are not theirs).
		page, err := p.List(ctx, tenant, ListRequest{Cursor: cursor, Limit: store.MaxListLimit, Status: state.Suspended})
		if err != nil {
			return out, fmt.Errorf("suspended executions: %w", err)
		}
		out.Skipped += page.Skipped
		for _, it := range page.Items {
			out.Total++
			if it.Suspend == nil {
				continue
			}
			out.ByKind[it.Suspend.Kind]++
			if it.Suspend.Due != nil {
				out.WithTimeout++
			}
			switch {
			case it.Suspend.Kind == state.SuspendEvent && !alive[roleFilter]:
				out.Unwoken[roleFilter]++
			case it.Suspend.Kind == state.SuspendDelay && !alive[roleDelay]:
				out.Unwoken[roleDelay]++
			}
		}
		if cursor = page.NextCursor; cursor == "" {
			out.Complete = true
			break
		}
	}
	return out, nil
}

// overdueSlack is how long past its time a delay-queue entry may wait before status calls it
// overdue: the delay role polls every second or so, and a busy one takes a few rounds.
const overdueSlack = time.Minute

// findings are what needs a person, each with the command that looks further or fixes it.
func (p *Plane) findings(s ClusterStatus, now time.Time) []Finding {
	out := []Finding{}
	add := func(code, format string, args ...any) {
		out = append(out, Finding{Code: code, Text: fmt.Sprintf(format, args...)})
	}
	running := map[string]int{}
	for _, r := range s.Roles {
		running[r.Role] = r.Running
	}
	for _, r := range []string{roleWorker, roleFilter, roleDelay, roleSchedule, roleConsole} {
		running[r] += running[roleDev]
	}
	q := s.Queue
	if waiting := q.Lag + q.Pending; waiting > 0 && running[roleWorker] == 0 {
		add("no_worker", "%d task(s) on %s (%d not taken, %d taken and not settled) and no worker alive: start one (`%s`)",
			waiting, q.Stream, q.Lag, q.Pending, p.Command("worker"))
	}
	if q.DLQLength > 0 {
		add("dead_letters", "%d dead letter(s) in %s: `%s`", q.DLQLength, q.DLQ, p.Command("dlq", "list", "--all-tenants"))
	}
	// Stale entries wake nothing: without a delay role they only wait to be dropped.
	if running[roleDelay] == 0 {
		if live := s.Delay.Scheduled - s.Delay.Stale; live > 0 {
			add("no_delay_role", "%d wake-up(s) in the delay queue and no delay role alive: nothing sends them (`%s`)",
				live, p.Command("delay"))
		}
	} else if s.Delay.OldestDue != nil && now.Sub(*s.Delay.OldestDue) > overdueSlack {
		add("delay_overdue", "%d wake-up(s) due and not sent; the oldest was due %s ago", s.Delay.Due, RoundDuration(now.Sub(*s.Delay.OldestDue)))
	}
	if s.Delay.Dead > 0 {
		add("delay_dead", "%d wake-up(s) given up by the delay role (%s): their executions stay suspended until resumed by hand",
			s.Delay.Dead, p.d.Delay.DeadKey())
	}
	for _, m := range s.Mismatches {
		add("generation_mismatch", "%s", m.Text)
	}
	for _, role := range sortedKeys(s.Suspended.Unwoken) {
		add("unwoken_"+role, "%d suspended execution(s) of tenant %s wait on the %s role and none is alive (`%s`)",
			s.Suspended.Unwoken[role], s.Suspended.TenantID, role, p.Command(role))
	}
	if s.Suspended.Skipped > 0 {
		add("index_degraded", "%d member(s) of tenant %s's execution index are no readable execution (`%s`)",
			s.Suspended.Skipped, s.Suspended.TenantID, p.Command("execution", "list", "--tenant", s.Suspended.TenantID))
	}
	if len(s.Unreadable) > 0 {
		add("registry_unreadable", "%d instance record(s) in the registry do not decode", len(s.Unreadable))
	}
	return out
}
