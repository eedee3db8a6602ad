package worker

import (
	"cmp"
	"context"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/rs/zerolog"

	"plaita/internal/callctx"
	"plaita/queue"
	"plaita/roles/settings"
	"plaita/store"
	"plaita/store/keys"
)

// gateOpTimeout bounds one gate's Redis round trips when the caller's context has no deadline
// (callctx.Bounded).
const gateOpTimeout = 10 * time.Second

// ---- deployment epochs ---------------------------------------------------------------------

// LegacyEpoch is the deployment epoch of a deployment that configured none; it is older than
// every other epoch.
const LegacyEpoch = "legacy"

// CompareEpochs orders two deployment epochs (PLAITA_DEPLOYMENT_EPOCH values): -1 when a is
// older than b, 0 when they are the same epoch, +1 when a is newer. ok is false when the two
// cannot be ordered. The rule, after trimming spaces:
//
//  1. identical strings are the same epoch;
//  2. "legacy" is older than any other value;
//  3. two decimal integers (any length, optional sign) compare as numbers ("10" > "9");
//  4. two times — RFC 3339 ("2026-10-01T12:00:00Z", any fraction or offset) or a plain date
//     ("2026-10-01", midnight UTC) — compare as instants (the same instant is the same epoch);
//  5. anything else (e.g. "v2" against "v10", an integer against a time) cannot be ordered.
//
// Strings are never compared lexically: "v10" < "v9" would silently invert the gate.
func CompareEpochs(a, b string) (cmp int, ok bool) {
	a, b = strings.TrimSpace(a), strings.TrimSpace(b)
	switch {
	case a == b:
		return 0, true
	case a == LegacyEpoch:
		return -1, true
	case b == LegacyEpoch:
		return 1, true
	}
	if x, okx := new(big.Int).SetString(a, 10); okx {
		if y, oky := new(big.Int).SetString(b, 10); oky {
			return x.Cmp(y), true
		}
		return 0, false
	}
	if x, okx := epochTime(a); okx {
		if y, oky := epochTime(b); oky {
			return x.Compare(y), true
		}
	}
	return 0, false
}

func epochTime(s string) (time.Time, bool) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, true
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, true
	}
	return time.Time{}, false
}

// ---- tenant status -------------------------------------------------------------------------

// TenantStatus is the worker's tenant-status gate (the rule: store.TenantStatusRead.Admits) and
// its deployment-epoch check. The console writes HASH <root>:tenant_status (tenant → active|disabled) and
// refreshes <root>:tenant_status:epoch with its PLAITA_DEPLOYMENT_EPOCH on every write and
// reconcile.
//
// The epoch gate (settings.TenantStatus.EpochStrict, PLAITA_TENANT_STATUS_EPOCH_STRICT): off,
// on, or (nil, auto) on when this worker has a deployment epoch (PLAITA_DEPLOYMENT_EPOCH other
// than "legacy"). With the gate on, the Redis epoch is compared with ours by CompareEpochs:
//
//   - same epoch: the snapshot is current;
//   - Redis newer than ours: this worker is stale — it decides nothing for any tenant
//     (VerdictHold: a current worker takes the message);
//   - Redis missing, older, or not comparable: the snapshot may be a Redis-only restore whose
//     "active" re-admits a deleted tenant — non-default tenants are held (VerdictHold), the
//     default tenant keeps the #237 fail-open.
//
// Both epoch outcomes count plaita_tenant_status_stale_epoch_total and log a WARNING once per
// distinct pair of epochs.
//
// Then the status, by the one tenant-status rule (store.TenantStatusRead.Admits): admitted →
// VerdictRun, refused → VerdictRefuse; the default tenant's unknown status is admitted with a
// WARNING once per value.
type TenantStatus struct {
	// CacheFor is how long a tenant's status (and the epoch) read is reused (0: read on every
	// delivery). Set it before first use.
	CacheFor time.Duration
	cache    ttlCache[string, store.TenantStatusRead]

	st   *store.Redis
	sp   keys.Space // the platform keys, for reasons and logs
	gate bool       // the epoch gate is on
	ours string     // our deployment epoch, trimmed
	log  zerolog.Logger
	once gateOnce

	staleEpoch, refused *metrics.Counter
}

