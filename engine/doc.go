// Package engine holds the flow model, its validation and hash, expression evaluation, the
// executor and the node types. It is pure Go with no Redis, so storage and queue layers plug
// in behind its interfaces.
package engine
