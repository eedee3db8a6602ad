package bench

import (
	"errors"
	"strings"
	"testing"
)

// TestBenchSuspendRuns: the suspend scenario completes every round trip and every filter
// wake-up and reports them (the figures themselves are what `plaita bench suspend` is for,
// not what a test checks — beyond the shape of an event's cost: a handful of Redis calls in
// the filter, however many executions wait for its type).
func TestBenchSuspendRuns(t *testing.T) {
	t.Parallel()
	res := runBench(t, Options{Scenario: "suspend", N: 300, Waits: 3000, Types: 2, Concurrency: 4})
	if res.Scenario != "suspend" || res.N != 300 || res.RoundTripsPerSecond <= 0 || res.P50Millis <= 0 ||
		res.Waits != 3000 || res.EventTypes != 2 || res.WaitsPerEventType != 1500 {
		t.Fatalf("figures: %+v", res)
	}
	// A round trip is a publish, the filter's reads and claim, and the worker's resume: a
	// reading far outside a few dozen commands counted something else.
	if res.CallsPerRoundTrip < 10 || res.CallsPerRoundTrip > 120 {
		t.Errorf("%.2f calls per round trip", res.CallsPerRoundTrip)
	}
	// The filter reads the buckets of the event's values, not the 1,500 waits of its type.
	if res.FilterCallsPerEvent < 8 || res.FilterCallsPerEvent > 20 || res.FilterCallsPerUnmatchedEvent < 3 || res.FilterCallsPerUnmatchedEvent > 7 ||
		res.PublishCallsPerEvent <= 0 || res.FilterCPUMicrosPerEvent <= 0 {
		t.Errorf("filter: %.2f calls per event, %.2f per unmatched event, publish %.2f, %.1f µs", res.FilterCallsPerEvent,
			res.FilterCallsPerUnmatchedEvent, res.PublishCallsPerEvent, res.FilterCPUMicrosPerEvent)
	}
	table := text(runBench(t, Options{Scenario: "suspend", N: 50, Concurrency: 2}))
	for _, want := range []string{"round trips/s", "publish → completed", "redis calls per round trip", "filter redis calls per event",
		"filter cpu per event", "50 on 1 event type(s)"} {
		if !strings.Contains(table, want) {
			t.Errorf("the table lacks %q:\n%s", want, table)
		}
	}
}

// --waits below --n, --types above --waits, and either on another scenario are usage errors.
func TestBenchSuspendOptions(t *testing.T) {
	t.Parallel()
	for _, o := range []Options{
		{Scenario: "suspend", N: 10, Waits: 5, Concurrency: 1},
		{Scenario: "suspend", N: 10, Waits: 10, Types: 11, Concurrency: 1},
		{Scenario: "e2e", N: 10, Waits: 10, Concurrency: 1},
		{Scenario: "suspend", N: 10, Types: -1, Concurrency: 1},
	} {
		if _, err := Run(t.Context(), o); !errors.Is(err, ErrUsage) {
			t.Errorf("%+v: %v, want a usage error", o, err)
		}
	}
}
