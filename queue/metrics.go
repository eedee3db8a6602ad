package queue

import (
	"strings"

	"github.com/VictoriaMetrics/metrics"
)

// counters are the queue's Prometheus counters, labelled with the queue name.
type counters struct {
	acked, reclaimed, deadLettered, leaseConflicts, failed, residueSwept *metrics.Counter
	malformed, tooOld, newerSchema, familyMismatch, budgetStale, legacy  *metrics.Counter
}

// Counter names. GetOrCreate lets two queues of one process share a set (a name registered
// twice with NewCounter would panic).
func newCounters(set *metrics.Set, queue string) counters {
	label := `{queue="` + escapeLabel(queue) + `"}`
	c := func(name string) *metrics.Counter { return set.GetOrCreateCounter(name + label) }
	return counters{
		acked:          c("plaita_queue_acked_total"),
		reclaimed:      c("plaita_queue_reclaimed_total"),
		deadLettered:   c("plaita_queue_dead_lettered_total"),
		leaseConflicts: c("plaita_queue_lease_conflicts_total"),
		failed:         c("plaita_queue_failed_total"),
		residueSwept:   c("plaita_queue_residue_swept_total"),
		malformed:      c("plaita_queue_malformed_total"),
		tooOld:         c("plaita_queue_too_old_total"),
		newerSchema:    c("plaita_queue_newer_schema_total"),
		familyMismatch: c("plaita_queue_config_family_mismatch_total"),
		budgetStale:    c("plaita_queue_config_budget_stale_total"),
		legacy:         c("plaita_queue_config_legacy_total"),
	}
}

func escapeLabel(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s)
}

// Stats is a snapshot of the counters (the status command's "queue" block).
type Stats struct {
	Acked          uint64 `json:"acked"`
	Reclaimed      uint64 `json:"reclaimed"`
	DeadLettered   uint64 `json:"dead_lettered"`
	LeaseConflicts uint64 `json:"lease_conflicts"`
	Failed         uint64 `json:"failed"`
	ResidueSwept   uint64 `json:"residue_swept"`
	Malformed      uint64 `json:"malformed"`
	TooOld         uint64 `json:"too_old"`
	NewerSchema    uint64 `json:"newer_schema"`
	FamilyMismatch uint64 `json:"family_mismatch"`
	BudgetStale    uint64 `json:"budget_stale"`
	Legacy         uint64 `json:"legacy"`
}

// Stats reads the counters.
func (q *Queue) Stats() Stats {
	m := q.m
	return Stats{
		Acked: m.acked.Get(), Reclaimed: m.reclaimed.Get(), DeadLettered: m.deadLettered.Get(),
		LeaseConflicts: m.leaseConflicts.Get(), Failed: m.failed.Get(), ResidueSwept: m.residueSwept.Get(),
		Malformed: m.malformed.Get(), TooOld: m.tooOld.Get(), NewerSchema: m.newerSchema.Get(),
		FamilyMismatch: m.familyMismatch.Get(), BudgetStale: m.budgetStale.Get(), Legacy: m.legacy.Get(),
	}
}

// IncLeaseConflicts counts a delivery the worker skipped because another holder has the
// execution's lease.
func (q *Queue) IncLeaseConflicts() { q.m.leaseConflicts.Inc() }

// IncFailed counts a delivery whose execution step failed transiently (left pending for a
// redelivery).
func (q *Queue) IncFailed() { q.m.failed.Inc() }
