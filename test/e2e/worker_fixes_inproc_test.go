//go:build !e2e

package e2e

import (
	"strings"
	"testing"
)

// Real `plaita worker` processes against private redis-servers, for the defects an operator
// found by killing workers, restarting Redis and running for longer than a minute.

// The log node logs through the process logger with the execution and node ids.
func TestRunShowsTheLogNode(t *testing.T) {
	t.Parallel()
	r := run(t, nil, "run", repoFlow(t, "hello.json"))
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	for _, want := range []string{`"event":"flow.log"`, `"node":"announce"`, `"message":"hello says: Hello, world!"`, `"execution_id":"ex_`} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("no %s in stderr:\n%s", want, r.stderr)
		}
	}
}
