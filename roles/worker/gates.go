package worker

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/VictoriaMetrics/metrics"
	"github.com/rs/zerolog"

	"plaita/queue"
	"plaita/roles/settings"
	"plaita/store"
	"plaita/store/keys"
)

// Admission gates (README "Operations"). Each gate is a small
// value that looks at one delivered envelope and returns a Decision; none of them touches
// the stream. The dispatch loop acts on the verdict:
//
//	VerdictRun            run the task (nothing else to do).
//	VerdictRunWithBypass  quota: run it over the tenant's limit (the slot is counted).
//	VerdictRunAnyway      affinity: the handover bound is reached; run it here.
//	VerdictRefuse         never run it: dead-letter it (or, for a start whose state exists,
//	                      write an error state and ack). Decision.Reason goes into the record.
//	VerdictHold           undecidable right now (stale tenant-status snapshot, stale worker):
//	                      neither run nor ack nor dead-letter; leave it pending so reclaim
//	                      hands it to a worker that can decide (a delivery is burnt per reclaim,
//	                      so a lasting condition still ends in the DLQ after max deliveries).
//	VerdictDefer          quota: Queue.Requeue(ctx, d, adm.Mutate) — a copy with
//	                      quota_defer_count+1 — ideally after Admission.RetryAfter.
//	VerdictHandOver       affinity / deny repos: Queue.Requeue(ctx, d, nil) so another worker
//	                      may take it; the source is acked by Requeue.
//	VerdictLeaveForTarget the message names another live instance: do not run and do not ack;
//	                      leave it pending for the target (or do not read it at all).
//
// Order of the gates in the loop (cheapest and most final first): DenyRepos, Target,
// TenantStatus, Affinity, Quota (last, because a Run from Quota takes a slot that must be
// Released when the run ends).

// Verdict is what a gate decided about one task.
type Verdict int

// The verdicts; see the package comment of this file for what the dispatch loop does with each.
const (
	VerdictRun Verdict = iota
	VerdictRefuse
	VerdictHold
	VerdictDefer
	VerdictRunWithBypass
	VerdictHandOver
	VerdictRunAnyway
	VerdictLeaveForTarget
)

var verdictNames = [...]string{"run", "refuse", "hold", "defer", "run_with_bypass", "hand_over", "run_anyway", "leave_for_target"}

func (v Verdict) String() string {
	if v >= 0 && int(v) < len(verdictNames) {
		return verdictNames[v]
	}
	return fmt.Sprintf("verdict(%d)", int(v))
}

// Runs reports whether the task is to be run on this worker now.
func (v Verdict) Runs() bool {
	return v == VerdictRun || v == VerdictRunWithBypass || v == VerdictRunAnyway
}

// The gates, as they appear in Decision.Rule.
const (
	RuleTenantStatus   = "tenant_status"
	RuleTenantEpoch    = "tenant_status_epoch"
	RuleTenantQuota    = "tenant_quota"
	RuleDenyRepos      = "deny_repos"
	RuleAffinity       = "affinity"
	RuleDispatchTarget = "dispatch_target"
)

// Decision is one gate's answer: the verdict, the gate (Rule) and a reason that names the rule
// and the variable or key that controls it (for logs and dead-letter records).
type Decision struct {
	Verdict Verdict
	Rule    string
	Reason  string
}

func (d Decision) String() string { return d.Verdict.String() + " (" + d.Rule + "): " + d.Reason }

// Runs reports whether the task is to be run on this worker now.
func (d Decision) Runs() bool { return d.Verdict.Runs() }

// gateOnce remembers which warnings were logged so that a condition seen on every message is
// logged once per distinct key (bounded: the memory is dropped past gateOnceMax keys).
type gateOnce struct {
	mu   sync.Mutex
	seen map[string]bool
}

const gateOnceMax = 1024

func (o *gateOnce) first(key string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.seen == nil || len(o.seen) >= gateOnceMax {
		o.seen = map[string]bool{}
	}
	if o.seen[key] {
		return false
	}
	o.seen[key] = true
	return true
}

func setOrNew(set *metrics.Set) *metrics.Set {
	if set == nil {
		return metrics.NewSet()
	}
	return set
}

// ---- deny repos ----------------------------------------------------------------------------

// RepoDeny is the PLAITA_WORKER_DENY_REPOS gate (settings.WorkerDenyRepos, read once at
// start). The zero value denies nothing.
type RepoDeny struct{ repos []string }

// NewRepoDeny returns the gate denying starts of repos. Items are trimmed; empty items are
// dropped (they never match).
func NewRepoDeny(repos []string) RepoDeny {
	var keep []string
	for _, item := range repos {
		if item = strings.TrimSpace(item); item != "" {
			keep = append(keep, item)
		}
	}
	return RepoDeny{repos: keep}
}

