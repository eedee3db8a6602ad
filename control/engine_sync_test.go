package control

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"plaita/store"
	"plaita/store/keys"
	"plaita/store/sqlite"
	"plaita/test/redistest"
)

// syncFixture is a control plane with a console database of its own.
type syncFixture struct {
	*fixture
	db  *sqlite.DB
	cat *Catalog
}

func newSyncFixture(t *testing.T, opts ...func(*Deps)) *syncFixture {
	t.Helper()
	f := newFixture(t, opts...)
	db, err := sqlite.Open(context.Background(), "sqlite:///"+filepath.Join(t.TempDir(), "console.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.CreateTenant(context.Background(), sqlite.NewTenant{Slug: "acme"}); err != nil {
		t.Fatal(err)
	}
	return &syncFixture{fixture: f, db: db, cat: NewCatalog(db, f.p)}
}

// flowDef is a valid flow id@version.
func flowDef(id, version string) []byte {
	return []byte(`{"id":"` + id + `","version":"` + version + `","start":"a","nodes":[{"id":"a","type":"end"}]}`)
}

// publish publishes through the catalog, as the console does (Redis and the record).
func (f *syncFixture) publish(tenant, id, version string) {
	f.t.Helper()
	pub, err := f.cat.Publish(context.Background(), PublishRequest{Tenant: tenant, Definition: flowDef(id, version), By: "ann"})
	if err != nil || pub.RecordErr != nil {
		f.t.Fatalf("publish %s@%s: %v %v", id, version, err, pub.RecordErr)
	}
}

// forget deletes a version from Redis, as a Redis restored from an older snapshot has lost it.
func (f *syncFixture) forget(tenant, id, version string) {
	f.t.Helper()
	sp := keys.MustFor(f.root, tenant)
	ctx := context.Background()
	for _, err := range []error{
		f.c.Do(ctx, f.c.B().Del().Key(sp.Flow(id, version)).Build()).Error(),
		f.c.Do(ctx, f.c.B().Zrem().Key(sp.FlowVersions(id)).Member(version).Build()).Error(),
	} {
		if err != nil {
			f.t.Fatal(err)
		}
	}
}

// TestEngineSyncWritesBackWhatRedisLost: versions the console recorded and Redis lost — one
// version of a flow, and a whole flow of another tenant, registry entries and all — are
// written back, byte for byte, with their publication times; the versions Redis has are left
// as they are; the latest version stays the latest.
func TestEngineSyncWritesBackWhatRedisLost(t *testing.T) {
	t.Parallel()
	f := newSyncFixture(t)
	ctx := context.Background()
	f.publish("default", "order", "1")
	f.publish("default", "order", "2")
	f.publish("acme", "pay", "1")
	f.forget("default", "order", "1")
	f.forget("acme", "pay", "1")
	sp := keys.MustFor(f.root, "acme")
	if err := f.c.Do(ctx, f.c.B().Del().Key(sp.FlowList()).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.p.PublishedFlow(ctx, "acme", "pay", ""); AsRefusal(err) == nil {
		t.Fatalf("the lost flow is still there: %v", err)
	}

	es := NewEngineSync(f.p, f.db, EngineSyncSettings{Batch: 2})
	r := es.Run(ctx)
	if r.Status != SyncReady || r.Versions != 3 || r.Written != 2 || r.Skipped != 1 || r.Errors != 0 || r.Batches != 2 || r.Truncated {
		t.Fatalf("report %+v", r)
	}
	if want := []string{"acme/pay@1", "default/order@1"}; !slices.Equal(r.WrittenSample, want) {
		t.Fatalf("written %v, want %v", r.WrittenSample, want)
	}
	if last := es.Last(); last == nil || last.Written != 2 {
		t.Fatalf("last %+v", last)
	}
	def, err := f.p.d.Flows.Get(ctx, "default", "order", "1")
	if err != nil || string(def) != string(flowDef("order", "1")) {
		t.Fatalf("order@1 back: %s %v", def, err)
	}
	if _, v, err := f.p.PublishedFlow(ctx, "default", "order", ""); err != nil || v != "2" {
		t.Fatalf("latest of order: %q %v", v, err)
	}
	if _, v, err := f.p.PublishedFlow(ctx, "acme", "pay", ""); err != nil || v != "1" {
		t.Fatalf("pay back: %q %v", v, err)
	}
	rec, err := f.db.FlowVersion(ctx, "acme", "pay", "1")
	if err != nil {
		t.Fatal(err)
	}
	if flows, err := f.p.Flows(ctx, "acme", 10); err != nil || len(flows) != 1 || !flows[0].PublishedAt.Equal(rec.PublishedAt.Truncate(time.Millisecond)) {
		t.Fatalf("acme's flow list: %+v %v (published %s)", flows, err, rec.PublishedAt)
	}

	// Again: nothing is missing now.
	if r := es.Run(ctx); r.Written != 0 || r.Skipped != 3 || r.Status != SyncReady {
		t.Fatalf("second run %+v", r)
	}
}

// TestEngineSyncBounds: more recorded versions than PLAITA_CONSOLE_ENGINE_SYNC_MAX_VERSIONS,
// or a deadline that passes, stop the sync and degrade it — it returns, with what it did.
// A record whose keys are reserved (the task queue's streams) is an error the sync goes past.
func TestEngineSyncBounds(t *testing.T) {
	t.Parallel()
	f := newSyncFixture(t)
	ctx := context.Background()
	for _, v := range []string{"1", "2", "3"} {
		f.publish("default", "order", v)
	}
	r := NewEngineSync(f.p, f.db, EngineSyncSettings{MaxVersions: 2, Batch: 1}).Run(ctx)
	if r.Status != SyncDegraded || !r.Truncated || r.TruncatedReason != TruncatedMaxVersions || r.Versions != 2 || r.Skipped != 2 {
		t.Fatalf("max versions: %+v", r)
	}
	r = NewEngineSync(f.p, f.db, EngineSyncSettings{Deadline: time.Nanosecond}).Run(ctx)
	if r.Status != SyncDegraded || r.TruncatedReason != TruncatedDeadline || r.Versions != 0 {
		t.Fatalf("deadline: %+v", r)
	}

	// A record the flow store refuses (here: its key is the task queue's dead-letter stream).
	dlq := strings.TrimPrefix(f.p.QueueName()+":dlq", f.root+":flow:")
	flowID, version, _ := strings.Cut(dlq, ":")
	if _, _, err := f.db.RecordVersion(ctx, sqlite.FlowVersion{Tenant: "default", FlowID: flowID, Version: version,
		Definition: json.RawMessage(flowDef(flowID, version)), Hash: "h", HashAlgo: "a"}); err != nil {
		t.Fatal(err)
	}
	r = NewEngineSync(f.p, f.db, EngineSyncSettings{}).Run(ctx)
	if r.Status != SyncDegraded || r.Errors != 1 || r.Skipped != 3 || r.Truncated || !strings.Contains(r.Error, "reserved") {
		t.Fatalf("reserved: %+v", r)
	}
}

// TestEngineSyncWithAHalfOpenRedis: a Redis that takes the connection and answers nothing
// (CLIENT PAUSE) fails the sync within its deadline: degraded, not a start that hangs. A
// Redis that is gone fails it at once.
func TestEngineSyncWithAHalfOpenRedis(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t)
	c := srv.Client(t)
	f := newSyncFixture(t, func(d *Deps) { d.Flows = store.NewFlows(store.RedisFlows(c), d.Root) })
	ctx := context.Background()
	f.publish("default", "order", "1")
	f.forget("default", "order", "1")
	// Paused for longer than the deadline: every command waits, the connection stays up.
	if err := c.Do(ctx, c.B().ClientPause().Timeout(2000).All().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	r := NewEngineSync(f.p, f.db, EngineSyncSettings{Deadline: 500 * time.Millisecond}).Run(ctx)
	if r.Status != SyncDegraded || r.TruncatedReason != TruncatedDeadline || r.Errors != 1 || r.Written != 0 {
		t.Fatalf("half-open: %+v", r)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("the sync took %s with a 500 ms deadline", took)
	}
	srv.Kill()
	r = NewEngineSync(f.p, f.db, EngineSyncSettings{Deadline: 3 * time.Second}).Run(ctx)
	if r.Status != SyncDegraded || r.Errors != 1 || r.Error == "" {
		t.Fatalf("Redis gone: %+v", r)
	}
}
