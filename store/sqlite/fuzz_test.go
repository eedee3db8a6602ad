package sqlite

import (
	"errors"
	"slices"
	"testing"

	"plaita/store"
)

// FuzzParsePasswordHash: a stored hash is read back from the database, which a backup, a
// restore or an operator's hand may have changed. Whatever the string, the parser does not
// panic, refuses with ErrBadPasswordHash, or accepts only a canonical PHC string within the
// parameter bounds (so a stored hash can never make a login take a gigabyte or a minute).
func FuzzParsePasswordHash(f *testing.F) {
	f.Add(hashPassword(cheapPasswords, "correct horse"))
	f.Add("$argon2id$v=19$m=49152,t=2,p=1$c2FsdHNhbHRzYWx0c2FsdA$a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2U")
	f.Add("$argon2id$v=19$m=4294967295,t=1,p=1$c2FsdHNhbHQ$a2V5a2V5a2V5a2V5a2V5a2V5")
	f.Add("$argon2i$v=19$m=64,t=1,p=1$c2FsdHNhbHQ$a2V5a2V5a2V5a2V5a2V5a2V5")
	f.Add("$argon2id$v=19$m=64,t=1,p=256$c2FsdHNhbHQ$a2V5a2V5a2V5a2V5a2V5a2V5")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		h, err := parsePasswordHash(s)
		if err != nil {
			if !errors.Is(err, ErrBadPasswordHash) || !errors.Is(err, store.ErrInvalid) {
				t.Fatalf("%q: an error of another class: %v", s, err)
			}
			return
		}
		if h.encode() != s {
			t.Fatalf("%q accepted but encodes as %q", s, h.encode())
		}
		if err := h.params.validate(); err != nil {
			t.Fatalf("%q accepted out of bounds: %v", s, err)
		}
	})
}

// FuzzDecodeCursor: a cursor comes from the client. Whatever the string, the decoder does not
// panic, refuses with ErrBadCursor, or returns exactly the key count asked for; and every
// cursor the package encodes decodes to its key.
func FuzzDecodeCursor(f *testing.F) {
	f.Add("tenants", encodeCursor("tenants", "acme"), "acme", "")
	f.Add("jobs", encodeCursor("jobs", "1714550400000", "job_x"), "1714550400000", "job_x")
	f.Add("tenants", "eyJsIjoidGVuYW50cyIsImsiOlsiYSJdLCJ4IjoxfQ", "", "")
	f.Add("users", "!!", "", "")
	f.Add("users", "", "", "")
	f.Fuzz(func(t *testing.T, list, s, k1, k2 string) {
		for n := 0; n <= 3; n++ {
			key, err := decodeCursor(list, s, n)
			if err != nil {
				if !errors.Is(err, ErrBadCursor) || !errors.Is(err, store.ErrInvalid) {
					t.Fatalf("%q: an error of another class: %v", s, err)
				}
				continue
			}
			if s != "" && len(key) != n {
				t.Fatalf("%q: %d key values, asked for %d", s, len(key), n)
			}
		}
		keys := []string{k1, k2}
		enc := encodeCursor(list, keys...)
		got, err := decodeCursor(list, enc, 2)
		tooLong := len(enc) > maxCursorLen || len(k1) > maxCursorKey || len(k2) > maxCursorKey
		if err != nil {
			if !tooLong && validUTF8(k1, k2, list) {
				t.Fatalf("encoded %q, %q: %v", k1, k2, err)
			}
			return
		}
		if validUTF8(k1, k2, list) && !slices.Equal(got, keys) {
			t.Fatalf("round trip %q → %q", keys, got)
		}
	})
}

func validUTF8(ss ...string) bool {
	for _, s := range ss {
		for _, r := range s {
			if r == 0xFFFD {
				return false
			}
		}
	}
	return true
}

// FuzzParseURL: PLAITA_CONSOLE_DB_URL comes from the environment. Whatever it is, the parser
// does not panic, refuses with ErrBadURL, or names an absolute path or the in-memory database.
func FuzzParseURL(f *testing.F) {
	for _, s := range []string{"sqlite:////var/lib/c.db", "sqlite:///./c.db", "sqlite://:memory:", "sqlite://c.db", "sqlite:///", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		loc, err := ParseURL(s)
		if err != nil {
			if !errors.Is(err, ErrBadURL) {
				t.Fatalf("%q: %v", s, err)
			}
			return
		}
		if !loc.Memory && (loc.Path == "" || loc.Path[0] != '/') {
			t.Fatalf("%q: %+v", s, loc)
		}
	})
}
