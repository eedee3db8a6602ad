package postgres

import (
	"strconv"
	"strings"
	"testing"
)

// The placeholders are numbered in order; what is quoted or commented is left alone.
func TestRebind(t *testing.T) {
	for in, want := range map[string]string{
		"SELECT 1":                          "SELECT 1",
		"SELECT ? , ?":                      "SELECT $1 , $2",
		"WHERE a = ? AND b = '?' AND c = ?": "WHERE a = $1 AND b = '?' AND c = $2",
		"WHERE a = 'it''s ?' AND b = ?":     "WHERE a = 'it''s ?' AND b = $1",
		`SELECT "we?rd" FROM t WHERE x = ?`: `SELECT "we?rd" FROM t WHERE x = $1`,
		"SELECT ? -- why?\n, ?":             "SELECT $1 -- why?\n, $2",
		"SELECT /* a ? here */ ?":           "SELECT /* a ? here */ $1",
		"SELECT '?":                         "SELECT '?",
		"SELECT ? /* unclosed ?":            "SELECT $1 /* unclosed ?",
		"INSERT INTO t VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)": "INSERT INTO t VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
	} {
		if got := rebind(in); got != want {
			t.Errorf("rebind(%q) = %q, want %q", in, got, want)
		}
	}
}

// Whatever the text, rebind keeps everything but the placeholders: without them the text is
// unchanged, and every ? it replaces becomes the next $n.
func FuzzRebind(f *testing.F) {
	for _, s := range []string{"SELECT ?", "a = '?' AND b = ?", "-- ?\n?", "/* ? */ ?", `"?" ?`, "'", "/*"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out := rebind(in)
		if !strings.Contains(in, "?") && out != in {
			t.Fatalf("rebind(%q) = %q: changed a text without placeholders", in, out)
		}
		if strings.Count(out, "?") > strings.Count(in, "?") {
			t.Fatalf("rebind(%q) = %q: more ? than before", in, out)
		}
		replaced := strings.Count(in, "?") - strings.Count(out, "?")
		for i := replaced; i >= 1; i-- {
			if !strings.Contains(out, "$"+strconv.Itoa(i)) {
				t.Fatalf("rebind(%q) = %q: no $%d", in, out, i)
			}
		}
	})
}
