package roles

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestBenchSuspendRuns: the suspend scenario completes every round trip and reports it (the
// figures themselves are what `plaita bench suspend` is for, not what a test checks).
func TestBenchSuspendRuns(t *testing.T) {
	t.Parallel()
	out := runBenchCommand(t, "suspend", "--n", "600", "--concurrency", "4", "--json")
	var res benchResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("--json output: %v\n%s", err, out)
	}
	if res.Scenario != "suspend" || res.N != 600 || res.RoundTripsPerSecond <= 0 || res.P50Millis <= 0 || res.WaitsPerEventType != 2 {
		t.Fatalf("figures: %+v", res)
	}
	// A round trip is a publish, the filter's reads and claim, and the worker's resume: a
	// reading far outside a few dozen commands counted something else.
	if res.CallsPerRoundTrip < 10 || res.CallsPerRoundTrip > 120 {
		t.Errorf("%.2f calls per round trip", res.CallsPerRoundTrip)
	}
	text := runBenchCommand(t, "suspend", "--n", "50", "--concurrency", "2")
	for _, want := range []string{"round trips/s", "publish → completed", "redis calls per round trip"} {
		if !strings.Contains(text, want) {
			t.Errorf("the table lacks %q:\n%s", want, text)
		}
	}
}
