package filter

import (
	"context"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/rs/zerolog"

	"plaita/internal/service"
)

// Janitor is the event index janitor: every PLAITA_EVENT_INDEX_SWEEP_INTERVAL it checks
// PLAITA_EVENT_INDEX_SWEEP_BUDGET members of the tenants' event feeds (the budget counts
// members checked, expired or not) and removes the events whose record expired from the feed
// and from their type's index. It walks each feed oldest first and goes on where the last tick
// stopped, tenant after tenant, so every member is checked in turn however large the feeds.
// Members no event can have (and tenant list members that are no tenant) are removed too: the
// reconciler skips them, the janitor is what takes them out.
// The write-side prune (store.Events.Publish) is the fallback when no filter runs.
type Janitor struct {
	service.Loop
	d Deps
	s Settings

	// position: the tenant the next tick starts with and the rank in its feed.
	tenant string
	rank   int

	checked, removed, forgotten, invalid *metrics.Counter
	log                                  zerolog.Logger
}

// tenantRetention is how long past the event TTL an idle tenant stays in the tenant list.
const tenantRetention = time.Hour

// NewJanitor builds the janitor; Start runs a tick every SweepInterval.
func NewJanitor(d Deps, s Settings) *Janitor {
	s, d = s.withDefaults(), d.withDefaults()
	j := &Janitor{d: d, s: s, log: d.Log,
		checked:   d.Metrics.GetOrCreateCounter(`plaita_event_index_sweep_checked_total`),
		removed:   d.Metrics.GetOrCreateCounter(`plaita_event_index_sweep_removed_total`),
		forgotten: d.Metrics.GetOrCreateCounter(`plaita_event_index_sweep_tenants_forgotten_total`),
		invalid:   d.Metrics.GetOrCreateCounter(`plaita_event_index_sweep_invalid_total`),
	}
	j.Interval = s.SweepInterval
	j.Once = func(ctx context.Context) {
		st, err := j.RunOnce(ctx)
		if err != nil && ctx.Err() == nil {
			j.log.Warn().Err(err).Str("event", "filter.sweep_failed").Msg("event index sweep failed: the next tick goes on")
		}
		if st.Invalid > 0 {
			j.log.Warn().Str("event", "filter.sweep_invalid_members").Int("members", st.Invalid).
				Msg("event feed or tenant list members no event or tenant can have: removed")
		}
	}
	return j
}

// SweepStats is one tick's work. Invalid counts the members no event (feed) or tenant (tenant
// list) can have, removed; the feed's are part of Removed as well.
type SweepStats struct{ Checked, Removed, Invalid int }

// RunOnce is one tick. Tests call it directly; it is not safe to run concurrently with itself
// (the Loop never does).
func (j *Janitor) RunOnce(ctx context.Context) (SweepStats, error) {
	var st SweepStats
	list, err := j.d.Events.Tenants(ctx, time.Time{})
	st.Invalid += list.Invalid
	j.invalid.Add(list.Invalid)
	tenants := list.Tenants
	if err != nil || len(tenants) == 0 {
		return st, err
	}
	// Start at the tenant the last tick stopped in (or the next one when it is gone).
	i := 0
	for i < len(tenants) && tenants[i] < j.tenant {
		i++
	}
	if i == len(tenants) || tenants[i] != j.tenant {
		j.rank = 0
	}
	budget := j.s.SweepBudget
	for visited := 0; budget > 0 && visited < len(tenants); visited++ {
		t := tenants[(i+visited)%len(tenants)]
		j.tenant = t
		start := j.rank
		res, err := j.d.Events.SweepFeed(ctx, t, start, budget)
		if err != nil {
			return st, err
		}
		budget -= res.Checked
		st.Checked += res.Checked
		st.Removed += res.Removed
		st.Invalid += res.Invalid
		j.checked.Add(res.Checked)
		j.removed.Add(res.Removed)
		j.invalid.Add(res.Invalid)
		j.rank = res.Next
		if start == 0 && res.Checked == res.Removed {
			// The whole feed was expired (or there is none): forget an idle tenant.
			if gone, err := j.d.Events.ForgetTenant(ctx, t, j.d.Now().Add(-j.d.Events.TTL()-tenantRetention)); err == nil && gone {
				j.forgotten.Inc()
			}
		}
		if res.Next != 0 {
			return st, nil // budget spent inside this feed: the next tick goes on here
		}
		// Walked to its end: the next tenant from its start.
		j.tenant = tenants[(i+visited+1)%len(tenants)]
	}
	return st, nil
}
