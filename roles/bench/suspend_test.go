package bench

import (
	"strings"
	"testing"
)

// TestBenchSuspendRuns: the suspend scenario completes every round trip and reports it (the
// figures themselves are what `plaita bench suspend` is for, not what a test checks).
func TestBenchSuspendRuns(t *testing.T) {
	t.Parallel()
	res := runBench(t, Options{Scenario: "suspend", N: 600, Concurrency: 4})
	if res.Scenario != "suspend" || res.N != 600 || res.RoundTripsPerSecond <= 0 || res.P50Millis <= 0 || res.WaitsPerEventType != 2 {
		t.Fatalf("figures: %+v", res)
	}
	// A round trip is a publish, the filter's reads and claim, and the worker's resume: a
	// reading far outside a few dozen commands counted something else.
	if res.CallsPerRoundTrip < 10 || res.CallsPerRoundTrip > 120 {
		t.Errorf("%.2f calls per round trip", res.CallsPerRoundTrip)
	}
	table := text(runBench(t, Options{Scenario: "suspend", N: 50, Concurrency: 2}))
	for _, want := range []string{"round trips/s", "publish → completed", "redis calls per round trip"} {
		if !strings.Contains(table, want) {
			t.Errorf("the table lacks %q:\n%s", want, table)
		}
	}
}