// Denied reports whether env is a start whose repo is listed in PLAITA_WORKER_DENY_REPOS. Items
// are compared exactly after trimming. Resumes are never denied: their execution already runs
// somewhere in this repo's pool and must be able to finish.
func (r RepoDeny) Denied(env queue.Envelope) bool {
	repo := strings.TrimSpace(env.Repo)
	if env.Kind != queue.KindStart || repo == "" {
		return false
	}
	return slices.Contains(r.repos, repo)
}

// Check is Denied as a Decision: VerdictHandOver (let another worker take it) or VerdictRun.
func (r RepoDeny) Check(env queue.Envelope) Decision {
	if r.Denied(env) {
		return Decision{VerdictHandOver, RuleDenyRepos,
			fmt.Sprintf("repo %q is listed in PLAITA_WORKER_DENY_REPOS on this worker", strings.TrimSpace(env.Repo))}
	}
	return Decision{VerdictRun, RuleDenyRepos, "repo not listed in PLAITA_WORKER_DENY_REPOS"}
}

// ---- affinity ------------------------------------------------------------------------------

// DefaultMaxHandovers is how many times an execution is handed over for affinity before a
// worker runs it anyway.
const DefaultMaxHandovers = 3

// Affinity is the repo affinity gate: a flow that names a repo runs on a worker that has that
// repo as a directory under its workspace root (PLAITA_NODES_WORKSPACE_ROOT, resolved by
// writefile.ResolveRoot and passed in). A worker without it hands the task over; the number of
// handovers is counted per execution (keys.FamAffinityHandover, 7d TTL) and after MaxHandovers
// the next worker runs it anyway with a WARNING (liveness first: a pool where no worker has the
// repo must still make progress). PLAITA_DISABLE_AFFINITY=1 (settings.Affinity) skips the
// check.
type Affinity struct {
	disabled bool
	st       *store.Redis
	root     string
	log      zerolog.Logger
	// MaxHandovers bounds the handovers of one execution (DefaultMaxHandovers; <1 = 0, i.e.
	// run anyway at once when the repo is missing).
	MaxHandovers int

	handover, runAnyway, invalid *metrics.Counter
	once                         gateOnce
}

// NewAffinityGate returns the gate. root is this worker's workspace root ("" = unknown or an
// unrestricted jail: the check is skipped). st counts handovers.
func NewAffinityGate(st *store.Redis, s settings.Affinity, root string, set *metrics.Set, log zerolog.Logger) *Affinity {
	set = setOrNew(set)
	return &Affinity{
		disabled: s.Disabled, st: st, root: root, log: log, MaxHandovers: DefaultMaxHandovers,
		handover:  set.GetOrCreateCounter(`plaita_affinity_handover_total`),
		runAnyway: set.GetOrCreateCounter(`plaita_affinity_run_anyway_total`),
		invalid:   set.GetOrCreateCounter(`plaita_affinity_invalid_repo_total`),
	}
}

// ErrInvalidRepo is what ValidRepoName returns for a repo name that could leave the workspace.
var ErrInvalidRepo = errors.New("invalid repo name")

