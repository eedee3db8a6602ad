// Package keys builds every Redis key plaita uses, in one place. Per-execution keys put the
// execution id inside a hash tag ({id}) so that all keys of one execution share a Redis
// Cluster slot and every multi-key script touching them is cluster-safe.
//
// Layout, for root "plaita" (the default) and the default tenant:
//
//	plaita:execution:{<id>}                      execution state (JSON)
//	plaita:execution:index                       ZSET of execution ids by start time
//	plaita:execution:index:ready                 backfill done marker
//	plaita:execution:index:backfill:cursor       SCAN cursor of an interrupted backfill
//	plaita:execution:index:by:<field>:<digest>   ZSET of the ids started with one value of an indexed INPUT field
//	plaita:execution:lease:{<id>}                resume lease (holder + token)
//	plaita:execution:fence:{<id>}                legacy (no longer written; removed with its execution)
//	plaita:execution:fencegen:{<id>}             fence generation: bumped by every lease and every delete, never deleted
//	plaita:execution:cancel:{<id>}               cancel flag
//	plaita:execution:noderetry:{<id>}[:<node>]   node retry counters
//	plaita:execution:noderefetch:{<id>}          total refetch counter
//	plaita:execution:g1wakeups:{<id>}            retry wake-ups
//	plaita:execution:nofail:{<id>}               deterministic failures
//	plaita:execution:affinityhandover:{<id>}     affinity handovers
//	plaita:exec_tombstone:{<id>}                 deletion tombstone
//	plaita:flow:<flow>:<version>, plaita:flow_list, plaita:flow_versions:<flow>
//	plaita:schedule:{sched}:<id>                 cron schedule (HASH: definition and firing state)
//	plaita:schedules:{sched}                     ZSET of the tenant's schedule ids
//	plaita:schedule_due:{sched}                  platform ZSET <tenant>:<id> → next look (Unix ms)
//	plaita:subscription:<id>, plaita:subscription_index:<type>   a wait's record; uncorrelated waits (docs/wakeups.md)
//	plaita:subscription_bucket:<type>:<term digest>              correlated waits of one term value (docs/events.md)
//	plaita:subscription_paths:<type>                              the paths correlated waits of a type are indexed by
//	plaita:event:<event id>, plaita:event_index:<type>[:prune], plaita:events   events (docs/events.md)
//	plaita:event_wake:<execution id>:<suspension>:<event id>               one-shot wake-up marker
//	plaita:event_bus:tenants, plaita:event_bus:cursor, plaita:event_bus:notify  (platform)
//	plaita:registry:instance:<id>, plaita:registry:instances     the instance registry (platform)
//	plaita:registry:control:<id>, plaita:registry:reply:<request> an instance's control channel, a request's answer
//
// Another tenant's keys insert its slug after the root: plaita:acme:execution:{<id>}.
// Platform keys (task queue, tenant status and quota, registry, delay queue) are not per
// tenant. The task queue and its dead-letter stream are configured names (PLAITA_QUEUE_NAME,
// PLAITA_DLQ_KEY); package queue keeps two marker families beside the DLQ:
// {<dlq>}:lettered:<queue>:<id> (a source already dead-lettered, 7d; in the DLQ's Cluster slot —
// <dlq> itself when it carries a hash tag — so that one script writes the entry and its
// marker) and <dlq>:replayed:<id> (a DLQ entry already replayed, 90d); and, for `plaita
// drain-list` (queue/listdrain.go), {<list>}:drain:processing and {<list>}:drain:rejected beside
// a legacy List, {<stream>}:drained:<digest> (an item already sent, 7d) beside the stream.
package keys

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"plaita/model"
)

// DefaultRoot is the key root of a normal deployment; tests pass their own.
const DefaultRoot = "plaita"

// DefaultTenant is the tenant whose keys carry no slug.
const DefaultTenant = "default"

// MaxTenantLen bounds a tenant slug.
const MaxTenantLen = 64

// ErrBadTenant is what every invalid tenant slug matches with errors.Is.
var ErrBadTenant = model.New(model.Invalid, "", "invalid tenant slug")

// ErrBadID is what every invalid execution id matches with errors.Is.
var ErrBadID = model.New(model.Invalid, "", "invalid execution id")

