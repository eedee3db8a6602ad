// Package cli is plaita's command tree: the role commands (each runs its strict preflight, then
// the role's body from package roles), `plaita doctor`, `plaita run` (a flow in this process on
// the memory store), the operator commands over the shared Redis — start, execution, event,
// schedule, bench, status, dlq, reap, reindex, drain-list, ctl — `plaita migrate` over the
// console database's migrations, and `plaita probe`, the containers' health check.
//
// A command parses its arguments and flags, reads its documents through readDoc (bounded by
// what they feed), calls one operation of package control through the one connection helper
// (conn.go) and renders the typed result: text, or JSON with --json. Refusals come from control
// already worded; refused maps their class to the exit status (2 bad usage, 1 failure). The
// console's HTTP API (web/) calls the same operations, so both refuse exactly the same things.
// No command imports a storage package (store/, store/sqlite, store/keys, queue/): state is
// reached through control, whose Plane roles.NewPlane builds (imports_test.go holds the rule).
//
// Where things go: a new operator command is a file here with its flags and rendering; a new
// operation is a method of control.Plane; a new role is roles/<role>.go wiring with its loop in
// roles/<role>/.
package cli
