package queue

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// streamIDShape is the grammar parseID accepts, as a regular expression: the oracle its
// hand-written check is held to.
var streamIDShape = regexp.MustCompile(`^[0-9]+-[0-9]+$`)

// FuzzParseStreamID: parseID accepts exactly the ids of the shape <digits>-<digits> whose two
// parts fit 64 bits, and gives back their values (String writes the id again, leading zeros
// aside).
func FuzzParseStreamID(f *testing.F) {
	for _, s := range []string{"1700000000000-0", "0-0", "1-2-3", "-1", "1-", "-", "", "+1-2", "1-+2", " 1-2", "1-2 ",
		"1_0-2", "18446744073709551615-18446744073709551615", "18446744073709551616-0", "0x1-0", "1-2\n", "٣-1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		got, ok := parseID(id)
		if !streamIDShape.MatchString(id) {
			if ok {
				t.Fatalf("parseID(%q) accepted an id that is not <digits>-<digits>: %v", id, got)
			}
			return
		}
		a, b, _ := strings.Cut(id, "-")
		ms, err1 := strconv.ParseUint(a, 10, 64)
		seq, err2 := strconv.ParseUint(b, 10, 64)
		if fits := err1 == nil && err2 == nil; ok != fits {
			t.Fatalf("parseID(%q) ok=%v, want %v (a part above 64 bits is refused)", id, ok, fits)
		}
		if ok && (got.ms != ms || got.seq != seq) {
			t.Fatalf("parseID(%q) = %v, want %d-%d", id, got, ms, seq)
		}
		if ok {
			if back, ok2 := parseID(got.String()); !ok2 || back != got {
				t.Fatalf("parseID(%q).String() = %q does not parse back", id, got.String())
			}
		}
	})
}

func TestParseStreamID(t *testing.T) {
	for id, want := range map[string]bool{
		"1700000000000-0": true, "0-0": true, "1-2-3": false, "-1": false, "1-": false, "": false,
		"+1-2": false, "1-+2": false, " 1-2": false, "1_0-2": false, "18446744073709551616-0": false,
	} {
		if _, ok := parseID(id); ok != want {
			t.Errorf("parseID(%q) ok=%v, want %v", id, ok, want)
		}
	}
	if s, ok := parseID("1700000000000-7"); !ok || s.ms != 1700000000000 || s.seq != 7 {
		t.Errorf("parseID(1700000000000-7) = %v, %v", s, ok)
	}
}