// ValidRepoName accepts a single path element: not empty, not absolute, no '/' or '\', no
// "..", no NUL, not ".".
func ValidRepoName(repo string) error {
	switch {
	case repo == "" || repo == ".":
		return fmt.Errorf("%w %q: empty or '.'", ErrInvalidRepo, repo)
	case filepath.IsAbs(repo) || strings.ContainsAny(repo, `/\`):
		return fmt.Errorf("%w %q: absolute or containing a path separator (one directory name under the workspace root)", ErrInvalidRepo, repo)
	case strings.Contains(repo, ".."):
		return fmt.Errorf("%w %q: contains '..'", ErrInvalidRepo, repo)
	case strings.ContainsRune(repo, 0):
		return fmt.Errorf("%w %q: contains NUL", ErrInvalidRepo, repo)
	}
	return nil
}

// Check decides about env for a flow whose definition names flowRepo ("" = no affinity).
// Applies to starts and resumes alike (a resumed execution needs its repo too). An error is a
// Redis failure of the handover counter (transient: leave the message pending).
//
//	disabled / no repo / no root      → VerdictRun
//	invalid repo name                 → VerdictRefuse (it can run nowhere; never a path escape)
//	<root>/<repo> is a directory      → VerdictRun
//	missing, handovers ≤ MaxHandovers → VerdictHandOver (the counter was incremented)
//	missing, past the bound           → VerdictRunAnyway + WARNING
func (a *Affinity) Check(ctx context.Context, env queue.Envelope, flowRepo string) (Decision, error) {
	if a.disabled {
		return Decision{VerdictRun, RuleAffinity, "affinity check skipped: PLAITA_DISABLE_AFFINITY=1"}, nil
	}
	if flowRepo == "" {
		return Decision{VerdictRun, RuleAffinity, "the flow names no repo"}, nil
	}
	if err := ValidRepoName(flowRepo); err != nil {
		a.invalid.Inc()
		return Decision{VerdictRefuse, RuleAffinity, fmt.Sprintf("flow repo refused: %v", err)}, nil
	}
	if a.root == "" {
		if a.once.first("noroot") {
			a.log.Warn().Str("event", "worker.affinity_no_root").
				Msg("no workspace root (PLAITA_NODES_WORKSPACE_ROOT unresolved or the jail is off): repo affinity is not checked")
		}
		return Decision{VerdictRun, RuleAffinity, "no workspace root (PLAITA_NODES_WORKSPACE_ROOT): affinity not checked"}, nil
	}
	dir := filepath.Join(a.root, flowRepo)
	fi, err := os.Stat(dir)
	if err == nil && fi.IsDir() {
		return Decision{VerdictRun, RuleAffinity, fmt.Sprintf("repo %q present at %s", flowRepo, dir)}, nil
	}
	why := "is not a directory"
	switch {
	case errors.Is(err, fs.ErrNotExist):
		why = "does not exist"
	case err != nil:
		why = "cannot be inspected: " + err.Error()
	}
	ts, err := a.st.Tenant(env.Tenant())
	if err != nil {
		return Decision{}, err
	}
	n, err := ts.Incr(ctx, keys.FamAffinityHandover, env.ExecutionID)
	if err != nil {
		return Decision{}, fmt.Errorf("affinity handover counter of %s: %w", env.ExecutionID, err)
	}
	if n <= int64(max(a.MaxHandovers, 0)) {
		a.handover.Inc()
		return Decision{VerdictHandOver, RuleAffinity, fmt.Sprintf("repo %q %s under the workspace root %s (PLAITA_NODES_WORKSPACE_ROOT): handover %d of %d (PLAITA_DISABLE_AFFINITY=1 turns the check off)",
			flowRepo, why, a.root, n, a.MaxHandovers)}, nil
	}
	a.runAnyway.Inc()
	a.log.Warn().Str("event", "worker.affinity_run_anyway").Str("execution_id", env.ExecutionID).Str("tenant", env.Tenant()).
		Str("repo", flowRepo).Str("root", a.root).Int64("handovers", n-1).
		Msg("no worker with the repo took this execution within the handover bound: running it here anyway")
	return Decision{VerdictRunAnyway, RuleAffinity, fmt.Sprintf("repo %q %s under %s, handed over %d times (bound %d): running anyway",
		flowRepo, why, a.root, n-1, a.MaxHandovers)}, nil
}

// ---- dispatch target -----------------------------------------------------------------------

// Target is the target_instance_id gate: a message addressed to another live instance is left
// for it. PLAITA_DISABLE_DISPATCH_TARGET=1 (settings.Target) ignores targets.
type Target struct {
	disabled bool
	log      zerolog.Logger
	left     *metrics.Counter
	dead     *metrics.Counter
	once     gateOnce
}

// NewTargetGate returns the gate.
func NewTargetGate(s settings.Target, set *metrics.Set, log zerolog.Logger) *Target {
	set = setOrNew(set)
	return &Target{disabled: s.Disabled, log: log,
		left: set.GetOrCreateCounter(`plaita_dispatch_target_left_total`),
		dead: set.GetOrCreateCounter(`plaita_dispatch_target_dead_total`)}
}

// Check decides about env on the instance self. alive reports whether an instance is
// registered and live. A failing liveness probe lets this worker run the task: the target is a
// preference, the execution lease keeps the run single.
//
//	disabled / no target / target is self / target dead / probe failed → VerdictRun
//	target is another live instance                                  → VerdictLeaveForTarget
func (t *Target) Check(ctx context.Context, env queue.Envelope, self string, alive func(ctx context.Context, id string) (bool, error)) Decision {
	target := strings.TrimSpace(env.TargetInstanceID)
	switch {
	case t.disabled:
		return Decision{VerdictRun, RuleDispatchTarget, "target_instance_id ignored: PLAITA_DISABLE_DISPATCH_TARGET=1"}
	case target == "":
		return Decision{VerdictRun, RuleDispatchTarget, "no target_instance_id"}
	case target == self:
		return Decision{VerdictRun, RuleDispatchTarget, "target_instance_id is this instance"}
	case alive == nil:
		return Decision{VerdictRun, RuleDispatchTarget, fmt.Sprintf("target %q: no liveness probe, running here", target)}
	}
	ok, err := alive(ctx, target)
	if err != nil {
		if t.once.first("err\x00" + target) {
			t.log.Warn().Err(err).Str("event", "worker.dispatch_target_probe_failed").Str("target", target).
				Msg("cannot tell whether the target instance is alive: running the task here")
		}
		return Decision{VerdictRun, RuleDispatchTarget, fmt.Sprintf("target %q: liveness unknown (%v), running here", target, err)}
	}
	if !ok {
		t.dead.Inc()
		return Decision{VerdictRun, RuleDispatchTarget, fmt.Sprintf("target %q is not alive: running here", target)}
	}
	t.left.Inc()
	return Decision{VerdictLeaveForTarget, RuleDispatchTarget,
		fmt.Sprintf("target_instance_id %q is another live instance (PLAITA_DISABLE_DISPATCH_TARGET=1 ignores targets)", target)}
}
