package store_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"plaita/model"
	"plaita/store"
	"plaita/store/keys"
	"plaita/test/redistest"
)

// platform is the fixture's platform key space (tenant status, quota, running slots).
func (f *fixture) platform(tenant string) keys.Space {
	f.t.Helper()
	sp, err := keys.For(f.root, tenant)
	if err != nil {
		f.t.Fatal(err)
	}
	return sp
}

func (f *fixture) must(err error) {
	f.t.Helper()
	if err != nil {
		f.t.Fatal(err)
	}
}

func TestReadTenantStatus(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	c := ctx(t)
	sp := f.platform("")
	read := func(tenant string, withEpoch bool) store.TenantStatusRead {
		t.Helper()
		r, err := f.r.ReadTenantStatus(c, tenant, withEpoch)
		if err != nil {
			t.Fatalf("ReadTenantStatus(%q, %v): %v", tenant, withEpoch, err)
		}
		return r
	}
	// Nothing published: no entry, no epoch.
	if r := read("acme", true); r != (store.TenantStatusRead{}) {
		t.Errorf("empty: %+v", r)
	}
	f.must(f.do(f.c.B().Hset().Key(sp.TenantStatus()).FieldValue().
		FieldValue("acme", " Disabled ").FieldValue("default", "active").Build()).Error())
	// Raw values; the default tenant's field is "default" whether asked as "" or "default".
	if r := read("acme", false); r != (store.TenantStatusRead{Status: " Disabled ", Found: true}) {
		t.Errorf("acme: %+v", r)
	}
	for _, tenant := range []string{"", "default"} {
		if r := read(tenant, true); r != (store.TenantStatusRead{Status: "active", Found: true}) {
			t.Errorf("%q: %+v", tenant, r)
		}
	}
	f.must(f.do(f.c.B().Set().Key(sp.TenantStatusEpoch()).Value("7").Build()).Error())
	if r := read("beta", true); r != (store.TenantStatusRead{Epoch: "7", EpochFound: true}) {
		t.Errorf("beta with epoch: %+v", r)
	}
	// Without withEpoch the epoch is not read (the gate is off).
	if r := read("acme", false); r.EpochFound || r.Epoch != "" {
		t.Errorf("epoch read although not asked: %+v", r)
	}
	if _, err := f.r.ReadTenantStatus(c, "Bad Tenant", true); !errors.Is(err, keys.ErrBadTenant) {
		t.Errorf("bad slug: %v", err)
	}
}

// The tenant-status rule, the one the worker, the filter and the schedule role decide with.
func TestTenantStatusReadAdmits(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, tenant string
		read         store.TenantStatusRead
		ok, unknown  bool
		why          string
	}{
		{"no entry", "acme", store.TenantStatusRead{}, true, false, `tenant "acme" has no status entry: active (fail-open)`},
		{"no entry, default", "", store.TenantStatusRead{}, true, false, `tenant "default" has no status entry: active (fail-open)`},
		{"active", "acme", store.TenantStatusRead{Status: "active", Found: true}, true, false, `tenant "acme" is active`},
		{"active, spaces and case", "acme", store.TenantStatusRead{Status: " Active ", Found: true}, true, false, `tenant "acme" is active`},
		{"disabled", "acme", store.TenantStatusRead{Status: "disabled", Found: true}, false, false, `tenant "acme" is disabled`},
		{"disabled, spaces and case", "acme", store.TenantStatusRead{Status: " DISABLED", Found: true}, false, false, `tenant "acme" is disabled`},
		{"disabled default", "default", store.TenantStatusRead{Status: "disabled", Found: true}, false, false, `tenant "default" is disabled`},
		{"disabled default as empty", "", store.TenantStatusRead{Status: "disabled", Found: true}, false, false, `tenant "default" is disabled`},
		{"unknown value", "acme", store.TenantStatusRead{Status: "paused", Found: true}, false, true,
			`tenant "acme" has status "paused" (neither active nor disabled): refused`},
		{"empty value", "acme", store.TenantStatusRead{Status: "", Found: true}, false, true,
			`tenant "acme" has status "" (neither active nor disabled): refused`},
		{"unknown value, default: fail-open", "", store.TenantStatusRead{Status: "paused", Found: true}, true, true,
			`default tenant has unknown status "paused": fail-open`},
		{"the epoch does not decide", "acme", store.TenantStatusRead{Status: "active", Found: true, Epoch: "9", EpochFound: true}, true, false,
			`tenant "acme" is active`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ok, why := tc.read.Admits(tc.tenant)
			if ok != tc.ok || why != tc.why {
				t.Errorf("Admits(%q) = %v, %q; want %v, %q", tc.tenant, ok, why, tc.ok, tc.why)
			}
			if u := tc.read.Unknown(); u != tc.unknown {
				t.Errorf("Unknown() = %v, want %v", u, tc.unknown)
			}
		})
	}
}