// NewTenantStatusGate returns the gate over the store's tenant-status keys. The zero settings
// are the defaults: epoch "legacy", gate auto, i.e. off.
func NewTenantStatusGate(st *store.Redis, s settings.TenantStatus, set *metrics.Set, log zerolog.Logger) (*TenantStatus, error) {
	sp, err := keys.For(st.Root(), keys.DefaultTenant)
	if err != nil {
		return nil, err
	}
	ours := cmp.Or(strings.TrimSpace(s.DeploymentEpoch), LegacyEpoch)
	gate := ours != LegacyEpoch
	if s.EpochStrict != nil {
		gate = *s.EpochStrict
	}
	set = setOrNew(set)
	return &TenantStatus{st: st, sp: sp, gate: gate, ours: ours, log: log,
		staleEpoch: set.GetOrCreateCounter(`plaita_tenant_status_stale_epoch_total`),
		refused:    set.GetOrCreateCounter(`plaita_tenant_status_refused_total`),
	}, nil
}

// Check decides whether a start or resume of tenant ("" = default) may be dispatched. An
// error is a Redis failure (transient: leave the message pending) or an invalid tenant slug.
func (s *TenantStatus) Check(ctx context.Context, tenant string) (Decision, error) {
	if err := keys.ValidTenant(tenant); err != nil {
		return Decision{}, err
	}
	if tenant == "" {
		tenant = keys.DefaultTenant
	}
	isDefault := tenant == keys.DefaultTenant

	r, err := s.read(ctx, tenant)
	if err != nil {
		return Decision{}, err
	}
	if s.gate {
		redisEpoch := strings.TrimSpace(r.Epoch)
		if d, held := s.epochDecision(tenant, isDefault, redisEpoch, r.EpochFound && redisEpoch != ""); held {
			return d, nil
		}
	}
	return s.statusDecision(tenant, r), nil
}

// read is the tenant's status (and the epoch), from the cache when it is fresh.
func (s *TenantStatus) read(ctx context.Context, tenant string) (store.TenantStatusRead, error) {
	now := time.Now()
	if r, ok := s.cache.get(tenant, s.CacheFor, now); ok {
		return r, nil
	}
	ctx, cancel := callctx.Bounded(ctx, gateOpTimeout)
	defer cancel()
	r, err := s.st.ReadTenantStatus(ctx, tenant, s.gate)
	// Only an admitting answer is reused: a stale "active" lets a start in for at most
	// CacheFor after the tenant was disabled; a stale "disabled" would dead-letter a start of a
	// tenant that was re-enabled meanwhile, so a refusal is always read afresh.
	if ok, _ := r.Admits(tenant); err == nil && ok {
		s.cache.put(tenant, r, s.CacheFor, now)
	}
	return r, err
}

// statusDecision maps the tenant's status entry to a verdict by the tenant-status rule.
func (s *TenantStatus) statusDecision(tenant string, r store.TenantStatusRead) Decision {
	ok, why := r.Admits(tenant)
	why += " (" + s.sp.TenantStatus() + ")"
	if !ok {
		s.refused.Inc()
		return Decision{VerdictRefuse, RuleTenantStatus, why}
	}
	if r.Unknown() && s.once.first("status\x00"+tenant+"\x00"+r.Status) {
		s.log.Warn().Str("event", "worker.tenant_status_unknown").Str("tenant", tenant).Str("status", r.Status).
			Msg("unknown tenant status value for the default tenant: treated as active (fail-open)")
	}
	return Decision{VerdictRun, RuleTenantStatus, why}
}

// epochDecision applies the epoch gate; held is true when it decided (VerdictHold).
func (s *TenantStatus) epochDecision(tenant string, isDefault bool, redisEpoch string, present bool) (Decision, bool) {
	const ctl = "PLAITA_DEPLOYMENT_EPOCH vs %s; PLAITA_TENANT_STATUS_EPOCH_STRICT=0 turns the gate off"
	key, ours := s.sp.TenantStatusEpoch(), s.ours
	var order int
	var comparable bool
	if present {
		order, comparable = CompareEpochs(redisEpoch, ours)
		if comparable && order == 0 {
			return Decision{}, false
		}
	}
	if present && comparable && order > 0 {
		// Redis is newer: this worker is the stale side, for every tenant.
		s.staleEpoch.Inc()
		reason := fmt.Sprintf("this worker is stale: its deployment epoch %q is older than %q in Redis ("+ctl+")", ours, redisEpoch, key)
		if s.once.first("worker\x00" + ours + "\x00" + redisEpoch) {
			s.log.Warn().Str("event", "worker.tenant_status_stale_epoch").Str("side", "worker").
				Str("ours", ours).Str("redis", redisEpoch).Msg(reason + ": dispatching nothing, messages stay pending for a current worker")
		}
		return Decision{VerdictHold, RuleTenantEpoch, reason}, true
	}
	if isDefault {
		return Decision{}, false // the default tenant keeps the #237 fail-open
	}
	var what string
	switch {
	case !present:
		what = fmt.Sprintf("%s is missing (our epoch %q)", key, ours)
	case !comparable:
		what = fmt.Sprintf("%s %q cannot be ordered against our epoch %q", key, redisEpoch, ours)
	default:
		what = fmt.Sprintf("%s %q is older than our epoch %q", key, redisEpoch, ours)
	}
	s.staleEpoch.Inc()
	reason := fmt.Sprintf("tenant-status snapshot not proven current: %s; non-default tenant %q held ("+ctl+")", what, tenant, key)
	if s.once.first("redis\x00" + ours + "\x00" + redisEpoch + "\x00" + strconv.FormatBool(present)) {
		s.log.Warn().Str("event", "worker.tenant_status_stale_epoch").Str("side", "redis").
			Str("ours", ours).Str("redis", redisEpoch).Bool("present", present).
			Msg("tenant-status snapshot is not proven current (" + what + "): non-default tenants are held until the console reconciles (POST /api/cluster/tenant-status/reconcile)")
	}
	return Decision{VerdictHold, RuleTenantEpoch, reason}, true
}

