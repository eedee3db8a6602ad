// Package consoletest is the console store's contract: one suite of the console's operations
// (tenants, users and logins, memberships, sessions and keys, the audit and its coalescing,
// drafts and published versions, jobs and bulk jobs, how the database was served) that every
// database the console runs on passes — SQLite (store/sqlite) and PostgreSQL (store/postgres).
// A database's own tests call Run with an Opener; the suite uses nothing but the DB's methods.
package consoletest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"plaita/store/sqlite"
)

// Opener opens a fresh, migrated console database of the calling test's own with opt, and
// closes it (and drops it, on a server) when the test ends.
type Opener func(t testing.TB, opt ...sqlite.Option) *sqlite.DB

// CheapPasswords keeps the suite's hashing fast.
var CheapPasswords = sqlite.PasswordParams{MemoryKiB: 64, Time: 1, Threads: 1, SaltLen: 16, KeyLen: 32}

// Run runs the suite on the databases open makes, each case in parallel on its own database.
func Run(t *testing.T, open Opener) {
	cases := []struct {
		name string
		fn   func(*testing.T, Opener)
	}{
		{"Tenants", testTenants},
		{"ListTenantsPages", testListTenantsPages},
		{"Users", testUsers},
		{"VerifyPassword", testVerifyPassword},
		{"ConcurrentFailedLoginsAreAllCounted", testConcurrentFailedLoginsAreAllCounted},
		{"EnsureBootstrapAdmin", testEnsureBootstrapAdmin},
		{"AuditCoalescesDenials", testAuditCoalescesDenials},
		{"AuditEntries", testAuditEntries},
		{"ListAudit", testListAudit},
		{"ConcurrentAuditAppends", testConcurrentAuditAppends},
		{"AuditFilters", testAuditFilters},
		{"Jobs", testJobs},
		{"Drafts", testDrafts},
		{"FlowVersions", testFlowVersions},
		{"BulkJobClaimAndRecord", testBulkJobClaimAndRecord},
		{"BulkJobCancelReleaseAndEmpty", testBulkJobCancelReleaseAndEmpty},
		{"MarkServed", testMarkServed},
		{"Memberships", testMemberships},
		{"Sessions", testSessions},
		{"APIKeys", testAPIKeys},
		{"ContractKeys", testContractKeys},
		{"Leases", testLeases},
		{"LoginFailures", testLoginFailures},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.fn(t, open) })
	}
}

// clock is a test clock: it moves only when told.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

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

// fixture is one case's database with its clock.
type fixture struct {
	*sqlite.DB
	t     testing.TB
	clock *clock
}

// setup opens a database with a test clock and cheap hashes (opt after them).
func setup(t testing.TB, open Opener, opt ...sqlite.Option) *fixture {
	t.Helper()
	c := &clock{t: time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)}
	db := open(t, append([]sqlite.Option{sqlite.WithClock(c.Now), sqlite.WithPasswordParams(CheapPasswords)}, opt...)...)
	return &fixture{DB: db, t: t, clock: c}
}

// count is the number of rows of a table.
func (f *fixture) count(table string) int {
	f.t.Helper()
	n, err := f.CountRows(context.Background(), table)
	if err != nil {
		f.t.Fatal(err)
	}
	return int(n)
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
