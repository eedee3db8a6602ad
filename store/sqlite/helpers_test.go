package sqlite

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// cheapPasswords keeps the tests' hashing fast; BenchmarkVerifyPassword measures the defaults.
var cheapPasswords = PasswordParams{MemoryKiB: 64, Time: 1, Threads: 1, SaltLen: 16, KeyLen: 32}

// clock is a test clock: it moves only when told.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// fixture is one test's database in its own temp dir.
type fixture struct {
	*DB
	t     testing.TB
	clock *clock
	url   string
}

// fileURL is the sqlite:// URL of a file in dir.
func fileURL(dir, name string) string { return "sqlite:///" + filepath.Join(dir, name) }

// setup opens a migrated database file in a temp dir with a test clock and cheap hashes.
func setup(t testing.TB, opt ...Option) *fixture {
	t.Helper()
	c := newClock()
	u := fileURL(t.TempDir(), "console.db")
	db, err := Open(ctx(t), u, append([]Option{WithClock(c.Now), WithPasswordParams(cheapPasswords)}, opt...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return &fixture{DB: db, t: t, clock: c, url: u}
}

func ctx(t testing.TB) context.Context {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// must fails the test on err.
func must[T any](t testing.TB) func(v T, err error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// wantErr checks err matches class and sentinel (nil: the class alone).
func wantErr(t testing.TB, what string, err, class, sentinel error) {
	t.Helper()
	if !errors.Is(err, class) {
		t.Errorf("%s: %v, want class %v", what, err, class)
	}
	if sentinel != nil && !errors.Is(err, sentinel) {
		t.Errorf("%s: %v, want %v", what, err, sentinel)
	}
}

// count is the number of rows of a table.
func (f *fixture) count(table string) int {
	f.t.Helper()
	var n int
	if err := f.r.QueryRow("SELECT COUNT(*) FROM " + table).Scan(&n); err != nil {
		f.t.Fatal(err)
	}
	return n
}