// ---- tenant running quota ------------------------------------------------------------------

// Quota is the worker's per-tenant running quota (PLAITA_TENANT_MAX_RUNNING,
// PLAITA_TENANT_RUNNING_TTL_SECONDS, PLAITA_TENANT_QUOTA_DEFER_MAX, PLAITA_DISABLE_TENANT_QUOTA;
// settings.Quota, read once at start).
//
// Limit: the tenant's field in HASH <root>:tenant_quota when present (0, negative or not an
// integer there = unlimited for that tenant + WARNING; it never falls back to the env),
// otherwise PLAITA_TENANT_MAX_RUNNING (0 = unlimited) — the rule is store.ResolveQuotaLimit,
// which the console's start check (control.Plane.Quota) applies too.
//
// Slots: ZSET <root>:tenant_running:<tenant>, member = execution id, score = expiry in Unix
// milliseconds (now + PLAITA_TENANT_RUNNING_TTL_SECONDS), so a crashed worker's slot frees
// itself. One Lua script in the store (store.Redis.AdmitRunning), touching only that ZSET
// (cluster-safe), prunes expired slots, counts and adds when under the limit. A start whose
// execution already holds a slot is admitted again (redelivery) and its expiry refreshed. Slots
// are recorded even when the limit is unlimited, so a limit set at run time (an override in
// the HASH) sees the true count.
//
// Only starts are admitted: a resume belongs to an execution that was admitted when it started
// and is never counted again.
//
// Release: the dispatch loop calls Release when it stops running an execution it admitted
// (Admission.Counted), whatever the reason — the execution ended (completed/error/cancelled),
// suspended (wait_event/approval/delay: it no longer runs; its resume is not counted), or the
// run was abandoned (transient failure left pending, lease lost, drain). A redelivered start
// simply re-admits.
type Quota struct {
	// CacheFor is how long a tenant's quota override read is reused (0: read on every start).
	// Set it before first use.
	CacheFor time.Duration
	cache    ttlCache[string, quotaOverride]

	st       *store.Redis
	sp       keys.Space // the platform keys, for reasons and logs
	disabled bool
	envLimit int           // PLAITA_TENANT_MAX_RUNNING, ≥ 0
	envSrc   string        // "PLAITA_TENANT_MAX_RUNNING=<envLimit>", a decision's source
	ttl      time.Duration // slot lifetime
	deferMax int
	log      zerolog.Logger
	once     gateOnce
	// Now is the clock of the slot scores and of the override cache (NewQuotaGate sets
	// time.Now; tests replace it before first use).
	Now func() time.Time

	admitted, deferred, bypassed *metrics.Counter
}

// Defaults of the quota settings left at zero.
const (
	defaultRunningTTL    = 24 * time.Hour
	defaultQuotaDeferMax = 64
)

