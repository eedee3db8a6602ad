// Package e2e holds the scenarios, on two builds of one package:
//
//   - the default build (`go test ./...`, files *_inproc_test.go) runs them on an in-process
//     cluster: every role's body and the commands run in the test's process on a private
//     redis-server per test;
//   - the e2e build tag (`go test -tags e2e ./test/e2e`, `just e2e`; `.ci/run` runs both) runs
//     the process-level suites: the plaita binary built once (TestMain) and run as real
//     processes — kill -9 and SIGTERM drains, Redis restarts and a three-node cluster, every
//     role's preflight through main.go, plaita dev, the console in chromium. The long chaos
//     suite adds the chaos tag (`just chaos`).
//
// Each build provides the harness core (stack, proc, run); the helpers the scenarios share
// are written once, untagged (scenario_helpers_test.go).
package e2e
