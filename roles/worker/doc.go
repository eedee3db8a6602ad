// Package worker is the worker role's own loop and decisions: the Dispatcher reads tasks from
// the queue (queue.Queue), decides each delivery — the queue's gate, the admission gates
// (deny repos, dispatch target, tenant status, workspace affinity, tenant quota, disk guard),
// the flow definition, the execution lease, the engine run — into one Outcome (outcome.go:
// pure functions with table tests), and settles it in one place (settle.go). It builds no Redis
// command and reads no configuration: store/ and queue/ hold the state behind typed methods, and
// roles/worker.go builds its settings and starts its services (internal/service).
package worker
