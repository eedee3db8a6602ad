package worker

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/redis/rueidis"
	"github.com/rs/zerolog"

	"plaita/config"
	"plaita/queue"
	"plaita/roles/settings"
	"plaita/store"
	"plaita/store/keys"
	"plaita/test/redistest"
)

// gatesCfg loads a non-strict worker configuration from env, for the settings builders: a
// gate reads its settings once, so a test that needs other values builds a second gate.
func gatesCfg(t *testing.T, env map[string]string) *config.Config {
	t.Helper()
	cfg, err := config.Load(config.RoleWorker, false, config.WithEnv(env))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func gatesCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func gatesDo(t *testing.T, c rueidis.Client, cmd rueidis.Completed) {
	t.Helper()
	if err := c.Do(gatesCtx(t), cmd).Error(); err != nil {
		t.Fatal(err)
	}
}

func TestEpochCompare(t *testing.T) {
	cases := []struct {
		a, b string
		cmp  int
		ok   bool
	}{
		{"legacy", "legacy", 0, true},
		{" 5 ", "5", 0, true},
		{"legacy", "1", -1, true},
		{"2026-10-01", "legacy", 1, true},
		{"v1", "legacy", 1, true},
		{"10", "9", 1, true},
		{"9", "10", -1, true},
		{"123456789012345678901234567890", "123456789012345678901234567891", -1, true},
		{"2026-10-01T12:00:00Z", "2026-10-01T14:00:00+02:00", 0, true},
		{"2026-10-02", "2026-10-01T23:59:59Z", 1, true},
		{"2026-10-01T00:00:00.5Z", "2026-10-01T00:00:00Z", 1, true},
		{"v10", "v9", 0, false},
		{"10", "2026-10-01", 0, false},
		{"2026-10-01", "abc", 0, false},
	}
	for _, c := range cases {
		cmp, ok := CompareEpochs(c.a, c.b)
		if cmp != c.cmp || ok != c.ok {
			t.Errorf("CompareEpochs(%q, %q) = %d, %v; want %d, %v", c.a, c.b, cmp, ok, c.cmp, c.ok)
		}
	}
}

type tenantStatusFixture struct {
	c    rueidis.Client
	st   *store.Redis
	root string
	sp   keys.Space
	set  *metrics.Set
	logs *strings.Builder
}

func newTenantStatusFixture(t *testing.T) *tenantStatusFixture {
	c := redistest.Client(t)
	root := redistest.Root(t, c)
	return &tenantStatusFixture{c: c, st: store.NewRedis(c, store.DefaultSettings(), root), root: root, sp: keys.MustFor(root, ""),
		set: metrics.NewSet(), logs: &strings.Builder{}}
}

// gate builds the gate with the settings of env (through the settings builder).
func (f *tenantStatusFixture) gate(t *testing.T, env map[string]string) *TenantStatus {
	t.Helper()
	return f.gateWith(t, settings.WorkerTenantStatus(gatesCfg(t, env)))
}

func (f *tenantStatusFixture) gateWith(t *testing.T, s settings.TenantStatus) *TenantStatus {
	t.Helper()
	g, err := NewTenantStatusGate(f.st, s, f.set, zerolog.New(f.logs))
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func (f *tenantStatusFixture) status(t *testing.T, tenant, v string) {
	gatesDo(t, f.c, f.c.B().Hset().Key(f.sp.TenantStatus()).FieldValue().FieldValue(tenant, v).Build())
}

func (f *tenantStatusFixture) epoch(t *testing.T, v string) {
	if v == "" {
		gatesDo(t, f.c, f.c.B().Del().Key(f.sp.TenantStatusEpoch()).Build())
		return
	}
	gatesDo(t, f.c, f.c.B().Set().Key(f.sp.TenantStatusEpoch()).Value(v).Build())
}

func tenantWant(t *testing.T, g *TenantStatus, tenant string, want Verdict, rule string) Decision {
	t.Helper()
	d, err := g.Check(gatesCtx(t), tenant)
	if err != nil {
		t.Fatalf("Check(%q): %v", tenant, err)
	}
	if d.Verdict != want || d.Rule != rule || d.Reason == "" {
		t.Fatalf("Check(%q) = %v; want %v by %s", tenant, d, want, rule)
	}
	return d
}

func TestTenantStatusFailOpenAndDisabled(t *testing.T) {
	f := newTenantStatusFixture(t)
	g := f.gate(t, nil) // legacy epoch, auto: the epoch gate is off
	// No entry at all: active (#237), for the default tenant and any other.
	d := tenantWant(t, g, "", VerdictRun, RuleTenantStatus)
	if !strings.Contains(d.Reason, "fail-open") {
		t.Errorf("reason %q", d.Reason)
	}
	tenantWant(t, g, "default", VerdictRun, RuleTenantStatus)
	tenantWant(t, g, "acme", VerdictRun, RuleTenantStatus)

	f.status(t, "acme", "disabled")
	d = tenantWant(t, g, "acme", VerdictRefuse, RuleTenantStatus)
	if !strings.Contains(d.Reason, "disabled") || !strings.Contains(d.Reason, f.sp.TenantStatus()) {
		t.Errorf("reason %q", d.Reason)
	}
	f.status(t, "acme", " Active ")
	tenantWant(t, g, "acme", VerdictRun, RuleTenantStatus)
	f.status(t, "default", "disabled")
	tenantWant(t, g, "", VerdictRefuse, RuleTenantStatus)

	// An unknown value: refused for a tenant, fail-open (with one WARNING) for the default.
	f.status(t, "acme", "paused")
	f.status(t, "default", "paused")
	tenantWant(t, g, "acme", VerdictRefuse, RuleTenantStatus)
	tenantWant(t, g, "default", VerdictRun, RuleTenantStatus)
	tenantWant(t, g, "default", VerdictRun, RuleTenantStatus)
	if n := strings.Count(f.logs.String(), "worker.tenant_status_unknown"); n != 1 {
		t.Errorf("unknown status warned %d times:\n%s", n, f.logs)
	}
	if got := f.set.GetOrCreateCounter(`plaita_tenant_status_refused_total`).Get(); got != 3 {
		t.Errorf("refused counter %d", got)
	}
	if _, err := g.Check(gatesCtx(t), "Bad Tenant"); err == nil {
		t.Error("an invalid tenant slug must be an error")
	}
}

func TestTenantStatusEpochGate(t *testing.T) {
	f := newTenantStatusFixture(t)
	g := f.gate(t, map[string]string{"PLAITA_DEPLOYMENT_EPOCH": "5"}) // auto: on, we have an epoch
	f.status(t, "acme", "active")
	stale := func() uint64 { return f.set.GetOrCreateCounter(`plaita_tenant_status_stale_epoch_total`).Get() }

	// Redis epoch missing: the snapshot is not proven current; acme held, default fail-open.
	d := tenantWant(t, g, "acme", VerdictHold, RuleTenantEpoch)
	if !strings.Contains(d.Reason, "missing") || !strings.Contains(d.Reason, "PLAITA_TENANT_STATUS_EPOCH_STRICT") {
		t.Errorf("reason %q", d.Reason)
	}
	tenantWant(t, g, "default", VerdictRun, RuleTenantStatus)
	tenantWant(t, g, "newcomer", VerdictHold, RuleTenantEpoch) // no entry either: still held
	if stale() != 2 {
		t.Errorf("stale counter %d", stale())
	}

	// Redis epoch older (a Redis-only restore): same.
	f.epoch(t, "4")
	d = tenantWant(t, g, "acme", VerdictHold, RuleTenantEpoch)
	if !strings.Contains(d.Reason, "older") {
		t.Errorf("reason %q", d.Reason)
	}
	tenantWant(t, g, "", VerdictRun, RuleTenantStatus)
	f.epoch(t, "legacy")
	tenantWant(t, g, "acme", VerdictHold, RuleTenantEpoch)
	f.epoch(t, "v2") // not comparable with "5": not proven current
	tenantWant(t, g, "acme", VerdictHold, RuleTenantEpoch)
	tenantWant(t, g, "", VerdictRun, RuleTenantStatus)

	// Same epoch: the status decides.
	f.epoch(t, "5")
	tenantWant(t, g, "acme", VerdictRun, RuleTenantStatus)
	f.status(t, "acme", "disabled")
	tenantWant(t, g, "acme", VerdictRefuse, RuleTenantStatus)
	tenantWant(t, g, "newcomer", VerdictRun, RuleTenantStatus)

	// Redis newer: this worker is stale and decides nothing, for any tenant.
	before := stale()
	f.epoch(t, "6")
	d = tenantWant(t, g, "default", VerdictHold, RuleTenantEpoch)
	if !strings.Contains(d.Reason, "this worker is stale") {
		t.Errorf("reason %q", d.Reason)
	}
	tenantWant(t, g, "acme", VerdictHold, RuleTenantEpoch)
	tenantWant(t, g, "acme", VerdictHold, RuleTenantEpoch)
	if stale() != before+3 {
		t.Errorf("stale counter %d, want %d", stale(), before+3)
	}
	if n := strings.Count(f.logs.String(), `"side":"worker"`); n != 1 {
		t.Errorf("stale-worker warning logged %d times:\n%s", n, f.logs)
	}

	// Time epochs compare as instants.
	gt := f.gate(t, map[string]string{"PLAITA_DEPLOYMENT_EPOCH": "2026-10-01T00:00:00Z"})
	f.epoch(t, "2026-10-01T02:00:00+02:00")
	f.status(t, "acme", "active")
	tenantWant(t, gt, "acme", VerdictRun, RuleTenantStatus)
	f.epoch(t, "2026-10-02")
	tenantWant(t, gt, "acme", VerdictHold, RuleTenantEpoch)
}

func TestTenantStatusEpochStrictSwitch(t *testing.T) {
	f := newTenantStatusFixture(t)
	f.status(t, "acme", "active")

	// Explicit 0: the gate is off whatever Redis says (#237 fail-open).
	off := f.gate(t, map[string]string{"PLAITA_DEPLOYMENT_EPOCH": "5", "PLAITA_TENANT_STATUS_EPOCH_STRICT": "0"})
	tenantWant(t, off, "acme", VerdictRun, RuleTenantStatus)
	f.epoch(t, "9")
	tenantWant(t, off, "acme", VerdictRun, RuleTenantStatus)
	tenantWant(t, off, "", VerdictRun, RuleTenantStatus)
	f.epoch(t, "1")
	tenantWant(t, off, "acme", VerdictRun, RuleTenantStatus)

	// Auto with a legacy worker: off too.
	auto := f.gate(t, map[string]string{})
	f.epoch(t, "7")
	tenantWant(t, auto, "acme", VerdictRun, RuleTenantStatus)

	// Explicit 1 with a legacy worker: on; "legacy" is the oldest epoch.
	on := f.gate(t, map[string]string{"PLAITA_TENANT_STATUS_EPOCH_STRICT": "1"})
	tenantWant(t, on, "acme", VerdictHold, RuleTenantEpoch) // Redis "7" is newer than legacy
	tenantWant(t, on, "", VerdictHold, RuleTenantEpoch)
	f.epoch(t, "")
	tenantWant(t, on, "acme", VerdictHold, RuleTenantEpoch) // missing
	tenantWant(t, on, "", VerdictRun, RuleTenantStatus)
	f.epoch(t, "legacy")
	tenantWant(t, on, "acme", VerdictRun, RuleTenantStatus)
	if got := f.set.GetOrCreateCounter(`plaita_tenant_status_stale_epoch_total`).Get(); got != 3 {
		t.Errorf("stale counter %d", got)
	}
}

// The settings struct itself: zero is legacy + auto (off); an explicit switch wins over auto.
func TestTenantStatusSettings(t *testing.T) {
	f := newTenantStatusFixture(t)
	f.status(t, "acme", "active")
	f.epoch(t, "9")
	tenantWant(t, f.gateWith(t, settings.TenantStatus{}), "acme", VerdictRun, RuleTenantStatus)
	tenantWant(t, f.gateWith(t, settings.TenantStatus{DeploymentEpoch: " 9 "}), "acme", VerdictRun, RuleTenantStatus)
	tenantWant(t, f.gateWith(t, settings.TenantStatus{DeploymentEpoch: "8"}), "acme", VerdictHold, RuleTenantEpoch)
	tenantWant(t, f.gateWith(t, settings.TenantStatus{DeploymentEpoch: "8", EpochStrict: new(false)}), "acme", VerdictRun, RuleTenantStatus)
	d := tenantWant(t, f.gateWith(t, settings.TenantStatus{EpochStrict: new(true)}), "acme", VerdictHold, RuleTenantEpoch)
	if !strings.Contains(d.Reason, `"legacy"`) {
		t.Errorf("an unset epoch is legacy: %q", d.Reason)
	}
}

// ---- quota ---------------------------------------------------------------------------------

type quotaFixture struct {
	c    rueidis.Client
	st   *store.Redis
	root string
	sp   keys.Space
	set  *metrics.Set
	logs *strings.Builder
	q    *Quota
	now  time.Time
}

func newQuotaFixture(t *testing.T, env map[string]string) *quotaFixture {
	c := redistest.Client(t)
	root := redistest.Root(t, c)
	f := &quotaFixture{c: c, st: store.NewRedis(c, store.DefaultSettings(), root), root: root, sp: keys.MustFor(root, ""),
		set: metrics.NewSet(), logs: &strings.Builder{}, now: time.Date(2026, 10, 1, 12, 0, 0, 0, time.UTC)}
	f.q = f.quota(t, env)
	return f
}

// quota builds a gate with the settings of env over the fixture's root, clock, metrics and
// logs: what a worker started with env sees.
func (f *quotaFixture) quota(t *testing.T, env map[string]string) *Quota {
	t.Helper()
	return f.quotaWith(t, settings.WorkerQuota(gatesCfg(t, env)))
}

func (f *quotaFixture) quotaWith(t *testing.T, s settings.Quota) *Quota {
	t.Helper()
	q, err := NewQuotaGate(f.st, s, f.set, zerolog.New(f.logs))
	if err != nil {
		t.Fatal(err)
	}
	q.Now = func() time.Time { return f.now }
	return q
}

func quotaStart(tenant, id string) queue.Envelope {
	return queue.Envelope{SchemaVersion: 1, Kind: queue.KindStart, TenantID: tenant, FlowID: "f", ExecutionID: id}
}

func (f *quotaFixture) admit(t *testing.T, env queue.Envelope, want Verdict) Admission {
	t.Helper()
	return f.admitOn(t, f.q, env, want)
}

func (f *quotaFixture) admitOn(t *testing.T, q *Quota, env queue.Envelope, want Verdict) Admission {
	t.Helper()
	a, err := q.Admit(gatesCtx(t), env)
	if err != nil {
		t.Fatalf("Admit(%s/%s): %v", env.Tenant(), env.ExecutionID, err)
	}
	if a.Verdict != want || a.Rule != RuleTenantQuota || a.Reason == "" {
		t.Fatalf("Admit(%s/%s) = %v (running %d, limit %d); want %v", env.Tenant(), env.ExecutionID, a.Decision, a.Running, a.Limit, want)
	}
	return a
}

func (f *quotaFixture) running(t *testing.T, tenant string) int {
	t.Helper()
	n, err := f.q.Running(gatesCtx(t), tenant)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func (f *quotaFixture) counter(name string) uint64 {
	return f.set.GetOrCreateCounter("plaita_tenant_quota_" + name + "_total").Get()
}

func TestQuotaAdmitDeferBypassRelease(t *testing.T) {
	f := newQuotaFixture(t, map[string]string{"PLAITA_TENANT_MAX_RUNNING": "2", "PLAITA_TENANT_QUOTA_DEFER_MAX": "3"})
	a := f.admit(t, quotaStart("acme", "ex_1"), VerdictRun)
	if !a.Counted || a.Running != 1 || a.Limit != 2 {
		t.Errorf("first admission %+v", a)
	}
	f.admit(t, quotaStart("acme", "ex_2"), VerdictRun)
	// Re-admission of the same execution (a redelivered start) is idempotent.
	a = f.admit(t, quotaStart("acme", "ex_1"), VerdictRun)
	if !a.Counted || a.Running != 2 {
		t.Errorf("re-admission %+v", a)
	}
	// A resume is not counted.
	res := queue.Envelope{SchemaVersion: 1, Kind: queue.KindResume, TenantID: "acme", ExecutionID: "ex_9", ResumeType: "continue"}
	if a = f.admit(t, res, VerdictRun); a.Counted {
		t.Errorf("resume counted: %+v", a)
	}
	// Another tenant has its own slots; the default tenant too.
	f.admit(t, quotaStart("", "ex_d1"), VerdictRun)
	f.admit(t, quotaStart("beta", "ex_b1"), VerdictRun)

	// Full: deferred with quota_defer_count+1 until PLAITA_TENANT_QUOTA_DEFER_MAX.
	a = f.admit(t, quotaStart("acme", "ex_3"), VerdictDefer)
	if a.Counted || a.DeferCount != 1 || a.RetryAfter != time.Second || a.Running != 2 {
		t.Errorf("defer %+v", a)
	}
	copyEnv := quotaStart("acme", "ex_3")
	a.Mutate(&copyEnv)
	if copyEnv.QuotaDeferCount != 1 || copyEnv.QuotaBypass {
		t.Errorf("mutated copy %+v", copyEnv)
	}
	e3 := quotaStart("acme", "ex_3")
	e3.QuotaDeferCount = 2
	if a = f.admit(t, e3, VerdictDefer); a.DeferCount != 3 || a.RetryAfter != 4*time.Second {
		t.Errorf("second defer %+v", a)
	}
	e3.QuotaDeferCount = 3
	a = f.admit(t, e3, VerdictRunWithBypass)
	if !a.Counted || a.Running != 3 {
		t.Errorf("bypass %+v", a)
	}
	a.Mutate(&copyEnv)
	if !copyEnv.QuotaBypass {
		t.Error("a bypassed copy must carry quota_bypass")
	}
	if !strings.Contains(f.logs.String(), "worker.tenant_quota_bypass") {
		t.Errorf("no bypass WARNING:\n%s", f.logs)
	}
	// A message that already carries quota_bypass runs over the limit at once.
	e4 := quotaStart("acme", "ex_4")
	e4.QuotaBypass = true
	if a = f.admit(t, e4, VerdictRunWithBypass); a.Running != 4 {
		t.Errorf("carried bypass %+v", a)
	}
	if f.running(t, "acme") != 4 || f.running(t, "beta") != 1 || f.running(t, "") != 1 {
		t.Errorf("running acme %d beta %d default %d", f.running(t, "acme"), f.running(t, "beta"), f.running(t, ""))
	}

	// Release frees slots (idempotently); under the limit again, a new start runs.
	for _, id := range []string{"ex_1", "ex_1", "ex_2", "ex_3", "never_admitted"} {
		if err := f.q.Release(gatesCtx(t), "acme", id); err != nil {
			t.Fatal(err)
		}
	}
	if n := f.running(t, "acme"); n != 1 {
		t.Errorf("after release: %d running", n)
	}
	f.admit(t, quotaStart("acme", "ex_5"), VerdictRun)
	f.admit(t, quotaStart("acme", "ex_6"), VerdictDefer)
	if f.counter("admitted") != 6 || f.counter("deferred") != 3 || f.counter("bypass") != 2 {
		t.Errorf("counters admitted %d deferred %d bypass %d", f.counter("admitted"), f.counter("deferred"), f.counter("bypass"))
	}

	// The slots are one ZSET per tenant, nothing per execution.
	typ, err := f.c.Do(gatesCtx(t), f.c.B().Type().Key(keys.MustFor(f.root, "acme").TenantRunning()).Build()).ToString()
	if err != nil || typ != "zset" {
		t.Errorf("slot key type %q %v", typ, err)
	}
	all, err := f.c.Do(gatesCtx(t), f.c.B().Keys().Pattern(f.root+":*").Build()).AsStrSlice()
	if err != nil || len(all) != 3 {
		t.Errorf("keys under the root: %v %v (want the three tenants' ZSETs)", all, err)
	}
}

func TestQuotaHashOverride(t *testing.T) {
	f := newQuotaFixture(t, map[string]string{"PLAITA_TENANT_MAX_RUNNING": "1"})
	hset := func(tenant, v string) {
		gatesDo(t, f.c, f.c.B().Hset().Key(f.sp.TenantQuota()).FieldValue().FieldValue(tenant, v).Build())
	}
	// 0 in the HASH: unlimited for that tenant (WARNING once), never the env's 1. No limit
	// applies, so nothing is counted (no slot bookkeeping on the hot path).
	hset("acme", "0")
	for i := range 5 {
		a := f.admit(t, quotaStart("acme", "ex_a"+string(rune('0'+i))), VerdictRun)
		if a.Limit != 0 || a.Counted {
			t.Errorf("override 0: %+v", a)
		}
	}
	if n := f.running(t, "acme"); n != 0 {
		t.Errorf("an unlimited tenant has %d slots recorded", n)
	}
	if n := strings.Count(f.logs.String(), "worker.tenant_quota_unlimited"); n != 1 {
		t.Errorf("override 0 warned %d times:\n%s", n, f.logs)
	}
	// Negative and not-an-integer: unlimited too, each warned.
	hset("neg", "-3")
	hset("junk", "lots")
	f.admit(t, quotaStart("neg", "ex_n1"), VerdictRun)
	f.admit(t, quotaStart("neg", "ex_n2"), VerdictRun)
	f.admit(t, quotaStart("junk", "ex_j1"), VerdictRun)
	f.admit(t, quotaStart("junk", "ex_j2"), VerdictRun)
	if n := strings.Count(f.logs.String(), "worker.tenant_quota_unlimited"); n != 3 {
		t.Errorf("%d unlimited warnings:\n%s", n, f.logs)
	}
	// A positive override wins over the env, both ways.
	hset("beta", "2")
	f.admit(t, quotaStart("beta", "ex_b1"), VerdictRun)
	a := f.admit(t, quotaStart("beta", "ex_b2"), VerdictRun)
	if a.Limit != 2 || !strings.Contains(a.Reason, f.sp.TenantQuota()) {
		t.Errorf("override 2: %+v", a)
	}
	f.admit(t, quotaStart("beta", "ex_b3"), VerdictDefer)
	// No override: PLAITA_TENANT_MAX_RUNNING.
	f.admit(t, quotaStart("", "ex_d1"), VerdictRun)
	a = f.admit(t, quotaStart("", "ex_d2"), VerdictDefer)
	if !strings.Contains(a.Reason, "PLAITA_TENANT_MAX_RUNNING=1") {
		t.Errorf("reason %q", a.Reason)
	}
	// A worker started with 0 runs the default tenant unlimited; the override still wins there.
	unlimited := f.quota(t, map[string]string{"PLAITA_TENANT_MAX_RUNNING": "0"})
	if a = f.admitOn(t, unlimited, quotaStart("", "ex_d2"), VerdictRun); a.Limit != 0 || a.Counted {
		t.Errorf("env 0 = unlimited: %+v", a)
	}
	f.admitOn(t, unlimited, quotaStart("beta", "ex_b3"), VerdictDefer)
	// The override is read on every admission: raising it admits the next start.
	hset("beta", "3")
	if a = f.admit(t, quotaStart("beta", "ex_b3"), VerdictRun); a.Limit != 3 {
		t.Errorf("raised override: %+v", a)
	}
}

func TestQuotaSlotExpiry(t *testing.T) {
	f := newQuotaFixture(t, map[string]string{"PLAITA_TENANT_MAX_RUNNING": "1", "PLAITA_TENANT_RUNNING_TTL_SECONDS": "60"})
	t0 := f.now
	f.admit(t, quotaStart("acme", "ex_1"), VerdictRun)
	f.now = t0.Add(30 * time.Second)
	f.admit(t, quotaStart("acme", "ex_2"), VerdictDefer)
	// ex_1's slot expires at t0+60s: a crashed worker's slot frees itself.
	f.now = t0.Add(61 * time.Second)
	if n := f.running(t, "acme"); n != 0 {
		t.Errorf("expired slot still counted: %d", n)
	}
	f.admit(t, quotaStart("acme", "ex_2"), VerdictRun)
	score, err := f.c.Do(gatesCtx(t), f.c.B().Zscore().Key(keys.MustFor(f.root, "acme").TenantRunning()).Member("ex_1").Build()).ToString()
	if !rueidis.IsRedisNil(err) {
		t.Errorf("expired member not pruned: %q %v", score, err)
	}
	// Re-admission refreshes the expiry.
	f.now = t0.Add(100 * time.Second) // ex_2 (admitted at +61s) lives until +121s
	f.admit(t, quotaStart("acme", "ex_2"), VerdictRun)
	f.now = t0.Add(150 * time.Second) // refreshed: until +160s
	f.admit(t, quotaStart("acme", "ex_3"), VerdictDefer)
	f.now = t0.Add(161 * time.Second)
	f.admit(t, quotaStart("acme", "ex_3"), VerdictRun)
	// The key itself carries a TTL, so an idle tenant leaves nothing behind.
	ttl, err := f.c.Do(gatesCtx(t), f.c.B().Pttl().Key(keys.MustFor(f.root, "acme").TenantRunning()).Build()).AsInt64()
	if err != nil || ttl <= 0 || ttl > 60000 {
		t.Errorf("slot key pttl %d %v", ttl, err)
	}
}

func TestQuotaDisabled(t *testing.T) {
	f := newQuotaFixture(t, map[string]string{"PLAITA_TENANT_MAX_RUNNING": "1", "PLAITA_DISABLE_TENANT_QUOTA": " 1 "})
	for _, id := range []string{"ex_1", "ex_2", "ex_3"} {
		if a := f.admit(t, quotaStart("acme", id), VerdictRun); a.Counted || !strings.Contains(a.Reason, "PLAITA_DISABLE_TENANT_QUOTA") {
			t.Errorf("disabled: %+v", a)
		}
	}
	if n := f.running(t, "acme"); n != 0 {
		t.Errorf("disabled quota recorded %d slots", n)
	}
	// A worker started with the quota on counts again, from an empty tenant.
	on := f.quota(t, map[string]string{"PLAITA_TENANT_MAX_RUNNING": "1", "PLAITA_DISABLE_TENANT_QUOTA": "0"})
	f.admitOn(t, on, quotaStart("acme", "ex_1"), VerdictRun)
	f.admitOn(t, on, quotaStart("acme", "ex_2"), VerdictDefer)
}

// The settings struct itself: zero is unlimited, 24 h slots, 64 deferrals.
func TestQuotaSettingsDefaults(t *testing.T) {
	f := newQuotaFixture(t, nil)
	q := f.quotaWith(t, settings.Quota{})
	for i := range 3 {
		if a := f.admitOn(t, q, quotaStart("acme", "ex_"+string(rune('a'+i))), VerdictRun); a.Limit != 0 || a.Counted {
			t.Errorf("zero settings: %+v", a)
		}
	}
	capped := f.quotaWith(t, settings.Quota{MaxRunning: 1})
	f.admitOn(t, capped, quotaStart("acme", "ex_y"), VerdictRun)
	ttl, err := f.c.Do(gatesCtx(t), f.c.B().Pttl().Key(keys.MustFor(f.root, "acme").TenantRunning()).Build()).AsInt64()
	if err != nil || ttl <= 23*3600*1000 || ttl > 24*3600*1000 {
		t.Errorf("slot key pttl %d %v, want 24 h", ttl, err)
	}
	e := quotaStart("acme", "ex_z")
	e.QuotaDeferCount = 63
	if a := f.admitOn(t, capped, e, VerdictDefer); a.DeferCount != 64 {
		t.Errorf("deferral 64 of 64: %+v", a)
	}
	e.QuotaDeferCount = 64
	f.admitOn(t, capped, e, VerdictRunWithBypass)
}

func TestTenantGateVerdictNames(t *testing.T) {
	want := map[Verdict]string{VerdictRun: "run", VerdictRefuse: "refuse", VerdictHold: "hold", VerdictDefer: "defer",
		VerdictRunWithBypass: "run_with_bypass", VerdictHandOver: "hand_over", VerdictRunAnyway: "run_anyway",
		VerdictLeaveForTarget: "leave_for_target", Verdict(99): "verdict(99)"}
	for v, s := range want {
		if v.String() != s {
			t.Errorf("%d: %q, want %q", int(v), v.String(), s)
		}
	}
	for _, v := range []Verdict{VerdictRun, VerdictRunWithBypass, VerdictRunAnyway} {
		if !v.Runs() {
			t.Errorf("%v must run", v)
		}
	}
	for _, v := range []Verdict{VerdictRefuse, VerdictHold, VerdictDefer, VerdictHandOver, VerdictLeaveForTarget} {
		if v.Runs() {
			t.Errorf("%v must not run", v)
		}
	}
	if s := (Decision{VerdictDefer, RuleTenantQuota, "full"}).String(); s != "defer (tenant_quota): full" {
		t.Errorf("%q", s)
	}
}
