// Package stack runs plaita's containers for real against a Docker daemon, behind the e2e build
// tag (`go test -tags e2e ./test/stack`; `.ci/run` runs it after deploy/local-docker.sh has
// prepared the machine):
//
//   - the compose stack: docker-compose.yml built once and brought up, flows of every wake-up
//     kind run through the published console, a worker killed with SIGKILL under load, drained,
//     the console and Redis restarted, the stack removed with its volumes;
//   - the code node's docker backend: real containers with their limits (network, read-only
//     root, memory, processes, timeout) and nothing of the worker inside.
//
// A machine without a daemon fails these tests with the command that prepares one.
package stack
