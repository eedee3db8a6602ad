package control

import (
	"slices"
	"testing"
	"time"

	"plaita/store"
)

// pastTicks walks a cron forward (it has no "previous") from a window it widens: the newest n
// ticks up to last, none at or before created, whatever the spec's rhythm.
func TestPastTicks(t *testing.T) {
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, c := range []struct {
		name, spec, created, last string
		n                         int
		want                      []string
	}{
		{"hourly", "0 * * * *", "2026-01-01T00:00:00Z", "2026-12-05T10:00:00Z", 3,
			[]string{"2026-12-05T10:00:00Z", "2026-12-05T09:00:00Z", "2026-12-05T08:00:00Z"}},
		{"created lately: fewer", "0 * * * *", "2026-12-05T08:30:00Z", "2026-12-05T10:00:00Z", 5,
			[]string{"2026-12-05T10:00:00Z", "2026-12-05T09:00:00Z"}},
		// The step after last (17:59 → 09:00) is no measure of the ticks before it.
		{"office hours", "* 9-17 * * *", "2026-01-01T00:00:00Z", "2026-12-04T17:59:00Z", 2,
			[]string{"2026-12-04T17:59:00Z", "2026-12-04T17:58:00Z"}},
		{"monthly, from far", "0 3 1 * *", "2025-01-01T00:00:00Z", "2026-12-01T03:00:00Z", 2,
			[]string{"2026-12-01T03:00:00Z", "2026-11-01T03:00:00Z"}},
		{"nothing handled yet", "0 * * * *", "2026-12-05T08:30:00Z", "2026-12-05T08:30:00Z", 3, nil},
	} {
		cr, err := store.ParseCron(c.spec, "")
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, tk := range pastTicks(cr, at(c.created), at(c.last), c.n) {
			got = append(got, tk.UTC().Format(time.RFC3339))
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	// A spec that fires every second, created a year ago: the first window holds the newest.
	cr, err := store.ParseCron("* * * * * *", "")
	if err != nil {
		t.Fatal(err)
	}
	last := at("2026-12-05T10:00:00Z")
	got := pastTicks(cr, last.AddDate(-1, 0, 0), last, 4)
	if len(got) != 4 || !got[0].Equal(last) || !got[3].Equal(last.Add(-3*time.Second)) {
		t.Errorf("every second: %v", got)
	}
}
