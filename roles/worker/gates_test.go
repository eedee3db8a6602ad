package worker

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/VictoriaMetrics/metrics"
	"github.com/rs/zerolog"

	"plaita/internal/redistest"
	"plaita/queue"
	"plaita/roles/settings"
	"plaita/store"
	"plaita/store/keys"
)

func TestDenyRepos(t *testing.T) {
	env := map[string]string{"PLAITA_WORKER_DENY_REPOS": " big-repo , ,mono,, "}
	deny := DenyRepos(gatesCfg(t, env))
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
	// Re-read on every call.
	env["PLAITA_WORKER_DENY_REPOS"] = "other"
	if deny.Denied(start("mono")) || !deny.Denied(start("other")) {
		t.Error("PLAITA_WORKER_DENY_REPOS is not re-read per call")
	}
	env["PLAITA_WORKER_DENY_REPOS"] = " , "
	if deny.Denied(start("other")) || deny.Denied(start("")) {
		t.Error("only empty items: nothing is denied")
	}
	delete(env, "PLAITA_WORKER_DENY_REPOS")
	if deny.Denied(start("other")) {
		t.Error("unset: nothing is denied")
	}
	if DenyRepos(nil).Denied(start("mono")) {
		t.Error("nil config denies nothing")
	}
}

type affinityFixture struct {
	st   *store.Redis
	ws   string
	set  *metrics.Set
	logs *strings.Builder
	env  map[string]string
	a    *Affinity
}

func newAffinityFixture(t *testing.T) *affinityFixture {
	c := redistest.Client(t)
	root := redistest.Root(t, c)
	f := &affinityFixture{ws: t.TempDir(), set: metrics.NewSet(), logs: &strings.Builder{}, env: map[string]string{}}
	cfg := gatesCfg(t, f.env)
	f.st = store.NewRedis(c, settings.Store(cfg), root)
	if err := os.Mkdir(filepath.Join(f.ws, "shop"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.ws, "afile"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	f.a = NewAffinity(cfg, f.st, f.ws, f.set, zerolog.New(f.logs))
	return f
}

func affinityEnv(tenant, id string) queue.Envelope {
	return queue.Envelope{Kind: queue.KindStart, TenantID: tenant, FlowID: "f", ExecutionID: id}
}

func (f *affinityFixture) check(t *testing.T, env queue.Envelope, repo string, want Verdict) Decision {
	t.Helper()
	d, err := f.a.Check(gatesCtx(t), env, repo)
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
	noRoot := NewAffinity(nil, f.st, "", nil, zerolog.New(f.logs))
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
	f.env["PLAITA_DISABLE_AFFINITY"] = "1"
	for _, repo := range []string{"missing", "../escape", "shop"} {
		d := f.check(t, affinityEnv("", "ex_1"), repo, VerdictRun)
		if !strings.Contains(d.Reason, "PLAITA_DISABLE_AFFINITY=1") {
			t.Errorf("reason %q", d.Reason)
		}
	}
	if n := f.handovers(t, "", "ex_1"); n != 0 {
		t.Errorf("disabled affinity counted %d handovers", n)
	}
	delete(f.env, "PLAITA_DISABLE_AFFINITY") // re-read per call
	f.check(t, affinityEnv("", "ex_1"), "missing", VerdictHandOver)
}

func TestDispatchTarget(t *testing.T) {
	env := map[string]string{}
	set := metrics.NewSet()
	var logs strings.Builder
	tg := NewTarget(gatesCfg(t, env), set, zerolog.New(&logs))
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
	check := func(target string, want Verdict) Decision {
		t.Helper()
		d := tg.Check(gatesCtx(t), msg(target), "worker-a", alive)
		if d.Verdict != want || d.Rule != RuleDispatchTarget || d.Reason == "" {
			t.Fatalf("target %q: %v, want %v", target, d, want)
		}
		return d
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
	env["PLAITA_DISABLE_DISPATCH_TARGET"] = "1"
	probed = nil
	d := check("worker-b", VerdictRun)
	if !strings.Contains(d.Reason, "PLAITA_DISABLE_DISPATCH_TARGET=1") || len(probed) != 0 {
		t.Errorf("disabled: %v, probed %v", d, probed)
	}
	if l, dead := set.GetOrCreateCounter(`plaita_dispatch_target_left_total`).Get(), set.GetOrCreateCounter(`plaita_dispatch_target_dead_total`).Get(); l != 1 || dead != 2 {
		t.Errorf("counters left %d dead %d", l, dead)
	}
	if d := NewTarget(nil, nil, zerolog.Nop()).Check(gatesCtx(t), msg("worker-b"), "worker-a", nil); d.Verdict != VerdictRun {
		t.Errorf("no probe: %v", d)
	}
}