// NewQuotaGate returns the quota gate over the store's tenant quota keys. The zero settings
// are no limit, 24 h slots and 64 deferrals.
func NewQuotaGate(st *store.Redis, s settings.Quota, set *metrics.Set, log zerolog.Logger) (*Quota, error) {
	sp, err := keys.For(st.Root(), keys.DefaultTenant)
	if err != nil {
		return nil, err
	}
	ttl := s.RunningTTL
	if ttl < time.Millisecond {
		ttl = defaultRunningTTL
	}
	deferMax := s.DeferMax
	if deferMax <= 0 {
		deferMax = defaultQuotaDeferMax
	}
	set = setOrNew(set)
	envLimit := max(s.MaxRunning, 0)
	return &Quota{Now: time.Now, st: st, sp: sp, disabled: s.Disabled, envLimit: envLimit, ttl: ttl, deferMax: deferMax, log: log,
		envSrc:   "PLAITA_TENANT_MAX_RUNNING=" + strconv.Itoa(envLimit),
		admitted: set.GetOrCreateCounter(`plaita_tenant_quota_admitted_total`),
		deferred: set.GetOrCreateCounter(`plaita_tenant_quota_deferred_total`),
		bypassed: set.GetOrCreateCounter(`plaita_tenant_quota_bypass_total`),
	}, nil
}

// Admission is Quota.Admit's answer.
type Admission struct {
	Decision
	// Limit is the effective limit (0 = unlimited); Running the tenant's slots after this
	// admission (or at the refusal).
	Limit, Running int
	// Counted: the execution holds a slot; Release it when the run ends.
	Counted bool
	// DeferCount is the quota_defer_count the re-enqueued copy carries (VerdictDefer).
	DeferCount int
	// RetryAfter is the suggested delay before a deferred copy is run again (VerdictDefer):
	// 1s doubling per deferral, at most 30s, so the PLAITA_TENANT_QUOTA_DEFER_MAX budget spans
	// real time instead of a tight requeue loop.
	RetryAfter time.Duration
}

// Mutate adjusts the copy the dispatch loop re-enqueues (queue.Queue.Requeue's mutate): a
// deferral carries the new quota_defer_count; a bypassed run that has to be re-enqueued later
// carries quota_bypass so it is not deferred again.
func (a Admission) Mutate(e *queue.Envelope) {
	switch a.Verdict {
	case VerdictDefer:
		e.QuotaDeferCount = a.DeferCount
	case VerdictRunWithBypass:
		e.QuotaBypass = true
	}
}

const maxDeferDelay = 30 * time.Second

func deferDelay(n int) time.Duration {
	if n >= 6 {
		return maxDeferDelay
	}
	return min(time.Duration(1<<max(n-1, 0))*time.Second, maxDeferDelay)
}

// limit is the tenant's effective limit (0 = unlimited) and where it came from.
// quotaOverride is one read of a tenant's override in the quota hash.
type quotaOverride struct {
	raw   string
	found bool
}

func (q *Quota) limit(ctx context.Context, tenant string) (int, string, error) {
	now := q.Now()
	o, ok := q.cache.get(tenant, q.CacheFor, now)
	if !ok {
		var err error
		rctx, cancel := callctx.Bounded(ctx, gateOpTimeout)
		o.raw, o.found, err = q.st.TenantQuotaOverride(rctx, tenant)
		cancel()
		if err != nil {
			return 0, "", err
		}
		q.cache.put(tenant, o, q.CacheFor, now)
	}
	l := store.ResolveQuotaLimit(o.raw, o.found, q.envLimit)
	if !l.Override {
		return l.Limit, q.envSrc, nil
	}
	src := fmt.Sprintf("%s[%s]=%q", q.sp.TenantQuota(), tenant, l.Raw)
	if l.Ignored == "" {
		return l.Limit, src, nil
	}
	if q.once.first("quota\x00" + tenant + "\x00" + l.Raw) {
		q.log.Warn().Str("event", "worker.tenant_quota_unlimited").Str("tenant", tenant).Str("value", l.Raw).
			Msgf("%s override is %s: tenant %q runs unlimited (the override never falls back to PLAITA_TENANT_MAX_RUNNING)", q.sp.TenantQuota(), l.Ignored, tenant)
	}
	return 0, src + " (unlimited)", nil
}

