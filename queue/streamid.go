package queue

import (
	"strconv"
	"strings"
	"time"
)

// streamID is a parsed Redis Stream id <ms>-<seq>.
type streamID struct{ ms, seq uint64 }

// parseID parses a full stream id ("1700000000000-0"): two runs of decimal digits joined by a
// dash, nothing else (ParseUint in base 10 takes no sign, space or underscore). It runs for
// every delivery, so it is no regular expression.
func parseID(id string) (streamID, bool) {
	a, b, ok := strings.Cut(id, "-")
	if !ok {
		return streamID{}, false
	}
	ms, err1 := strconv.ParseUint(a, 10, 64)
	seq, err2 := strconv.ParseUint(b, 10, 64)
	if err1 != nil || err2 != nil {
		return streamID{}, false
	}
	return streamID{ms, seq}, true
}

func (s streamID) less(o streamID) bool {
	return s.ms < o.ms || (s.ms == o.ms && s.seq < o.seq)
}

func (s streamID) String() string {
	return strconv.FormatUint(s.ms, 10) + "-" + strconv.FormatUint(s.seq, 10)
}

// idTime is the time Redis put into an auto-generated id; ok is false for an id that carries
// none (unparseable, or the 0 millisecond of an explicit test id).
func idTime(id string) (time.Time, bool) {
	s, ok := parseID(id)
	if !ok || s.ms == 0 || s.ms > 1<<53 {
		return time.Time{}, false
	}
	return time.UnixMilli(int64(s.ms)).UTC(), true
}
