package worker

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/redis/rueidis"
	"github.com/rs/zerolog"

	"plaita/engine/state"
	"plaita/queue"
	"plaita/roles/settings"
	"plaita/store"
	"plaita/store/keys"
	"plaita/test/redistest"
)

func TestDenyRepos(t *testing.T) {
	deny := NewRepoDeny(settings.WorkerDenyRepos(gatesCfg(t, map[string]string{"PLAITA_WORKER_DENY_REPOS": " big-repo , ,mono,, "})))
	start := func(repo string) queue.Envelope {
		return queue.Envelope{Kind: queue.KindStart, FlowID: "f", ExecutionID: "ex_1", Repo: repo}
	}
	for repo, want := range map[string]bool{"big-repo": true, "mono": true, " mono ": true, "": false, "other": false,
		"big": false, "big-repo,mono": false} {
		if got := deny.Denied(start(repo)); got != want {
			t.Errorf("Denied(repo %q) = %v, want %v", repo, got, want)
		}
	}
	d := deny.Check(start("mono"))
	if d.Verdict != VerdictHandOver || d.Rule != RuleDenyRepos || !strings.Contains(d.Reason, "PLAITA_WORKER_DENY_REPOS") {
		t.Errorf("Check = %v", d)
	}
	if d := deny.Check(start("other")); d.Verdict != VerdictRun {
		t.Errorf("Check(other) = %v", d)
	}
	resume := queue.Envelope{Kind: queue.KindResume, ExecutionID: "ex_1", ResumeType: "continue", Repo: "mono"}
	if deny.Denied(resume) {
		t.Error("a resume is never denied")
	}
	// Another worker's list is its own.
	other := NewRepoDeny(settings.WorkerDenyRepos(gatesCfg(t, map[string]string{"PLAITA_WORKER_DENY_REPOS": "other"})))
	if other.Denied(start("mono")) || !other.Denied(start("other")) {
		t.Error("a second gate must deny its own list only")
	}
	if !deny.Denied(start("mono")) {
		t.Error("building another gate changed the first")
	}
	onlyEmpty := NewRepoDeny(settings.WorkerDenyRepos(gatesCfg(t, map[string]string{"PLAITA_WORKER_DENY_REPOS": " , "})))
	if onlyEmpty.Denied(start("other")) || onlyEmpty.Denied(start("")) {
		t.Error("only empty items: nothing is denied")
	}
	if NewRepoDeny(settings.WorkerDenyRepos(gatesCfg(t, nil))).Denied(start("other")) {
		t.Error("unset: nothing is denied")
	}
	if (RepoDeny{}).Denied(start("mono")) || NewRepoDeny([]string{"", "  "}).Denied(start("")) {
		t.Error("the zero gate denies nothing")
	}
}

type affinityFixture struct {
	st   *store.Redis
	ws   string
	set  *metrics.Set
	logs *strings.Builder
	a    *Affinity
}