func TestTenantAdmitsReadsAndDecides(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	c := ctx(t)
	sp := f.platform("")
	f.must(f.do(f.c.B().Hset().Key(sp.TenantStatus()).FieldValue().FieldValue("acme", "disabled").FieldValue("default", "odd").Build()).Error())
	for _, tc := range []struct {
		tenant string
		ok     bool
	}{{"acme", false}, {"beta", true}, {"", true}} {
		ok, why, err := f.r.TenantAdmits(c, tc.tenant)
		if err != nil || ok != tc.ok || why == "" {
			t.Errorf("TenantAdmits(%q) = %v, %q, %v; want %v", tc.tenant, ok, why, err, tc.ok)
		}
	}
	if _, _, err := f.r.TenantAdmits(c, "Bad Tenant"); !errors.Is(err, keys.ErrBadTenant) {
		t.Errorf("bad slug: %v", err)
	}
}

func TestTenantQuotaOverride(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	c := ctx(t)
	raw, found, err := f.r.TenantQuotaOverride(c, "acme")
	if err != nil || found || raw != "" {
		t.Fatalf("no override: %q %v %v", raw, found, err)
	}
	f.must(f.do(f.c.B().Hset().Key(f.platform("").TenantQuota()).FieldValue().
		FieldValue("acme", " 3 ").FieldValue("default", "lots").Build()).Error())
	if raw, found, err := f.r.TenantQuotaOverride(c, "acme"); err != nil || !found || raw != " 3 " {
		t.Errorf("acme: %q %v %v (the raw value, parsing is the caller's)", raw, found, err)
	}
	if raw, found, err := f.r.TenantQuotaOverride(c, ""); err != nil || !found || raw != "lots" {
		t.Errorf("default: %q %v %v", raw, found, err)
	}
	if _, _, err := f.r.TenantQuotaOverride(c, "flow"); !errors.Is(err, keys.ErrBadTenant) {
		t.Errorf("reserved slug: %v", err)
	}
}

func TestAdmitRunningLimitForceAndRefresh(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	c := ctx(t)
	t0 := time.Date(2026, 10, 1, 12, 0, 0, 0, time.UTC)
	admit := func(id string, at time.Time, limit int, force bool) store.RunningAdmission {
		t.Helper()
		a, err := f.r.AdmitRunning(c, store.RunningAdmit{Tenant: "acme", ExecutionID: id, Now: at, TTL: time.Minute, Limit: limit, Force: force})
		if err != nil {
			t.Fatalf("admit %s: %v", id, err)
		}
		return a
	}
	want := func(got, w store.RunningAdmission) {
		t.Helper()
		if got != w {
			t.Errorf("admission %+v, want %+v", got, w)
		}
	}
	want(admit("ex_1", t0, 2, false), store.RunningAdmission{Admitted: true, Running: 1})
	want(admit("ex_2", t0, 2, false), store.RunningAdmission{Admitted: true, Running: 2})
	want(admit("ex_3", t0, 2, false), store.RunningAdmission{Running: 2})                 // full
	want(admit("ex_1", t0, 2, false), store.RunningAdmission{Admitted: true, Running: 2}) // its own slot
	want(admit("ex_3", t0, 2, true), store.RunningAdmission{Admitted: true, Running: 3, Over: true})
	want(admit("ex_4", t0, 0, false), store.RunningAdmission{Admitted: true, Running: 4}) // unlimited, still recorded

	key := f.platform("acme").TenantRunning()
	score := func(id string) int64 {
		t.Helper()
		s, err := f.do(f.c.B().Zscore().Key(key).Member(id).Build()).AsFloat64()
		if err != nil {
			t.Fatalf("score of %s: %v", id, err)
		}
		return int64(s)
	}
	// Re-admission refreshes the expiry.
	t1 := t0.Add(30 * time.Second)
	admit("ex_2", t1, 0, false)
	if got, w := score("ex_2"), t1.Add(time.Minute).UnixMilli(); got != w {
		t.Errorf("refreshed expiry %d, want %d", got, w)
	}
	if ttl := f.ttl(key); ttl <= 0 || ttl > time.Minute {
		t.Errorf("slot key TTL %s", ttl)
	}

	// Counting sees only unexpired slots; the next admission prunes the expired ones.
	n, err := f.r.CountRunning(c, "acme", t0.Add(61*time.Second))
	if err != nil || n != 1 {
		t.Errorf("count past the first expiry: %d %v (ex_2 only)", n, err)
	}
	want(admit("ex_5", t0.Add(61*time.Second), 2, false), store.RunningAdmission{Admitted: true, Running: 2})
	members, err := f.do(f.c.B().Zrange().Key(key).Min("0").Max("-1").Build()).AsStrSlice()
	slices.Sort(members)
	if err != nil || !slices.Equal(members, []string{"ex_2", "ex_5"}) {
		t.Errorf("members after pruning: %v %v", members, err)
	}

	// Release is idempotent; other tenants have their own slots.
	for _, id := range []string{"ex_2", "ex_2", "never"} {
		f.must(f.r.ReleaseRunning(c, "acme", id))
	}
	if n, err := f.r.CountRunning(c, "acme", t0.Add(61*time.Second)); err != nil || n != 1 {
		t.Errorf("after release: %d %v", n, err)
	}
	if n, err := f.r.CountRunning(c, "beta", t0); err != nil || n != 0 {
		t.Errorf("beta: %d %v", n, err)
	}
}

