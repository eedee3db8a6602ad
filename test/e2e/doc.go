// Package e2e holds the process-level suites: the plaita binary built once (TestMain) and run
// as real processes — kill -9 and SIGTERM drains, Redis restarts and a three-node cluster,
// every role's preflight through main.go, plaita dev, the console in chromium. They are behind
// the e2e build tag (`go test -tags e2e ./test/e2e`, `just e2e`; `.ci/run` runs them); the
// default `go test ./...` runs the scenarios on an in-process cluster instead (test/cluster).
// The long chaos suite adds the chaos tag (`just chaos`).
package e2e
