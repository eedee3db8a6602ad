package postgres

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	_ "modernc.org/sqlite" // the pure-Go driver "sqlite", to put local mode's rows in a source

	"plaita/store/sqlite"
)

// cheap keeps the copy tests' password hashing fast.
var cheap = sqlite.WithPasswordParams(sqlite.PasswordParams{MemoryKiB: 64, Time: 1, Threads: 1, SaltLen: 16, KeyLen: 32})

// seedConsole writes rows into every console table of db through its operations, and returns
// a session token and an API key to use on the copy.
func seedConsole(t *testing.T, db *sqlite.DB) (session, key string) {
	t.Helper()
	ctx := context.Background()
	check := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	_, err := db.CreateTenant(ctx, sqlite.NewTenant{Slug: "acme", Name: "Acme Corp"})
	check(err)
	_, err = db.SetTenantStatus(ctx, "acme", sqlite.TenantDisabled)
	check(err)
	_, err = db.SetTenantStatus(ctx, "acme", sqlite.TenantActive)
	check(err)
	ann, err := db.CreateUser(ctx, sqlite.NewUser{Login: "ann", Password: "correct horse"})
	check(err)
	_, err = db.SetPlatformAdmin(ctx, ann.ID, true)
	check(err)
	_, err = db.SetMembership(ctx, ann.ID, "acme", sqlite.RoleAdmin)
	check(err)
	session, _, err = db.CreateSession(ctx, ann.ID, time.Hour, sqlite.SessionMeta{IP: "10.0.0.1", UserAgent: "copy"})
	check(err)
	key, _, err = db.CreateAPIKey(ctx, sqlite.NewAPIKey{Tenant: "acme", Name: "ci", Role: sqlite.RoleEditor, CreatedBy: ann.ID})
	check(err)
	_, revoked, err := db.CreateAPIKey(ctx, sqlite.NewAPIKey{Tenant: "acme", Name: "old", Role: sqlite.RoleViewer})
	check(err)
	_, err = db.RevokeAPIKey(ctx, "acme", revoked.ID)
	check(err)
	for i := range 7 {
		e := sqlite.AuditEntry{Actor: "ann", ActorKind: sqlite.ActorUser, Tenant: "acme", Action: fmt.Sprint("flow.save.", i), Outcome: sqlite.OutcomeAllow,
			Details: json.RawMessage(`{"n":` + fmt.Sprint(i) + `}`)}
		if i%3 == 0 {
			e.Outcome, e.Action, e.Reason = sqlite.OutcomeDeny, "flow.publish.denied", "role"
		}
		_, err := db.AppendAudit(ctx, e)
		check(err)
	}
	_, err = db.SaveDraft(ctx, sqlite.DraftSave{Tenant: "acme", FlowID: "order", Definition: []byte(`{"id":"order","nodes":["ü"]}`), By: "ann"})
	check(err)
	for _, v := range []string{"1", "2"} {
		_, _, err = db.RecordVersion(ctx, sqlite.FlowVersion{Tenant: "acme", FlowID: "order", Version: v, Definition: json.RawMessage(`{"id":"order","version":"` + v + `"}`),
			Hash: "h" + v, HashAlgo: "fh2", PublishedBy: "ann"})
		check(err)
	}
	job, err := db.CreateBulkJob(ctx, sqlite.NewJob{Tenant: "acme", Kind: "executions.cancel", Filter: []byte(`{"status":"running"}`), DryRun: false, CreatedBy: "ann"},
		[]string{"ex_1", "ex_2", "ex_3"}, true)
	check(err)
	_, items, err := db.ClaimJobItems(ctx, "acme", job.ID, "console-a", 2, time.Minute)
	check(err)
	_, err = db.RecordJobItems(ctx, "acme", job.ID, "console-a", time.Minute, []sqlite.JobItemOutcome{
		{Seq: items[0].Seq, State: sqlite.ItemDone, Result: "cancel_requested"},
		{Seq: items[1].Seq, State: sqlite.ItemFailed, Code: "terminal", Error: "already completed"}})
	check(err)
	check(db.MarkServed(ctx, sqlite.ServedCluster, "redis://redis:6379/0"))
	check(db.CreateContractKey(ctx, sqlite.ContractKey{Tenant: "acme", ID: "ck_1", Sealed: "pk1.sealed", CreatedAt: time.UnixMilli(1_700_000_000_000), CreatedBy: "ann"}))
	_, _, err = db.ClaimLease(ctx, "tenant-status-reconcile", "console-a", time.Minute)
	check(err)
	_, err = db.RecordLoginFailure(ctx, "bob", "10.0.0.9", 5, time.Hour)
	check(err)
	return session, key
}

