package store

import (
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// Cron specs of the schedules: the one parser (robfig/cron's, without its runner: the schedule
// role claims its ticks itself), the time zones a schedule may name, and the ticks of a spec.

// schedCronParser reads 5 fields, or 6 with seconds first, and the fixed descriptors.
var schedCronParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// schedCronProbe is where ParseCron looks for a first tick: a spec without one in the five years
// after it (30 February) never fires, and every valid day of the year occurs in that span.
var schedCronProbe = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// Cron is a parsed spec in its time zone. Ticks are whole seconds.
type Cron struct {
	spec string
	loc  *time.Location
	s    cron.Schedule
}

// LoadZone resolves a schedule's time zone: "" is UTC; "Local" is refused (it would mean
// each process's own zone).
func LoadZone(tz string) (*time.Location, error) {
	switch tz {
	case "":
		return time.UTC, nil
	case "Local":
		return nil, fmt.Errorf(`time zone "Local" depends on each process's machine: name an IANA zone such as "Europe/Paris" or "UTC"`)
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return nil, fmt.Errorf("time zone %q is not an IANA zone name (e.g. \"UTC\", \"Europe/Paris\", \"America/New_York\")", tz)
	}
	return loc, nil
}

// ParseCron parses a spec in the time zone tz. Refused: an empty spec, a TZ= or CRON_TZ= prefix
// (the zone is a field of its own), @every (its ticks run from whenever it is asked, not on a
// calendar; write "*/5 * * * * *"), and a spec that never matches.
func ParseCron(spec, tz string) (*Cron, error) {
	loc, err := LoadZone(tz)
	if err != nil {
		return nil, err
	}
	trimmed := strings.TrimSpace(spec)
	switch {
	case trimmed == "":
		return nil, fmt.Errorf("empty cron spec: give 5 fields (minute hour day-of-month month day-of-week) or 6 with seconds first")
	case strings.HasPrefix(trimmed, "TZ=") || strings.HasPrefix(trimmed, "CRON_TZ="):
		return nil, fmt.Errorf("cron spec %q carries a time zone: give the zone separately (--tz)", spec)
	case strings.HasPrefix(trimmed, "@every"):
		return nil, fmt.Errorf("cron spec %q: @every is not supported (its ticks depend on when it is read); use fields, e.g. \"*/5 * * * * *\" for every 5 seconds", spec)
	}
	s, err := schedCronParser.Parse(trimmed)
	if err != nil {
		return nil, fmt.Errorf("cron spec %q: %v (5 fields, or 6 with seconds first)", spec, err)
	}
	c := &Cron{spec: trimmed, loc: loc, s: s}
	if c.Next(schedCronProbe).IsZero() {
		return nil, fmt.Errorf("cron spec %q never matches a date", spec)
	}
	return c, nil
}

// Location is the spec's time zone.
func (c *Cron) Location() *time.Location { return c.loc }

// Next is the first tick strictly after t (UTC), or the zero time when there is none within
// five years.
func (c *Cron) Next(t time.Time) time.Time {
	n := c.s.Next(t.In(c.loc))
	if n.IsZero() {
		return n
	}
	return n.UTC()
}

// Latest is the newest tick t with after < t ≤ now; ok is false when there is none. It looks
// back from now in growing windows, so a schedule that was not looked at for a long time costs
// about as many steps as ticks in the last window, not as ticks since after.
func (c *Cron) Latest(after, now time.Time) (t time.Time, ok bool) {
	if !now.After(after) {
		return time.Time{}, false
	}
	for window := time.Minute; ; window *= 8 {
		from, clipped := now.Add(-window), true
		if !from.After(after) {
			from, clipped = after, false
		}
		var last time.Time
		for n := c.Next(from); !n.IsZero() && !n.After(now); n = c.Next(n) {
			last = n
		}
		if !last.IsZero() {
			return last, true
		}
		if !clipped || window > 100*365*24*time.Hour {
			return time.Time{}, false
		}
	}
}