func TestAdmitRunningRefusesBadRequests(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	c := ctx(t)
	now := time.Now()
	for name, req := range map[string]store.RunningAdmit{
		"no id":  {Tenant: "acme", Now: now, TTL: time.Minute, Limit: 1},
		"no TTL": {Tenant: "acme", ExecutionID: "ex_1", Now: now, Limit: 1},
	} {
		if _, err := f.r.AdmitRunning(c, req); !errors.Is(err, store.ErrInvalid) || model.IsTransient(err) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	if _, err := f.r.AdmitRunning(c, store.RunningAdmit{Tenant: "A B", ExecutionID: "ex_1", Now: now, TTL: time.Minute}); !errors.Is(err, keys.ErrBadTenant) {
		t.Errorf("bad slug: %v", err)
	}
	if err := f.r.ReleaseRunning(c, "A B", "ex_1"); !errors.Is(err, keys.ErrBadTenant) {
		t.Errorf("release, bad slug: %v", err)
	}
	if written := f.scan(); len(written) != 0 {
		t.Errorf("refused requests wrote %v", written)
	}
}

// A Redis that is gone: every tenant call is ErrRedis, transient.
func TestTenantCallsWithRedisDownAreTransient(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t)
	f := setupOn(t, srv.Client(t), "plaita", nil)
	srv.Kill()
	short := func() context.Context {
		c, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
		t.Cleanup(cancel)
		return c
	}
	transient := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, store.ErrRedis) || !model.IsTransient(err) {
			t.Errorf("%s with Redis down: %v, want ErrRedis (transient)", what, err)
		}
	}
	_, err := f.r.ReadTenantStatus(short(), "acme", true)
	transient("status", err)
	_, _, err = f.r.TenantQuotaOverride(short(), "acme")
	transient("quota override", err)
	_, err = f.r.AdmitRunning(short(), store.RunningAdmit{Tenant: "acme", ExecutionID: "ex_1", Now: time.Now(), TTL: time.Minute, Limit: 1})
	transient("admit", err)
	transient("release", f.r.ReleaseRunning(short(), "acme", "ex_1"))
	_, err = f.r.CountRunning(short(), "acme", time.Now())
	transient("count", err)
	acme, err := f.r.Tenant("acme")
	f.must(err)
	transient("subscription", acme.PutSubscription(short(), store.Subscription{ExecutionID: "ex_1", EventType: "t", Since: time.Now()}, time.Hour))
	transient("approval", acme.PutApproval(short(), store.Approval{ExecutionID: "ex_1", Since: time.Now()}, time.Hour))
}

// The admit script declares its one key and the status read and the wake-up pipelines span
// slots without CROSSSLOT, on a 3-node cluster.
func TestTenantAndWakeupCallsOnCluster(t *testing.T) {
	t.Parallel()
	cl, _ := redistest.StartCluster(t, 3)
	f := setupOn(t, cl, "plaita", nil)
	waitClusterOK(t, cl)
	c := ctx(t)
	now := time.Now()
	for i := range 12 { // tenants whose running ZSETs land on every node
		tenant := fmt.Sprintf("t%02d", i)
		a, err := f.r.AdmitRunning(c, store.RunningAdmit{Tenant: tenant, ExecutionID: "ex_1", Now: now, TTL: time.Minute, Limit: 1})
		if err != nil || !a.Admitted {
			t.Fatalf("admit on %s: %+v %v", tenant, a, err)
		}
		if a, err := f.r.AdmitRunning(c, store.RunningAdmit{Tenant: tenant, ExecutionID: "ex_2", Now: now, TTL: time.Minute, Limit: 1}); err != nil || a.Admitted {
			t.Fatalf("second admit on %s: %+v %v", tenant, a, err)
		}
		f.must(f.r.ReleaseRunning(c, tenant, "ex_1"))
		if _, err := f.r.ReadTenantStatus(c, tenant, true); err != nil {
			t.Fatalf("status of %s: %v", tenant, err)
		}
		ts, err := f.r.Tenant(tenant)
		f.must(err)
		due := now.Add(time.Hour)
		f.must(ts.PutSubscription(c, store.Subscription{ExecutionID: "ex_1", EventType: "order.paid", Since: now, ExpiresAt: due}, time.Hour))
		f.must(ts.PutApproval(c, store.Approval{ExecutionID: "ex_1", Since: now, Due: due}, time.Hour))
		f.must(ts.RemoveSubscription(c, "ex_1", "order.paid"))
		f.must(ts.RemoveApproval(c, "ex_1"))
	}
}

