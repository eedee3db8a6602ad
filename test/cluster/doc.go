// Package cluster is the default tier's scenarios: every role of the binary — worker, filter,
// schedule, delay, console — run in this process as goroutines through the same role bodies
// the binary runs (roles.Body), on a private redis-server per test, with the command tree run
// in process too (cli.App with its own environment). A role is ready when it says so
// (roles.Hooks), never by polling; the tests run in parallel. What needs a real process — kill
// -9, SIGTERM drains, Redis restarts, the three-node cluster, dev, the browser, the preflight
// through main.go — is in test/e2e, behind the e2e build tag.
package cluster
