//go:build e2e && chaos

package e2e

import (
	"os"
	"strconv"
	"testing"
	"time"
)

// TestChaos is the long mode of the chaos suite (`go test -tags e2e,chaos -run TestChaos`, or
// `just chaos`): a few thousand executions, PLAITA_CHAOS_EXECUTIONS to change how many. It
// takes minutes; the summary goes to stdout as well.
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real workers under faults for minutes")
	}
	n := 3000
	if v := os.Getenv("PLAITA_CHAOS_EXECUTIONS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			t.Fatalf("PLAITA_CHAOS_EXECUTIONS=%q: want a positive number of executions", v)
		}
	}
	runChaos(t, chaosSize{name: "TestChaos", executions: n, deadline: max(3*time.Minute, time.Duration(n)*200*time.Millisecond), stdout: true})
}
