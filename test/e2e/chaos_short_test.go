//go:build e2e && !chaos

package e2e

import (
	"testing"
	"time"
)

// TestChaosShort is the chaos suite at the size every `go test` runs; the chaos build runs
// TestChaos, the long mode, instead.
func TestChaosShort(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real workers under faults for about a minute")
	}
	t.Parallel()
	runChaos(t, chaosSize{name: "TestChaosShort", executions: 480, deadline: 3 * time.Minute})
}