var (
	tenantRe = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)
	// nameRe is the alphabet of author-supplied names that become key segments (event types,
	// flow ids and versions): no ':' (the segment separator), no braces (hash tags), no
	// spaces or glob characters.
	nameRe = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_./-]{0,127}$`)
)

// ErrBadName is what every invalid event type, flow id or version matches with errors.Is.
var ErrBadName = model.New(model.Invalid, "", "invalid key name")

// Family is one family of keys. Name is the key segment right after a tenant's prefix (tenant
// families: "plaita:execution:…", "plaita:acme:execution:…") or after the root (platform
// families: "plaita:registry:…"). A tenant slug equal to any family's name would make that
// tenant's keys read as the default tenant's family, so every name here is reserved (see
// ValidTenant); a new family is added here, and the key-space test fails for any key a Space
// builds outside these families.
type Family struct {
	Name     string
	Platform bool
}

// Families lists every key family, in a fixed order.
func Families() []Family {
	return []Family{
		// Per tenant.
		{Name: "execution"}, {Name: "execution_events"}, {Name: "execution_status"}, {Name: "exec_tombstone"},
		{Name: "flow"}, {Name: "flow_list"}, {Name: "flow_versions"},
		{Name: "subscription"}, {Name: "subscription_index"}, {Name: "subscription_bucket"}, {Name: "subscription_paths"},
		{Name: "approval"}, {Name: "approval_index"},
		{Name: "event"}, {Name: "event_index"}, {Name: "events"}, {Name: "subscriptions"},
		{Name: "event_wake"}, {Name: "event_bus", Platform: true},
		{Name: "schedule"}, {Name: "schedules"}, {Name: "credentials"},
		// Per deployment.
		{Name: "tenant_status", Platform: true}, {Name: "tenant_quota", Platform: true}, {Name: "tenant_running", Platform: true},
		{Name: "registry", Platform: true}, {Name: "delay", Platform: true}, {Name: "dispatch", Platform: true},
		{Name: "schedule_due", Platform: true},
	}
}

// reservedTenant reports whether t is a family name.
func reservedTenant(t string) bool {
	for _, f := range Families() {
		if f.Name == t {
			return true
		}
	}
	return false
}

// ValidName checks an author-supplied name that becomes a key segment (an event type, a flow
// id, a flow version): letters, digits and _ . / -, starting with a letter, digit or _, at
// most 128.
func ValidName(kind, name string) error {
	if !nameRe.MatchString(name) {
		return fmt.Errorf("%w: %s %q: use letters, digits and _ . / - (at most 128; no ':', braces or spaces)", ErrBadName, kind, name)
	}
	return nil
}

// ValidTenant checks a tenant slug: lower-case letters, digits, _ and -, at most 64, not a
// reserved family name. "" and "default" are the default tenant.
func ValidTenant(t string) error {
	if t == "" || t == DefaultTenant {
		return nil
	}
	switch {
	case len(t) > MaxTenantLen:
		return fmt.Errorf("%w %q: longer than %d characters", ErrBadTenant, t, MaxTenantLen)
	case !tenantRe.MatchString(t):
		return fmt.Errorf("%w %q: use lower-case letters, digits, _ and - (no ':', '{', '}' or spaces)", ErrBadTenant, t)
	case reservedTenant(t):
		return fmt.Errorf("%w %q: reserved name (a key family)", ErrBadTenant, t)
	}
	return nil
}

// MaxIDLen bounds an id (execution, event, schedule).
const MaxIDLen = 200

// validID keeps ids to one fixed alphabet — ASCII letters, digits and _ . - @ = +, not starting
// with . - @ = + — so an id can never break out of its hash tag or key segment, reads the same
// in a key and in the JSON of a record (invalid UTF-8 would be replaced there and nowhere else),
// and never looks like a flag on a command line.
//
// It runs on every key a step builds (the lease, the fence, the state…): a byte loop, where the
// regular expression it replaced was 8 % of a worker's CPU per execution.
func validID(id string) error {
	if !idAlphabet(id) {
		return fmt.Errorf("%w %q: use at most %d of the letters, digits and _ . - @ = + (starting with a letter, digit or _)", ErrBadID, id, MaxIDLen)
	}
	return nil
}

// idAlphabet is ^[A-Za-z0-9_][A-Za-z0-9_.@=+-]{0,MaxIDLen-1}$ (the fuzz test holds it to that
// expression).
func idAlphabet(id string) bool {
	if len(id) == 0 || len(id) > MaxIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		switch c := id[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '_':
		case i > 0 && (c == '.' || c == '@' || c == '=' || c == '+' || c == '-'):
		default:
			return false
		}
	}
	return true
}

// ValidID checks an id that becomes a key segment: an execution, event or schedule id.
func ValidID(id string) error { return validID(id) }

// Space builds the keys of one tenant under one root.
type Space struct {
	root   string // "plaita"
	prefix string // "plaita:" or "plaita:<tenant>:"
	tenant string
}

// For returns the key space of a tenant under root ("" = DefaultRoot).
func For(root, tenant string) (Space, error) {
	if root == "" {
		root = DefaultRoot
	}
	if strings.ContainsAny(root, "{}: \t\r\n") {
		return Space{}, fmt.Errorf("invalid key root %q", root)
	}
	if err := ValidTenant(tenant); err != nil {
		return Space{}, err
	}
	s := Space{root: root, prefix: root + ":", tenant: DefaultTenant}
	if tenant != "" && tenant != DefaultTenant {
		s.prefix, s.tenant = root+":"+tenant+":", tenant
	}
	return s, nil
}

// MustFor is For for literal arguments known to be valid.
func MustFor(root, tenant string) Space {
	s, err := For(root, tenant)
	if err != nil {
		panic(err)
	}
	return s
}

// Tenant is the space's tenant ("default" for the default tenant).
func (s Space) Tenant() string { return s.tenant }

// Root is the key root.
func (s Space) Root() string { return s.root }

// Prefix is what every tenant key starts with.
func (s Space) Prefix() string { return s.prefix }

// Execution-scoped key families. Each is a mechanism key except Execution itself.
const (
	FamLease            = "lease"
	FamFence            = "fence"
	FamFenceGen         = "fencegen"
	FamCancel           = "cancel"
	FamNodeRetry        = "noderetry"
	FamNodeRefetch      = "noderefetch"
	FamG1Wakeups        = "g1wakeups"
	FamNoFail           = "nofail"
	FamAffinityHandover = "affinityhandover"
)

// MechanismFamilies lists every execution-scoped mechanism family. A new family is added here
// and nowhere else: IsMechanismKey and deletion both read this list.
func MechanismFamilies() []string {
	return []string{FamLease, FamFence, FamFenceGen, FamCancel, FamNodeRetry, FamNodeRefetch, FamG1Wakeups, FamNoFail, FamAffinityHandover}
}

// CounterFamilies are the mechanism families that count something and expire after 7 days.
func CounterFamilies() []string {
	return []string{FamNodeRetry, FamNodeRefetch, FamG1Wakeups, FamNoFail, FamAffinityHandover}
}

func tag(id string) string { return "{" + id + "}" }

// Execution is the state key of an execution.
func (s Space) Execution(id string) (string, error) {
	if err := validID(id); err != nil {
		return "", err
	}
	return s.prefix + "execution:" + tag(id), nil
}

// ExecutionKeys are the keys of one execution that its lease and its saves touch.
type ExecutionKeys struct {
	State, Tombstone, Lease, FenceGen, Cancel, NoFail string
}

// ExecutionKeys builds them at once: each is what Execution, Tombstone or Mechanism builds, with
// one check of the id and one allocation for the six, where building them one by one checks it
// six times and allocates six strings — on every step's save (210 ns against 870 ns,
// BenchmarkExecutionKeys).
func (s Space) ExecutionKeys(id string) (ExecutionKeys, error) {
	if err := validID(id); err != nil {
		return ExecutionKeys{}, err
	}
	// What comes between the prefix and the tag, in ExecutionKeys' field order.
	mids := [...]string{"execution:", "exec_tombstone:", "execution:" + FamLease + ":", "execution:" + FamFenceGen + ":",
		"execution:" + FamCancel + ":", "execution:" + FamNoFail + ":"}
	n := len(mids) * (len(s.prefix) + len(id) + 2)
	for _, m := range mids {
		n += len(m)
	}
	var b strings.Builder
	b.Grow(n)
	var ends [len(mids)]int
	for i, m := range mids {
		b.WriteString(s.prefix)
		b.WriteString(m)
		b.WriteByte('{')
		b.WriteString(id)
		b.WriteByte('}')
		ends[i] = b.Len()
	}
	all := b.String() // the six share its bytes
	return ExecutionKeys{State: all[:ends[0]], Tombstone: all[ends[0]:ends[1]], Lease: all[ends[1]:ends[2]],
		FenceGen: all[ends[2]:ends[3]], Cancel: all[ends[3]:ends[4]], NoFail: all[ends[4]:ends[5]]}, nil
}

// Mechanism is the key of one mechanism family for an execution.
func (s Space) Mechanism(family, id string) (string, error) {
	if !slices.Contains(MechanismFamilies(), family) {
		return "", fmt.Errorf("unknown key family %q", family)
	}
	if err := validID(id); err != nil {
		return "", err
	}
	return s.prefix + "execution:" + family + ":" + tag(id), nil
}

// NodeRetry is the per-node retry counter of an execution.
func (s Space) NodeRetry(id, node string) (string, error) {
	k, err := s.Mechanism(FamNodeRetry, id)
	if err != nil {
		return "", err
	}
	if node == "" || strings.ContainsAny(node, "{} \t\r\n") {
		return "", fmt.Errorf("invalid node id %q", node)
	}
	return k + ":" + node, nil
}

// NodeRetrySet is the SET naming the nodes of an execution that have a per-node retry
// counter, so deletion finds them without a SCAN. Node ids cannot start with '#'.
func (s Space) NodeRetrySet(id string) (string, error) {
	k, err := s.Mechanism(FamNodeRetry, id)
	if err != nil {
		return "", err
	}
	return k + ":#nodes", nil
}

// ExecutionEvents is the pub/sub channel of an execution's live events (a channel, not a key).
func (s Space) ExecutionEvents(id string) (string, error) {
	if err := validID(id); err != nil {
		return "", err
	}
	return s.prefix + "execution_events:" + tag(id), nil
}

// ExecutionStatus is the pub/sub channel of the tenant's status changes (an execution started,
// suspended, resumed or ended): the live executions list (a channel, not a key).
func (s Space) ExecutionStatus() string { return s.prefix + "execution_status" }

// Subscription is the record of an execution waiting for an event (written by the worker,
// read by the filter).
func (s Space) Subscription(executionID string) (string, error) {
	if err := validID(executionID); err != nil {
		return "", err
	}
	return s.prefix + "subscription:" + executionID, nil
}

// SubscriptionIndex is the ZSET of execution ids waiting for an event type (score = expires_at
// unix ms, +inf without a timeout). The event type comes from a flow: it must be a ValidName.
func (s Space) SubscriptionIndex(eventType string) (string, error) {
	if err := ValidName("event type", eventType); err != nil {
		return "", err
	}
	return s.prefix + "subscription_index:" + eventType, nil
}

// SubscriptionBucket is the ZSET of the correlated waits of an event type indexed under one
// term: path (the EVENT path as a JSON array of strings, the member of SubscriptionPaths) and
// value (its canonical value, engine/state.CorrelationValue). Members are "<execution
// id>:<suspension since in Unix ns>", scores expires_at (Unix ms, +inf without a timeout). The
// term is a digest (SHA-256, 32 hex digits) so that any path and value make one key segment
// without ':' or braces; two terms sharing a digest would only share a bucket, whose members
// the filter still checks (docs/events.md, "Correlation").
func (s Space) SubscriptionBucket(eventType, path, value string) (string, error) {
	if err := ValidName("event type", eventType); err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(path + "\n" + value))
	return s.prefix + "subscription_bucket:" + eventType + ":" + hex.EncodeToString(sum[:16]), nil
}

// SubscriptionPaths is the ZSET of the paths (JSON arrays of strings) the correlated waits of
// an event type are indexed by, each scored with the latest expires_at of a wait indexed under
// it (Unix ms, +inf): what the filter looks up for an event of that type.
func (s Space) SubscriptionPaths(eventType string) (string, error) {
	if err := ValidName("event type", eventType); err != nil {
		return "", err
	}
	return s.prefix + "subscription_paths:" + eventType, nil
}

// Approval is the record of an execution waiting for a human decision.
func (s Space) Approval(executionID string) (string, error) {
	if err := validID(executionID); err != nil {
		return "", err
	}
	return s.prefix + "approval:" + executionID, nil
}

// ApprovalIndex is the ZSET of the tenant's pending approvals (score = since unix ms).
func (s Space) ApprovalIndex() string { return s.prefix + "approval_index" }

// ScheduleTag is the hash tag of every schedule key, of every tenant: a schedule's record, its
// tenant's index and the due index change together in one script, so they share one Cluster
// slot (see docs/schedules.md).
const ScheduleTag = "{sched}"

// Schedule is the HASH of one cron schedule: its definition and its firing state.
func (s Space) Schedule(id string) (string, error) {
	if err := validID(id); err != nil {
		return "", err
	}
	return s.prefix + "schedule:" + ScheduleTag + ":" + id, nil
}

// Schedules is the ZSET of the tenant's schedule ids (score = creation time, Unix ms).
func (s Space) Schedules() string { return s.prefix + "schedules:" + ScheduleTag }

// ScheduleDue is the platform ZSET of every tenant's schedules, member <tenant>:<id>, score =
// when the schedule role must look at it next (Unix ms; +inf while there is nothing to do).
func (s Space) ScheduleDue() string { return s.root + ":schedule_due:" + ScheduleTag }

// Event is the record of a published event (docs/events.md). Event ids have the alphabet of
// execution ids.
func (s Space) Event(eventID string) (string, error) {
	if err := validID(eventID); err != nil {
		return "", fmt.Errorf("event id: %w", err)
	}
	return s.prefix + "event:" + eventID, nil
}

// EventIndex is the ZSET of the tenant's events of one type (member event id, score = publish
// time in Unix ms). The type is a ValidName.
func (s Space) EventIndex(eventType string) (string, error) {
	if err := ValidName("event type", eventType); err != nil {
		return "", err
	}
	return s.prefix + "event_index:" + eventType, nil
}

// EventIndexPrune is the throttle of the write-side prune of an event type's index (types have
// no ':', so it cannot be another type's index).
func (s Space) EventIndexPrune(eventType string) (string, error) {
	idx, err := s.EventIndex(eventType)
	if err != nil {
		return "", err
	}
	return idx + ":prune", nil
}

// EventFeed is the ZSET of every event of the tenant (member "<type> <id>", score = publish
// time in Unix ms): what the filter's reconciler scans by time and the index janitor sweeps.
func (s Space) EventFeed() string { return s.prefix + "events" }

// EventWake is the one-shot marker of one wake-up: an event delivered to one suspension (the
// suspension's token, e.g. its start in Unix ns) of one execution.
func (s Space) EventWake(executionID, suspension, eventID string) (string, error) {
	for _, id := range []string{executionID, suspension, eventID} {
		if err := validID(id); err != nil {
			return "", fmt.Errorf("event wake-up: %w", err)
		}
	}
	return s.prefix + "event_wake:" + executionID + ":" + suspension + ":" + eventID, nil
}

// Tombstone is the deletion tombstone of an execution.
func (s Space) Tombstone(id string) (string, error) {
	if err := validID(id); err != nil {
		return "", err
	}
	return s.prefix + "exec_tombstone:" + tag(id), nil
}

// Index is the ZSET of execution ids by start time; IndexReady and IndexCursor belong to its
// backfill.
// Credentials is the tenant's sealed credentials: a HASH, name → record.
func (s Space) Credentials() string { return s.prefix + "credentials" }

func (s Space) Index() string       { return s.prefix + "execution:index" }
func (s Space) IndexReady() string  { return s.prefix + "execution:index:ready" }
func (s Space) IndexCursor() string { return s.prefix + "execution:index:backfill:cursor" }

// indexFieldRe is the alphabet of indexed field names (engine/index.go checks the same rule
// when a flow is parsed).
var indexFieldRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)

// IndexBy is the ZSET of the executions started with one value of an indexed INPUT field
// (docs/flows.md, "Indexed fields"): members are execution ids, scores their start time (Unix
// ms), as in Index, so that one cursor pages either. value is the canonical value
// (engine/state.CorrelationValue); the key holds its digest (SHA-256, 32 hex digits), one key
// segment whatever the value. Two values sharing a digest would only share a key, whose
// members a listing checks against their states. It lives under the index's name, so
// IsMechanismKey knows it and the backfill's SCAN of execution keys passes it over; it has no
// hash tag: its own slot in a Cluster, written by a command of its own there.
func (s Space) IndexBy(field, value string) (string, error) {
	if !indexFieldRe.MatchString(field) {
		return "", fmt.Errorf("%w: indexed field %q: use letters, digits and _ (not starting with a digit, at most 64)", ErrBadName, field)
	}
	sum := sha256.Sum256([]byte(value))
	return s.prefix + "execution:index:by:" + field + ":" + hex.EncodeToString(sum[:16]), nil
}

// IndexByPattern matches every IndexBy key of the tenant (for plaita reindex's SCAN, never a
// request path).
func (s Space) IndexByPattern() string { return s.prefix + "execution:index:by:*" }

// ExecutionPattern matches every execution-family key of the tenant (for the backfill SCAN,
// never the hot path); IsMechanismKey sorts out what is state.
func (s Space) ExecutionPattern() string { return s.prefix + "execution:*" }

// Flow is the key of a published flow version. Flow ids and versions are ValidNames (callers
// check them when a flow is published; a reader of an invalid name finds nothing).
func (s Space) Flow(flowID, version string) string {
	return s.prefix + "flow:" + flowID + ":" + version
}
func (s Space) FlowList() string                  { return s.prefix + "flow_list" }
func (s Space) FlowVersions(flowID string) string { return s.prefix + "flow_versions:" + flowID }

// Platform keys: one per deployment, whatever the tenant.
func (s Space) TenantStatus() string      { return s.root + ":tenant_status" }
func (s Space) TenantStatusEpoch() string { return s.root + ":tenant_status:epoch" }
func (s Space) TenantQuota() string       { return s.root + ":tenant_quota" }
func (s Space) TenantRunning() string     { return s.root + ":tenant_running:" + s.tenant }
func (s Space) RegistryInstances() string { return s.root + ":registry:instances" }

// The event bus of a key root (platform keys: one per deployment, every tenant):
// EventBusTenants is the ZSET of tenants with events (score = last publish, Unix ms),
// EventBusCursor the HASH tenant → reconcile cursor (Unix ms), EventBusNotify the pub/sub
// channel every publish notifies (a channel, not a key).
func (s Space) EventBusTenants() string { return s.root + ":event_bus:tenants" }
func (s Space) EventBusCursor() string  { return s.root + ":event_bus:cursor" }
func (s Space) EventBusNotify() string  { return s.root + ":event_bus:notify" }
func (s Space) RegistryInstance(instance string) string {
	return s.root + ":registry:instance:" + instance
}

// RegistryControl is the pub/sub channel an instance listens on for `plaita ctl` and the
// console's drain (a channel, not a key); RegistryReply is the short-lived List one request's
// answer is pushed to (store/control.go).
func (s Space) RegistryControl(instance string) string {
	return s.root + ":registry:control:" + instance
}
func (s Space) RegistryReply(request string) string { return s.root + ":registry:reply:" + request }

// ExecutionID extracts the execution id from a state key of this space ("" when key is not
// one).
func (s Space) ExecutionID(key string) string {
	rest, ok := strings.CutPrefix(key, s.prefix+"execution:{")
	if !ok || !strings.HasSuffix(rest, "}") {
		return ""
	}
	id := strings.TrimSuffix(rest, "}")
	if validID(id) != nil {
		return ""
	}
	return id
}

// IsOwnKey reports whether key is in plaita's key space under root ("" = DefaultRoot): a key
// under the root's prefix (every family above, every tenant's), or one whose hash tag opens
// with it (package queue's markers beside the default dead-letter stream,
// {plaita:flow:queue:dlq}:lettered:…). plaita dev tells a Redis of its own from somebody
// else's by it (store.SurveyKeys).
func IsOwnKey(root, key string) bool {
	if root == "" {
		root = DefaultRoot
	}
	return strings.HasPrefix(key, root+":") || strings.HasPrefix(key, "{"+root+":")
}

// IsMechanismKey reports whether key is a mechanism key of any tenant under root: lease,
// fence, fence generation, cancel, counters, the index and its markers, tombstones. Such a key
// must never be read as an execution state.
func IsMechanismKey(root, key string) bool {
	if root == "" {
		root = DefaultRoot
	}
	rest, ok := strings.CutPrefix(key, root+":")
	if !ok {
		return false
	}
	first, after, _ := strings.Cut(rest, ":")
	if first != "execution" && first != "exec_tombstone" {
		// A tenant slug comes first: "acme:execution:…".
		if ValidTenant(first) != nil {
			return false
		}
		rest = after
		first, after, _ = strings.Cut(rest, ":")
	}
	switch first {
	case "exec_tombstone":
		return true
	case "execution":
		family, _, _ := strings.Cut(after, ":")
		return family == "index" || slices.Contains(MechanismFamilies(), family)
	}
	return false
}
