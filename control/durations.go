package control

import "time"

// RoundDuration prints d at a precision that fits its size (12ms, 3.402s, 1h0m0s).
func RoundDuration(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Millisecond:
		return d.Round(time.Microsecond).String()
	case d < time.Second:
		return d.Round(10 * time.Microsecond).String()
	case d < time.Minute:
		return d.Round(time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// Relative is d from now: "in 3s", or "passed 3s ago".
func Relative(d time.Duration) string {
	if d < 0 {
		return "passed " + RoundDuration(-d) + " ago"
	}
	return "in " + RoundDuration(d)
}
