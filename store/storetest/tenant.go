package storetest

import (
	"slices"
	"testing"
	"time"

	"plaita/store"
)

// TenantBackend is one TenantDriver under the contract.
type TenantBackend struct {
	Name string
	// Open makes a new, empty storage for one case (cases run in parallel).
	Open func(t *testing.T) *store.Redis
}

// TenantContract runs the tenant gates' cases against b: what the worker's gates and the
// console's start check rely on — a status written is the status read with its epoch, a sync
// tombstones what the authority no longer has, and running slots are taken up to a limit,
// refreshed by their own execution, forced over it, expire and are released.
func TenantContract(t *testing.T, b TenantBackend) {
	runCases(t, b.Name, func(t *testing.T) *store.Redis { return b.Open(t) }, []namedCase[*store.Redis]{
		{"StatusesPublishedAndSynced", statusesPublishedAndSynced},
		{"RunningSlots", runningSlots},
	})
}

func statusesPublishedAndSynced(t *testing.T, r *store.Redis) {
	c := eventsCtx(t)
	if read, err := r.ReadTenantStatus(c, "acme", true); err != nil || read.Found || read.EpochFound {
		t.Fatalf("before any publish: %+v %v", read, err)
	}
	must(t, r.PublishTenantStatus(c, "acme", store.TenantDisabled, "7"))
	read, err := r.ReadTenantStatus(c, "acme", true)
	if err != nil || !read.Found || read.Status != store.TenantDisabled || read.Epoch != "7" {
		t.Fatalf("after publish: %+v %v", read, err)
	}
	if ok, _, err := r.TenantAdmits(c, "acme"); err != nil || ok {
		t.Fatalf("a disabled tenant is admitted: %v %v", ok, err)
	}
	for _, bad := range []struct{ tenant, status, epoch string }{
		{"acme", "paused", "7"}, {"acme", "active", " "}, {"Bad!", "active", "7"},
	} {
		if err := r.PublishTenantStatus(c, bad.tenant, bad.status, bad.epoch); err == nil {
			t.Errorf("PublishTenantStatus(%q, %q, %q) accepted", bad.tenant, bad.status, bad.epoch)
		}
	}
	must(t, r.PublishTenantStatus(c, "gone", store.TenantActive, "7"))
	must(t, r.PublishTenantStatus(c, "", store.TenantActive, "7"))
	res, err := r.SyncTenantStatuses(c, map[string]string{"acme": "active", "beta": "disabled"}, "8")
	must(t, err)
	if !slices.Equal(res.Published, []string{"acme", "beta"}) || !slices.Equal(res.Tombstoned, []string{"gone"}) {
		t.Fatalf("sync: %+v", res)
	}
	for tenant, want := range map[string]string{"acme": "active", "beta": "disabled", "gone": "disabled", "default": "active"} {
		if read, err := r.ReadTenantStatus(c, tenant, true); err != nil || read.Status != want || read.Epoch != "8" {
			t.Fatalf("%s after the sync: %+v %v, want %s at epoch 8", tenant, read, err, want)
		}
	}
	// An authority without tenants tombstones every entry but the default tenant's.
	if res, err := r.SyncTenantStatuses(c, nil, "9"); err != nil || len(res.Published) != 0 || !slices.Equal(res.Tombstoned, []string{"acme", "beta", "gone"}) {
		t.Fatalf("empty sync: %+v %v", res, err)
	}
	if read, err := r.ReadTenantStatus(c, "acme", true); err != nil || read.Epoch != "9" || read.Status != store.TenantDisabled {
		t.Fatalf("after the empty sync: %+v %v", read, err)
	}
	if raw, found, err := r.TenantQuotaOverride(c, "acme"); err != nil || found || raw != "" {
		t.Fatalf("quota override never written: %q %v %v", raw, found, err)
	}
}

func runningSlots(t *testing.T, r *store.Redis) {
	c := eventsCtx(t)
	t0 := time.Now().UTC().Truncate(time.Millisecond)
	admit := func(id string, at time.Time, limit int, force bool) store.RunningAdmission {
		t.Helper()
		a, err := r.AdmitRunning(c, store.RunningAdmit{Tenant: "acme", ExecutionID: id, Now: at, TTL: time.Minute, Limit: limit, Force: force})
		must(t, err)
		return a
	}
	want := func(got, w store.RunningAdmission) {
		t.Helper()
		if got != w {
			t.Fatalf("admission %+v, want %+v", got, w)
		}
	}
	want(admit("ex_1", t0, 2, false), store.RunningAdmission{Admitted: true, Running: 1})
	want(admit("ex_2", t0, 2, false), store.RunningAdmission{Admitted: true, Running: 2})
	want(admit("ex_3", t0, 2, false), store.RunningAdmission{Running: 2})
	want(admit("ex_1", t0, 2, false), store.RunningAdmission{Admitted: true, Running: 2})
	want(admit("ex_3", t0, 2, true), store.RunningAdmission{Admitted: true, Running: 3, Over: true})
	want(admit("ex_4", t0, 0, false), store.RunningAdmission{Admitted: true, Running: 4})
	// ex_2's slot is refreshed 30 s later: it outlives the others.
	admit("ex_2", t0.Add(30*time.Second), 0, false)
	if n, err := r.CountRunning(c, "acme", t0.Add(61*time.Second)); err != nil || n != 1 {
		t.Fatalf("count past the first expiry: %d %v (ex_2 only)", n, err)
	}
	want(admit("ex_5", t0.Add(61*time.Second), 2, false), store.RunningAdmission{Admitted: true, Running: 2})
	for _, id := range []string{"ex_2", "ex_2", "never"} {
		must(t, r.ReleaseRunning(c, "acme", id))
	}
	if n, err := r.CountRunning(c, "acme", t0.Add(61*time.Second)); err != nil || n != 1 {
		t.Fatalf("after release: %d %v", n, err)
	}
	if n, err := r.CountRunning(c, "beta", t0); err != nil || n != 0 {
		t.Fatalf("beta: %d %v", n, err)
	}
	if _, err := r.AdmitRunning(c, store.RunningAdmit{Tenant: "acme", Now: t0, TTL: time.Minute}); err == nil {
		t.Fatal("an admission without execution id was accepted")
	}
}
