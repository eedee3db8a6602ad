// Package filter is the filter role (`plaita filter`, docs/events.md): it turns published
// events into resume tasks for the executions suspended at a wait_event.
//
//	Listener    pub/sub notifications → a bounded pool of handlers → Matcher; a notification
//	            dropped on a full queue asks the Reconciler for a pass of its tenant at once
//	Reconciler  every PLAITA_EVENT_RECONCILE_INTERVAL, the events published since its cursor
//	            (per tenant, in Redis) → Matcher, a page at a time: a lost notification still
//	            wakes the execution; also at once for the tenants whose notifications dropped
//	Janitor     every PLAITA_EVENT_INDEX_SWEEP_INTERVAL, PLAITA_EVENT_INDEX_SWEEP_BUDGET members
//	            of the tenants' event feeds checked, expired events and members no event can
//	            have removed from the indexes
//	Matcher     events of a tenant against the waits that may take them: the correlated waits
//	            in the buckets of the events' values and the uncorrelated waits of their type
//	            (docs/events.md, "Correlation"); the execution state decides (suspended there,
//	            since before the event, match true, not timed out); one resume(event) per
//	            (execution, suspension, event) through a one-shot marker, carrying the
//	            suspension it is for; a resume the queue refuses (event data over
//	            PLAITA_EXECUTION_STATE_MAX_BYTES) is marked refused and never retried
//
// An index member that no writer makes (no valid id, no tenant slug) is skipped and counted by
// every reader, never an error: it cannot stall a reconcile pass or hold a tenant's cursor.
//
// Subscriptions and notifications are hints; the execution state is the truth, and the
// worker decides again when it runs the resume.
package filter
