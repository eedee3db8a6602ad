//go:build e2e

package e2e

// The console as a process: `plaita console` on the stack's Redis, called over HTTP with the
// admin key (the suites of test/e2e that need the console's process: local mode, the wait for
// Redis, the browser).
