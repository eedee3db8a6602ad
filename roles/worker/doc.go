// Package worker holds the pieces of the worker role that are not the queue or the storage:
// the local admission gates (disk guard), the alert sender, and — as they land — the dispatch
// loop that ties queue, storage and engine together. Each loop is a component with
// Start(ctx)/Stop(ctx) in its own file; roles/worker.go composes them.
package worker
