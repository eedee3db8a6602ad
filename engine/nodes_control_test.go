package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"plaita/engine/state"
)

// Delays and timeouts stay within the range a due time can be scheduled in (docs/flows.md,
// "Delays and timeouts"): refused at validation when the value is in the definition, failed
// with DueOutOfRange when a template gives it at run time. Values from issue [wakeup-attacks]:
// 1e18 s once wrapped the due time to 1734-08-22 and the execution went on at once; an until
// of the zero time was saved suspended with a wake-up nothing could register.

// waitFlow is a flow whose first node (id "a") is node, then an end.
func waitFlow(top, node string) string {
	return fmt.Sprintf(`{"id":"w",%s"start":"a","nodes":[%s,{"id":"b","type":"end"}]}`, top, node)
}

func TestWaitBoundsAtValidation(t *testing.T) {
	const tooLong = "must be at most 315360000 seconds (3650 days)"
	delay := func(params string) string { return `{"id":"a","type":"delay","params":` + params + `,"next":"b"}` }
	wait := func(timeout string) string {
		return `{"id":"a","type":"wait_event","params":{"event_type":"e","timeout":` + timeout + `},"next":"b"}`
	}
	approval := func(timeout string) string {
		return `{"id":"a","type":"approval","params":{"timeout":` + timeout + `},"next":"b"}`
	}
	for _, tc := range []struct {
		name, top, node string
		path, msg       string // the one problem expected; "" = valid
	}{
		{"seconds 1e18", "", delay(`{"seconds":1e18}`), "nodes[0].params.seconds", tooLong + ": 1e+18 seconds"},
		{"seconds 9.3e9", "", delay(`{"seconds":9.3e9}`), "nodes[0].params.seconds", tooLong + ": 9.3e+09 seconds"},
		{"seconds max int64", "", delay(`{"seconds":9223372036854775807}`), "nodes[0].params.seconds", tooLong},
		{"seconds just past the max", "", delay(`{"seconds":315360000.001}`), "nodes[0].params.seconds", tooLong},
		{"seconds -1", "", delay(`{"seconds":-1}`), "nodes[0].params.seconds", "must be a non-negative number of seconds"},
		{"seconds NaN string", "", delay(`{"seconds":"NaN"}`), "nodes[0].params.seconds", "must be a number of seconds"},
		{"seconds Infinity string", "", delay(`{"seconds":"Infinity"}`), "nodes[0].params.seconds", "must be a number of seconds"},
		{"seconds 1e18 string", "", delay(`{"seconds":"1e18"}`), "nodes[0].params.seconds", "must be a number of seconds"},
		// Seconds take no template: a wait computed at run time is an until.
		{"seconds template", "", delay(`{"seconds":"{{ INPUT.s }}"}`), "nodes[0].params.seconds", "must be a number of seconds"},
		{"seconds the max", "", delay(`{"seconds":315360000}`), "", ""},
		{"seconds 0", "", delay(`{"seconds":0}`), "", ""},
		{"until the zero time", "", delay(`{"until":"0001-01-01T00:00:00Z"}`), "nodes[0].params.until",
			"0001-01-01T00:00:00Z is before 1970-01-01T00:00:00Z: a due time lies between 1970-01-01T00:00:00Z and 3650 days from now"},
		{"until year 0001", "", delay(`{"until":"0001-06-15T12:00:00Z"}`), "nodes[0].params.until", "0001-06-15T12:00:00Z is before 1970-01-01T00:00:00Z"},
		{"until before the epoch", "", delay(`{"until":"1969-12-31T23:59:59Z"}`), "nodes[0].params.until", "is before 1970-01-01T00:00:00Z"},
		{"until the epoch", "", delay(`{"until":"1970-01-01T00:00:00Z"}`), "", ""},
		{"until far future", "", delay(`{"until":"9999-12-31T23:59:59Z"}`), "nodes[0].params.until",
			"9999-12-31T23:59:59Z is more than 315360000 seconds (3650 days) after now"},
		{"until in the past", "", delay(`{"until":"2001-02-03T04:05:06Z"}`), "", ""},
		{"until not a time", "", delay(`{"until":"tomorrow"}`), "nodes[0].params.until", `"tomorrow" is not an RFC 3339 time`},
		{"until template", "", delay(`{"until":"{{ INPUT.at }}"}`), "", ""},
		{"wait_event timeout 1e18", "", wait("1e18"), "nodes[0].params.timeout", tooLong},
		{"wait_event timeout the max", "", wait("315360000"), "", ""},
		{"approval timeout 9.3e9", "", approval("9.3e9"), "nodes[0].params.timeout", tooLong},
		{"approval timeout the max", "", approval("315360000"), "", ""},
		{"flow timeout 1e18", `"timeout":1e18,`, delay(`{"seconds":1}`), "timeout", tooLong},
		{"flow timeout the max", `"timeout":315360000,`, delay(`{"seconds":1}`), "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(waitFlow(tc.top, tc.node)), NewRegistry(), DefaultExprLimits)
			if tc.path == "" {
				if err != nil {
					t.Fatalf("want valid: %v", err)
				}
				return
			}
			var ve *ValidationError
			if !errors.As(err, &ve) || len(ve.Problems) != 1 {
				t.Fatalf("want one problem at %s, got %v", tc.path, err)
			}
			if p := ve.Problems[0]; p.Path != tc.path || !strings.Contains(p.Message, tc.msg) {
				t.Fatalf("problem %s: %s\nwant %s: …%s…", p.Path, p.Message, tc.path, tc.msg)
			}
		})
	}
}