func newAffinityFixture(t *testing.T) *affinityFixture {
	c := redistest.Client(t)
	root := redistest.Root(t, c)
	f := &affinityFixture{ws: t.TempDir(), set: metrics.NewSet(), logs: &strings.Builder{}}
	cfg := gatesCfg(t, nil)
	f.st = store.NewRedis(c, settings.Store(cfg), root)
	if err := os.Mkdir(filepath.Join(f.ws, "shop"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.ws, "afile"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	f.a = NewAffinityGate(f.st, settings.WorkerAffinity(cfg), f.ws, f.set, zerolog.New(f.logs))
	return f
}

func affinityEnv(tenant, id string) queue.Envelope {
	return queue.Envelope{Kind: queue.KindStart, TenantID: tenant, FlowID: "f", ExecutionID: id}
}

func (f *affinityFixture) check(t *testing.T, env queue.Envelope, repo string, want Verdict) Decision {
	t.Helper()
	return f.checkOn(t, f.a, env, repo, want)
}

func (f *affinityFixture) checkOn(t *testing.T, a *Affinity, env queue.Envelope, repo string, want Verdict) Decision {
	t.Helper()
	d, err := a.Check(gatesCtx(t), env, repo)
	if err != nil {
		t.Fatalf("Check(%q): %v", repo, err)
	}
	if d.Verdict != want || d.Rule != RuleAffinity || d.Reason == "" {
		t.Fatalf("Check(%s, %q) = %v; want %v", env.ExecutionID, repo, d, want)
	}
	return d
}

func (f *affinityFixture) handovers(t *testing.T, tenant, id string) int64 {
	t.Helper()
	ts, err := f.st.Tenant(tenant)
	if err != nil {
		t.Fatal(err)
	}
	n, err := ts.Counter(gatesCtx(t), keys.FamAffinityHandover, id)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestAffinityPresentAndNoRepo(t *testing.T) {
	f := newAffinityFixture(t)
	f.check(t, affinityEnv("", "ex_1"), "shop", VerdictRun)
	f.check(t, affinityEnv("", "ex_1"), "", VerdictRun)
	res := queue.Envelope{Kind: queue.KindResume, ExecutionID: "ex_1", ResumeType: "continue"}
	f.check(t, res, "shop", VerdictRun)
	if n := f.handovers(t, "", "ex_1"); n != 0 {
		t.Errorf("a present repo counted %d handovers", n)
	}
	// No workspace root: not checked (logged once).
	noRoot := NewAffinityGate(f.st, settings.Affinity{}, "", nil, zerolog.New(f.logs))
	for range 2 {
		if d, err := noRoot.Check(gatesCtx(t), affinityEnv("", "ex_1"), "missing"); err != nil || d.Verdict != VerdictRun {
			t.Errorf("no root: %v %v", d, err)
		}
	}
	if n := strings.Count(f.logs.String(), "worker.affinity_no_root"); n != 1 {
		t.Errorf("no-root warning %d times", n)
	}
}

func TestAffinityHandoverThenRunAnyway(t *testing.T) {
	f := newAffinityFixture(t)
	for i := int64(1); i <= DefaultMaxHandovers; i++ {
		d := f.check(t, affinityEnv("acme", "ex_1"), "missing", VerdictHandOver)
		if !strings.Contains(d.Reason, "does not exist") || !strings.Contains(d.Reason, "PLAITA_DISABLE_AFFINITY") {
			t.Errorf("reason %q", d.Reason)
		}
		if n := f.handovers(t, "acme", "ex_1"); n != i {
			t.Errorf("handover counter %d, want %d", n, i)
		}
	}
	f.check(t, affinityEnv("acme", "ex_1"), "missing", VerdictRunAnyway)
	if !strings.Contains(f.logs.String(), "worker.affinity_run_anyway") {
		t.Errorf("no WARNING:\n%s", f.logs)
	}
	// The counter is per execution and per tenant.
	f.check(t, affinityEnv("", "ex_1"), "missing", VerdictHandOver)
	f.check(t, affinityEnv("acme", "ex_2"), "missing", VerdictHandOver)
	if n := f.handovers(t, "", "ex_1"); n != 1 {
		t.Errorf("default tenant counter %d", n)
	}
	// A file is not a repo directory.
	f.check(t, affinityEnv("acme", "ex_3"), "afile", VerdictHandOver)

	// The bound is a field.
	f.a.MaxHandovers = 1
	f.check(t, affinityEnv("acme", "ex_4"), "missing", VerdictHandOver)
	f.check(t, affinityEnv("acme", "ex_4"), "missing", VerdictRunAnyway)
	f.a.MaxHandovers = 0
	f.check(t, affinityEnv("acme", "ex_5"), "missing", VerdictRunAnyway)
	if h, r := f.set.GetOrCreateCounter(`plaita_affinity_handover_total`).Get(), f.set.GetOrCreateCounter(`plaita_affinity_run_anyway_total`).Get(); h != 7 || r != 3 {
		t.Errorf("counters handover %d run_anyway %d", h, r)
	}
}

func TestAffinityInvalidRepoNames(t *testing.T) {
	f := newAffinityFixture(t)
	// Something outside the workspace that a path escape would find.
	outside := filepath.Base(filepath.Dir(f.ws))
	for _, repo := range []string{"..", ".", "../" + outside, "a/b", "/etc", f.ws, `a\b`, "a..b", "x\x00y", "shop/"} {
		d := f.check(t, affinityEnv("", "ex_1"), repo, VerdictRefuse)
		if !strings.Contains(d.Reason, "invalid repo name") {
			t.Errorf("%q: reason %q", repo, d.Reason)
		}
		if err := ValidRepoName(repo); !errors.Is(err, ErrInvalidRepo) {
			t.Errorf("ValidRepoName(%q) = %v", repo, err)
		}
	}
	if n := f.handovers(t, "", "ex_1"); n != 0 {
		t.Errorf("an invalid name counted %d handovers", n)
	}
	for _, repo := range []string{"shop", "my-repo_2", "repo.v2"} {
		if err := ValidRepoName(repo); err != nil {
			t.Errorf("ValidRepoName(%q) = %v", repo, err)
		}
	}
}

func TestAffinityDisabled(t *testing.T) {
	f := newAffinityFixture(t)
	off := NewAffinityGate(f.st, settings.WorkerAffinity(gatesCfg(t, map[string]string{"PLAITA_DISABLE_AFFINITY": "1"})),
		f.ws, f.set, zerolog.New(f.logs))
	for _, repo := range []string{"missing", "../escape", "shop"} {
		d := f.checkOn(t, off, affinityEnv("", "ex_1"), repo, VerdictRun)
		if !strings.Contains(d.Reason, "PLAITA_DISABLE_AFFINITY=1") {
			t.Errorf("reason %q", d.Reason)
		}
	}
	if n := f.handovers(t, "", "ex_1"); n != 0 {
		t.Errorf("disabled affinity counted %d handovers", n)
	}
	// The worker with the check on (the fixture's) hands the same execution over: the first
	// handover, since the disabled gate counted none.
	d := f.check(t, affinityEnv("", "ex_1"), "missing", VerdictHandOver)
	if !strings.Contains(d.Reason, "handover 1 of") || f.handovers(t, "", "ex_1") != 1 {
		t.Errorf("after the disabled gate: %q, counter %d", d.Reason, f.handovers(t, "", "ex_1"))
	}
}

func TestDispatchTarget(t *testing.T) {
	set := metrics.NewSet()
	var logs strings.Builder
	tg := NewTargetGate(settings.WorkerTarget(gatesCfg(t, nil)), set, zerolog.New(&logs))
	live := map[string]bool{"worker-b": true, "worker-c": false}
	var probed []string
	alive := func(_ context.Context, id string) (bool, error) {
		probed = append(probed, id)
		if id == "broken" {
			return false, errors.New("registry unreachable")
		}
		return live[id], nil
	}
	msg := func(target string) queue.Envelope {
		return queue.Envelope{Kind: queue.KindResume, ExecutionID: "ex_1", ResumeType: "continue", TargetInstanceID: target}
	}
	checkOn := func(g *Target, target string, want Verdict) Decision {
		t.Helper()
		d := g.Check(gatesCtx(t), msg(target), "worker-a", alive)
		if d.Verdict != want || d.Rule != RuleDispatchTarget || d.Reason == "" {
			t.Fatalf("target %q: %v, want %v", target, d, want)
		}
		return d
	}
	check := func(target string, want Verdict) Decision {
		t.Helper()
		return checkOn(tg, target, want)
	}
	check("worker-b", VerdictLeaveForTarget) // another live instance
	check("worker-c", VerdictRun)            // dead
	check("worker-z", VerdictRun)            // unknown = not alive
	check("worker-a", VerdictRun)            // self
	check("", VerdictRun)
	check("broken", VerdictRun) // liveness unknown: run here
	check("broken", VerdictRun)
	if strings.Count(logs.String(), "worker.dispatch_target_probe_failed") != 1 {
		t.Errorf("probe failure warnings:\n%s", logs.String())
	}
	if strings.Join(probed, ",") != "worker-b,worker-c,worker-z,broken,broken" {
		t.Errorf("probed %v (self and empty must not be probed)", probed)
	}
	// A worker started with targets ignored runs it and probes nothing.
	ignoring := NewTargetGate(settings.WorkerTarget(gatesCfg(t, map[string]string{"PLAITA_DISABLE_DISPATCH_TARGET": "1"})), set, zerolog.New(&logs))
	probed = nil
	d := checkOn(ignoring, "worker-b", VerdictRun)
	if !strings.Contains(d.Reason, "PLAITA_DISABLE_DISPATCH_TARGET=1") || len(probed) != 0 {
		t.Errorf("disabled: %v, probed %v", d, probed)
	}
	if l, dead := set.GetOrCreateCounter(`plaita_dispatch_target_left_total`).Get(), set.GetOrCreateCounter(`plaita_dispatch_target_dead_total`).Get(); l != 1 || dead != 2 {
		t.Errorf("counters left %d dead %d", l, dead)
	}
	if d := NewTargetGate(settings.Target{}, nil, zerolog.Nop()).Check(gatesCtx(t), msg("worker-b"), "worker-a", nil); d.Verdict != VerdictRun {
		t.Errorf("no probe: %v", d)
	}
}

// ---- wake-ups ------------------------------------------------------------------------------

type wakeupFixture struct {
	c     rueidis.Client
	root  string
	delay *queue.Delay
	w     *Wakeups
	now   time.Time
}

func newWakeupFixture(t *testing.T, env map[string]string) *wakeupFixture {
	c := redistest.Client(t)
	root := redistest.Root(t, c)
	delay, err := queue.NewDelay(queue.RedisDelays(c), root+":delay:queue")
	if err != nil {
		t.Fatal(err)
	}
	f := &wakeupFixture{c: c, root: root, delay: delay, now: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)}
	f.w = NewWakeups(store.NewRedis(c, store.DefaultSettings(), root), delay, settings.WorkerWakeups(gatesCfg(t, env)))
	f.w.Now = func() time.Time { return f.now }
	return f
}

func (f *wakeupFixture) suspended(tenant, id string, s state.Suspend) *state.Execution {
	return &state.Execution{ExecutionID: id, TenantID: tenant, FlowID: "f", FlowVersion: "1", Status: state.Suspended, Suspend: &s}
}

func (f *wakeupFixture) ttl(t *testing.T, key string) time.Duration {
	t.Helper()
	ms, err := f.c.Do(gatesCtx(t), f.c.B().Pttl().Key(key).Build()).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	return time.Duration(ms) * time.Millisecond
}

func (f *wakeupFixture) scheduled(t *testing.T) []queue.DelayEntry {
	t.Helper()
	members, err := f.c.Do(gatesCtx(t), f.c.B().Zrange().Key(f.delay.ScheduledKey()).Min("0").Max("-1").Build()).AsStrSlice()
	if err != nil {
		t.Fatal(err)
	}
	var out []queue.DelayEntry
	for _, m := range members {
		var e queue.DelayEntry
		if err := json.Unmarshal([]byte(m), &e); err != nil {
			t.Fatalf("member %s: %v", m, err)
		}
		out = append(out, e)
	}
	return out
}

// What each suspension registers, and how long its record lives: the event TTL, and that long
// past the due time.
func TestWakeupsRegister(t *testing.T) {
	f := newWakeupFixture(t, map[string]string{"PLAITA_EVENT_TTL_SECONDS": "600"})
	due := f.now.Add(time.Hour)
	acme := keys.MustFor(f.root, "acme")
	ctx := gatesCtx(t)

	ev := f.suspended("acme", "ex_ev", state.Suspend{Kind: state.SuspendEvent, Node: "w", Since: f.now, Due: &due, EventType: "order.paid"})
	for range 2 { // idempotent
		if err := f.w.Register(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	subKey, _ := acme.Subscription("ex_ev")
	if ttl := f.ttl(t, subKey); ttl <= time.Hour+590*time.Second || ttl > time.Hour+600*time.Second {
		t.Errorf("subscription TTL %s, want 1h10m (due + event TTL)", ttl)
	}
	got := f.scheduled(t)
	if len(got) != 1 || got[0].ResumeType != state.ResumeTimeout || got[0].TenantID != "acme" || got[0].Node != "w" || !got[0].Due.Equal(due) {
		t.Fatalf("timeout entry %+v", got)
	}
	idx, _ := acme.SubscriptionIndex("order.paid")
	if n, _ := f.c.Do(ctx, f.c.B().Zcard().Key(idx).Build()).AsInt64(); n != 1 {
		t.Errorf("an uncorrelated wait: %d members in the type's index", n)
	}
	// A correlated wait goes to the bucket of its first term, the others kept in its state.
	corr := f.suspended("acme", "ex_corr", state.Suspend{Kind: state.SuspendEvent, Node: "w", Since: f.now, EventType: "order.paid",
		Correlation: []state.Correlation{{Path: []string{"order"}, Value: `"A1"`}, {Path: []string{"kind"}, Value: `"card"`}}})
	if err := f.w.Register(ctx, corr); err != nil {
		t.Fatal(err)
	}
	bucket, _ := acme.SubscriptionBucket("order.paid", `["order"]`, `"A1"`)
	member := "ex_corr:" + strconv.FormatInt(f.now.UnixNano(), 10)
	if _, err := f.c.Do(ctx, f.c.B().Zscore().Key(bucket).Member(member).Build()).AsFloat64(); err != nil {
		t.Errorf("bucket member %s: %v", member, err)
	}
	if n, _ := f.c.Do(ctx, f.c.B().Zcard().Key(idx).Build()).AsInt64(); n != 1 {
		t.Errorf("the correlated wait is in the type's index too (%d members)", n)
	}

	// An approval without a timeout: the record lives the event TTL, no delay entry.
	ap := f.suspended("", "ex_ap", state.Suspend{Kind: state.SuspendApproval, Node: "ask", Since: f.now, Message: "ok?"})
	if err := f.w.Register(ctx, ap); err != nil {
		t.Fatal(err)
	}
	apKey, _ := keys.MustFor(f.root, "").Approval("ex_ap")
	if ttl := f.ttl(t, apKey); ttl <= 590*time.Second || ttl > 600*time.Second {
		t.Errorf("approval TTL %s, want 10m", ttl)
	}
	if n := len(f.scheduled(t)); n != 1 {
		t.Errorf("an approval without timeout scheduled something: %d entries", n)
	}

	// A delay: a continue entry, and no record.
	dl := f.suspended("", "ex_dl", state.Suspend{Kind: state.SuspendDelay, Node: "nap", Since: f.now, Due: &due})
	if err := f.w.Register(ctx, dl); err != nil {
		t.Fatal(err)
	}
	got = f.scheduled(t)
	if len(got) != 2 {
		t.Fatalf("scheduled %+v", got)
	}
	if i := slices.IndexFunc(got, func(e queue.DelayEntry) bool { return e.ExecutionID == "ex_dl" }); i < 0 ||
		got[i].ResumeType != state.ResumeContinue || got[i].Node != "nap" || got[i].TenantID != "default" {
		t.Fatalf("delay entry %+v", got)
	}

	// What cannot be registered: permanent (ErrWakeupUnregistrable), never taken for a Redis
	// failure to retry.
	var zero time.Time
	before1970 := time.Date(1734, 8, 22, 0, 0, 0, 0, time.UTC) // where a wrapped 1e18 s delay landed
	for name, ex := range map[string]*state.Execution{
		"not suspended":           {ExecutionID: "ex_x", Status: state.Running},
		"delay without due":       f.suspended("", "ex_x", state.Suspend{Kind: state.SuspendDelay, Node: "n", Since: f.now}),
		"delay due the zero time": f.suspended("", "ex_x", state.Suspend{Kind: state.SuspendDelay, Node: "n", Since: f.now, Due: &zero}),
		"delay due before 1970":   f.suspended("", "ex_x", state.Suspend{Kind: state.SuspendDelay, Node: "n", Since: f.now, Due: &before1970}),
		"unknown kind":            f.suspended("", "ex_x", state.Suspend{Kind: "nap", Node: "n", Since: f.now}),
		"bad tenant":              f.suspended("Bad Tenant", "ex_x", state.Suspend{Kind: state.SuspendDelay, Node: "n", Since: f.now, Due: &due}),
	} {
		if err := f.w.Register(ctx, ex); !errors.Is(err, ErrWakeupUnregistrable) {
			t.Errorf("%s: %v, want ErrWakeupUnregistrable", name, err)
		}
	}
	// A wait whose timeout is the zero time: its subscription is written first (the redelivery
	// of a transient failure writes it again), the timeout is refused.
	wz := f.suspended("", "ex_wz", state.Suspend{Kind: state.SuspendEvent, Node: "w", Since: f.now, Due: &zero, EventType: "order.paid"})
	if err := f.w.Register(ctx, wz); !errors.Is(err, ErrWakeupUnregistrable) || !errors.Is(err, queue.ErrBadDelayEntry) {
		t.Errorf("wait with a zero-time timeout: %v, want ErrWakeupUnregistrable", err)
	}
	if n := len(f.scheduled(t)); n != 2 {
		t.Errorf("refused registrations scheduled something: %d entries", n)
	}
}

// The zero settings keep records for 7 days.
func TestWakeupsDefaultEventTTL(t *testing.T) {
	f := newWakeupFixture(t, nil)
	f.w = NewWakeups(store.NewRedis(f.c, store.DefaultSettings(), f.root), f.delay, settings.Wakeups{})
	ap := f.suspended("", "ex_ap", state.Suspend{Kind: state.SuspendApproval, Node: "ask", Since: f.now})
	if err := f.w.Register(gatesCtx(t), ap); err != nil {
		t.Fatal(err)
	}
	apKey, _ := keys.MustFor(f.root, "").Approval("ex_ap")
	if ttl := f.ttl(t, apKey); ttl <= 7*24*time.Hour-10*time.Second || ttl > 7*24*time.Hour {
		t.Errorf("approval TTL %s, want 7 days", ttl)
	}
}