func TestPublishAndSyncTenantStatuses(t *testing.T) {
	t.Parallel()
	f := setup(t, nil)
	c := ctx(t)
	sp := f.platform("")
	all := func() map[string]string {
		t.Helper()
		m, err := f.c.Do(c, f.c.B().Hgetall().Key(sp.TenantStatus()).Build()).AsStrMap()
		f.must(err)
		return m
	}
	epoch := func() string {
		t.Helper()
		v, err := f.c.Do(c, f.c.B().Get().Key(sp.TenantStatusEpoch()).Build()).ToString()
		f.must(err)
		return v
	}
	f.must(f.r.PublishTenantStatus(c, "acme", store.TenantDisabled, "7"))
	if got := all(); len(got) != 1 || got["acme"] != "disabled" || epoch() != "7" {
		t.Fatalf("after publish: %v epoch %q", got, epoch())
	}
	// The worker's rule reads what was written.
	if ok, _, err := f.r.TenantAdmits(c, "acme"); err != nil || ok {
		t.Fatalf("a disabled tenant is admitted: %v %v", ok, err)
	}
	for _, bad := range []struct{ tenant, status, epoch string }{
		{"acme", "paused", "7"}, {"acme", "active", " "}, {"Bad!", "active", "7"},
	} {
		if err := f.r.PublishTenantStatus(c, bad.tenant, bad.status, bad.epoch); err == nil {
			t.Errorf("PublishTenantStatus(%q, %q, %q) accepted", bad.tenant, bad.status, bad.epoch)
		}
	}
	// A restore brought back a deleted tenant's "active": the sync tombstones it, publishes
	// what the authority has, and leaves the default tenant alone.
	f.must(f.do(f.c.B().Hset().Key(sp.TenantStatus()).FieldValue().FieldValue("gone", "active").FieldValue("default", "active").Build()).Error())
	res, err := f.r.SyncTenantStatuses(c, map[string]string{"acme": "active", "beta": "disabled"}, "8")
	f.must(err)
	if !slices.Equal(res.Published, []string{"acme", "beta"}) || !slices.Equal(res.Tombstoned, []string{"gone"}) {
		t.Fatalf("sync: %+v", res)
	}
	want := map[string]string{"acme": "active", "beta": "disabled", "gone": "disabled", "default": "active"}
	if got := all(); fmt.Sprint(got) != fmt.Sprint(want) || epoch() != "8" {
		t.Fatalf("after sync: %v epoch %q; want %v epoch 8", got, epoch(), want)
	}
	// An empty authority writes the epoch alone.
	if res, err := f.r.SyncTenantStatuses(c, nil, "9"); err != nil || len(res.Published) != 0 || epoch() != "9" {
		t.Fatalf("empty sync: %+v %v epoch %q", res, err, epoch())
	}
}

// The running-limit rule the worker and the console share: an override wins when present,
// and one that is 0, negative or not an integer makes the tenant unlimited, never the default.
func TestResolveQuotaLimit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		raw     string
		found   bool
		def     int
		want    int
		ignored string
	}{
		{"", false, 0, 0, ""}, {"", false, 5, 5, ""}, {"", false, -3, 0, ""},
		{"3", true, 5, 3, ""}, {" 3 ", true, 0, 3, ""},
		{"0", true, 5, 0, "0 or negative"}, {"-1", true, 5, 0, "0 or negative"}, {"lots", true, 5, 0, "not an integer"}, {"2.5", true, 5, 0, "not an integer"},
	} {
		l := store.ResolveQuotaLimit(tc.raw, tc.found, tc.def)
		if l.Limit != tc.want || l.Ignored != tc.ignored || l.Override != tc.found || (tc.found && l.Raw != tc.raw) {
			t.Errorf("ResolveQuotaLimit(%q, %v, %d) = %+v, want limit %d ignored %q", tc.raw, tc.found, tc.def, l, tc.want, tc.ignored)
		}
	}
}