func TestWaitBoundsAtRunTime(t *testing.T) {
	h := newHarness(t) // the clock stands at 2026-01-02T03:04:05Z
	now := h.clock.Now()
	f := h.flow(waitFlow("", `{"id":"a","type":"delay","params":{"until":"{{ INPUT.at }}"},"next":"b"}`))
	at := func(t time.Time) string { return t.Format(time.RFC3339Nano) }
	for _, tc := range []struct {
		name, until string
		due         string // the due time of the suspension; "" = fails DueOutOfRange
		msg         string
	}{
		{"the zero time", "0001-01-01T00:00:00Z", "", "until 0001-01-01T00:00:00Z is before 1970-01-01T00:00:00Z"},
		{"year 0001", "0001-12-31T23:59:59Z", "", "is before 1970-01-01T00:00:00Z"},
		{"before the epoch", "1969-12-31T23:59:59.999Z", "", "is before 1970-01-01T00:00:00Z"},
		{"the epoch", "1970-01-01T00:00:00Z", "1970-01-01T00:00:00Z", ""},
		{"in the past", "2001-02-03T04:05:06Z", "2001-02-03T04:05:06Z", ""},
		{"the max", at(now.Add(MaxWait)), at(now.Add(MaxWait)), ""},
		{"just past the max", at(now.Add(MaxWait + time.Second)), "", "is more than 315360000 seconds (3650 days) after now (2026-01-02T03:04:05Z)"},
		{"far future", "9999-12-31T23:59:59Z", "", "until 9999-12-31T23:59:59Z is more than 315360000 seconds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := h.start(f, map[string]any{"at": tc.until})
			if tc.due == "" {
				wantError(t, st, ErrTypeDueOutOfRange, "a")
				if !st.Error.Permanent || !strings.Contains(st.Error.Message, tc.msg) || st.Suspend != nil {
					t.Fatalf("error %+v, suspend %+v; want a permanent error with …%s…", st.Error, st.Suspend, tc.msg)
				}
				return
			}
			wantStatus(t, st, state.Suspended)
			if st.Suspend.Kind != state.SuspendDelay || st.Suspend.Due == nil || at(*st.Suspend.Due) != tc.due {
				t.Fatalf("suspend %+v, want due %s", st.Suspend, tc.due)
			}
			// A due time in the past keeps its meaning: the continue the delay queue sends at
			// once goes on.
			st, err := h.ex.Resume(context.Background(), f, st.ExecutionID, ResumeContinue, nil)
			if err != nil {
				t.Fatal(err)
			}
			wantStatus(t, st, state.Completed)
		})
	}
	// A value that is not a time at all stays what it was: a node error.
	wantError(t, h.start(f, map[string]any{"at": "tomorrow"}), ErrTypeNode, "a")
}

// The run-time check holds for seconds and timeouts too: a clock off the scale (before 1970)
// cannot make a due time no wake-up can carry.
func TestWaitBoundsHoldForAClockOffTheScale(t *testing.T) {
	h := newHarness(t)
	h.clock.now = time.Date(1960, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, node := range []string{
		`{"id":"a","type":"delay","params":{"seconds":60},"next":"b"}`,
		`{"id":"a","type":"wait_event","params":{"event_type":"e","timeout":60},"next":"b"}`,
		`{"id":"a","type":"approval","params":{"timeout":60},"next":"b"}`,
	} {
		st := h.start(h.flow(waitFlow("", node)), nil)
		wantError(t, st, ErrTypeDueOutOfRange, "a")
		if !strings.Contains(st.Error.Message, "1960-01-01T00:01:00Z is before 1970-01-01T00:00:00Z") {
			t.Fatalf("%s: %q", node, st.Error.Message)
		}
	}
	h.clock.now = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	st := h.start(h.flow(waitFlow("", `{"id":"a","type":"wait_event","params":{"event_type":"e","timeout":315360000},"next":"b"}`)), nil)
	if want := h.clock.Now().Add(MaxWait); st.Status != state.Suspended || st.Suspend.Due == nil || !st.Suspend.Due.Equal(want) {
		t.Fatalf("a timeout of the max: %s, suspend %+v, want due %s", st.Status, st.Suspend, want)
	}
}

func TestSecondsSaturates(t *testing.T) {
	for _, tc := range []struct {
		in   float64
		want time.Duration
	}{
		{1.5, 1500 * time.Millisecond},
		{MaxWaitSeconds, MaxWait},
		{1e18, math.MaxInt64},
		{9.3e9, math.MaxInt64},
		{math.MaxInt64, math.MaxInt64},
		{math.Inf(1), math.MaxInt64},
		{-1e18, math.MinInt64},
		{math.NaN(), 0},
	} {
		if got := seconds(tc.in); got != tc.want {
			t.Errorf("seconds(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}
