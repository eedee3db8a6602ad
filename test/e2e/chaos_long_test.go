//go:build e2e && chaos

package e2e

import (
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
	n := positiveSetting(t, "PLAITA_CHAOS_EXECUTIONS", 3000)
	runChaos(t, chaosSize{name: "TestChaos", executions: n, deadline: max(3*time.Minute, time.Duration(n)*200*time.Millisecond), stdout: true})
}