func openSQLite(t *testing.T, path string, opt ...sqlite.Option) *sqlite.DB {
	t.Helper()
	db, err := sqlite.Open(context.Background(), "sqlite:///"+path, append([]sqlite.Option{cheap}, opt...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func openPostgres(t *testing.T, url string) *sqlite.DB {
	t.Helper()
	db, err := Open(context.Background(), url, cheap)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// A SQLite console copied to PostgreSQL and back: every row of every console table, the
// checksums equal on every side; the copy is a working console (the session and the key made
// on SQLite authenticate, a new audit row follows the copied ids); a copy cut short goes on
// when run again.
func TestCopyRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src := openSQLite(t, filepath.Join(t.TempDir(), "laptop.db"))
	session, key := seedConsole(t, src)
	pg := openPostgres(t, newDatabase(t))

	// Cut short after the first batch of the audit: the run fails, the second goes on.
	cut, cancel := context.WithCancel(ctx)
	_, err := sqlite.Copy(cut, src, pg, sqlite.CopyOptions{Batch: 2, Progress: func(table string, copied, total int64) {
		if table == "audit" {
			cancel()
		}
	}})
	if err == nil {
		t.Fatal("a copy cut short succeeded")
	}
	var seen []string
	rep, err := sqlite.Copy(ctx, src, pg, sqlite.CopyOptions{Batch: 2, Progress: func(table string, copied, total int64) {
		if copied == total {
			seen = append(seen, table)
		}
	}})
	if err != nil || !rep.Verified {
		t.Fatalf("copy to PostgreSQL: %+v %v", rep, err)
	}
	if len(rep.Tables) != len(sqlite.ConsoleTables()) {
		t.Fatalf("%d tables copied, the console has %d", len(rep.Tables), len(sqlite.ConsoleTables()))
	}
	for _, tc := range rep.Tables {
		if tc.Rows == 0 && tc.Table != "console_leases" || tc.SourceChecksum != tc.TargetChecksum || tc.Rows != tc.TargetRows {
			t.Errorf("%s: %+v", tc.Table, tc)
		}
		if tc.Rows > 0 && !slices.Contains(seen, tc.Table) {
			t.Errorf("no progress said of %s", tc.Table)
		}
	}

	// And back to a new SQLite file, before anything touches the copy: the same checksums as
	// the original's.
	back := openSQLite(t, filepath.Join(t.TempDir(), "back.db"))
	rep2, err := sqlite.Copy(ctx, pg, back, sqlite.CopyOptions{})
	if err != nil || !rep2.Verified {
		t.Fatalf("copy back to SQLite: %+v %v", rep2, err)
	}
	for i, tc := range rep2.Tables {
		if tc.SourceChecksum != rep.Tables[i].SourceChecksum {
			t.Errorf("%s: the round trip's checksum %s, the original's %s", tc.Table, tc.SourceChecksum, rep.Tables[i].SourceChecksum)
		}
	}

	// The copy is the console: the session and the key authenticate.
	if _, u, err := pg.LookupSession(ctx, session); err != nil || u.Login != "ann" || !u.PlatformAdmin {
		t.Fatalf("the session on the copy: %+v %v", u, err)
	}
	if k, err := pg.AuthenticateAPIKey(ctx, key); err != nil || k.Tenant != "acme" {
		t.Fatalf("the key on the copy: %+v %v", k, err)
	}
	// A new audit row on the copy follows the copied ids.
	before, err := pg.ListAudit(ctx, sqlite.AuditQuery{Tenant: "acme", Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	next, err := pg.AppendAudit(ctx, sqlite.AuditEntry{Actor: "ann", ActorKind: sqlite.ActorUser, Tenant: "acme", Action: "after.copy", Outcome: sqlite.OutcomeAllow})
	if err != nil || next.ID <= before.Entries[0].ID {
		t.Fatalf("an audit row after the copy: %+v %v (the newest copied: %d)", next, err, before.Entries[0].ID)
	}
}

// A source holding local mode's executions is not copied without saying so; told to leave
// them, the copy says what it left.
func TestCopyRefusesToLeaveLocalStateSilently(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "local.db")
	src := openSQLite(t, path)
	seedConsole(t, src)
	raw, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, err := raw.Exec(`INSERT INTO local_executions (execution_id, tenant, flow_id, flow_version, status, state, generation, cancel_requested, started_at, updated_at)
		VALUES ('ex_local', 'acme', 'order', '1', 'running', '{}', 1, FALSE, 1000, 1000)`); err != nil {
		t.Fatal(err)
	}
	pg := openPostgres(t, newDatabase(t))
	if _, err := sqlite.Copy(ctx, src, pg, sqlite.CopyOptions{}); !errors.Is(err, sqlite.ErrLocalState) {
		t.Fatalf("a source with local executions: %v", err)
	}
	if n, err := pg.CountRows(ctx, "users"); err != nil || n != 0 {
		t.Fatalf("the refused copy wrote %d users: %v", n, err)
	}
	rep, err := sqlite.Copy(ctx, src, pg, sqlite.CopyOptions{LeaveLocal: true})
	if err != nil || !rep.Verified || rep.LeftBehind["local_executions"] != 1 {
		t.Fatalf("a copy that leaves local mode's rows: %+v %v", rep, err)
	}
}

// A target with rows the source lacks is not verified, and the report names the table.
func TestCopyNamesTablesThatDiffer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src := openSQLite(t, filepath.Join(t.TempDir(), "a.db"))
	seedConsole(t, src)
	pg := openPostgres(t, newDatabase(t))
	if _, err := pg.CreateTenant(ctx, sqlite.NewTenant{Slug: "only-here"}); err != nil {
		t.Fatal(err)
	}
	rep, err := sqlite.Copy(ctx, src, pg, sqlite.CopyOptions{})
	if !errors.Is(err, sqlite.ErrCopyUnverified) || rep.Verified {
		t.Fatalf("a target with a tenant of its own: %+v %v", rep, err)
	}
	for _, tc := range rep.Tables {
		if (tc.Table == "tenants") == tc.Verified {
			t.Errorf("%s verified %v", tc.Table, tc.Verified)
		}
	}
}