// Admit decides about one delivered envelope. An error is a Redis failure (transient: leave
// the message pending) or an unusable envelope.
//
//	resume                                   → VerdictRun (not counted)
//	PLAITA_DISABLE_TENANT_QUOTA=1            → VerdictRun (not counted)
//	slot free, or the execution holds one   → VerdictRun, Counted
//	full, quota_defer_count < DEFER_MAX      → VerdictDefer (DeferCount = count+1)
//	full, count ≥ DEFER_MAX or quota_bypass  → VerdictRunWithBypass, Counted, WARNING
func (q *Quota) Admit(ctx context.Context, env queue.Envelope) (Admission, error) {
	if env.Kind != queue.KindStart {
		return Admission{Decision: Decision{VerdictRun, RuleTenantQuota, "resume of an admitted execution: not counted again"}}, nil
	}
	if q.disabled {
		return Admission{Decision: Decision{VerdictRun, RuleTenantQuota, "per-tenant admission off: PLAITA_DISABLE_TENANT_QUOTA=1"}}, nil
	}
	tenant := env.Tenant()
	if err := keys.ValidTenant(tenant); err != nil {
		return Admission{}, err
	}
	if env.ExecutionID == "" {
		return Admission{}, fmt.Errorf("tenant quota: start without execution_id")
	}
	// The limit is cached: a bound (a timer) only for the calls that reach Redis.
	limit, src, err := q.limit(ctx, tenant)
	if err != nil {
		return Admission{}, fmt.Errorf("tenant quota: %w", err)
	}
	if limit == 0 {
		// No limit applies: no slot is taken, so nothing is counted or released. A limit set
		// later counts the starts admitted from then on.
		return Admission{Decision: Decision{VerdictRun, RuleTenantQuota, "tenant " + strconv.Quote(tenant) + " is unlimited (" + src + "): not counted"}}, nil
	}
	ctx, cancel := callctx.Bounded(ctx, gateOpTimeout)
	defer cancel()
	res, err := q.st.AdmitRunning(ctx, store.RunningAdmit{Tenant: tenant, ExecutionID: env.ExecutionID, Now: q.Now(),
		TTL: q.ttl, Limit: limit, Force: env.QuotaBypass || env.QuotaDeferCount >= q.deferMax})
	if err != nil {
		return Admission{}, fmt.Errorf("tenant quota: %w", err)
	}
	return q.verdict(env, tenant, limit, src, res), nil
}

// verdict turns the store's answer into the Admission, counting and logging it.
func (q *Quota) verdict(env queue.Envelope, tenant string, limit int, src string, res store.RunningAdmission) Admission {
	adm := Admission{Limit: limit, Running: res.Running}
	limitText := "unlimited"
	if limit > 0 {
		limitText = strconv.Itoa(limit)
	}
	switch {
	case res.Admitted && !res.Over:
		q.admitted.Inc()
		adm.Counted = true
		adm.Decision = Decision{VerdictRun, RuleTenantQuota, fmt.Sprintf("tenant %q: %d running of %s (%s)", tenant, adm.Running, limitText, src)}
	case res.Admitted:
		q.bypassed.Inc()
		adm.Counted = true
		why := fmt.Sprintf("deferred %d times (PLAITA_TENANT_QUOTA_DEFER_MAX=%d)", env.QuotaDeferCount, q.deferMax)
		if env.QuotaBypass {
			why = "the message carries quota_bypass"
		}
		adm.Decision = Decision{VerdictRunWithBypass, RuleTenantQuota,
			fmt.Sprintf("tenant %q over its limit %s (%s) but %s: running with quota_bypass (liveness first)", tenant, limitText, src, why)}
		q.log.Warn().Str("event", "worker.tenant_quota_bypass").Str("tenant", tenant).Str("execution_id", env.ExecutionID).
			Int("limit", limit).Int("running", adm.Running).Int("quota_defer_count", env.QuotaDeferCount).Int("defer_max", q.deferMax).
			Msg(adm.Reason)
	default:
		q.deferred.Inc()
		adm.DeferCount = env.QuotaDeferCount + 1
		adm.RetryAfter = deferDelay(adm.DeferCount)
		adm.Decision = Decision{VerdictDefer, RuleTenantQuota,
			fmt.Sprintf("tenant %q at its limit: %d running of %s (%s); deferral %d of %d (PLAITA_TENANT_QUOTA_DEFER_MAX)",
				tenant, adm.Running, limitText, src, adm.DeferCount, q.deferMax)}
	}
	return adm
}

// Release frees the slot of an execution (idempotent; a slot that expired or was never taken
// is fine). See Quota for when the dispatch loop calls it.
func (q *Quota) Release(ctx context.Context, tenant, executionID string) error {
	ctx, cancel := callctx.Bounded(ctx, gateOpTimeout)
	defer cancel()
	if err := q.st.ReleaseRunning(ctx, tenant, executionID); err != nil {
		return fmt.Errorf("tenant quota: %w", err)
	}
	return nil
}

// Running counts the tenant's unexpired slots (for status output and tests).
func (q *Quota) Running(ctx context.Context, tenant string) (int, error) {
	ctx, cancel := callctx.Bounded(ctx, gateOpTimeout)
	defer cancel()
	n, err := q.st.CountRunning(ctx, tenant, q.Now())
	if err != nil {
		return 0, fmt.Errorf("tenant quota: %w", err)
	}
	return n, nil
}
