package config

import (
	"fmt"
	"math"
	"math/big"
	"net"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Sections group variables in doctor and in docs/configuration.md.
const (
	secConnection = "Connection, queue, retention, observability"
	secWorker     = "Worker, capacity, retention"
	secSwitches   = "Rollback switches"
	secSandbox    = "Code sandbox"
	secExprHTTP   = "Expressions, HTTP, background work"
	secConsole    = "Console"
	secPython     = "Python-only knobs (accepted, no effect in this build)"
)

const (
	defaultQueue      = "plaita:flow:queue"
	defaultRedisURL   = "redis://localhost:6379/0"
	defaultStateTTL   = 30
	defaultMaxAge     = 2592000
	defaultTombstone  = 2592000
	secondsPerDay     = 86400
	backendDocker     = "docker"
	backendSubprocess = "subprocess"
	backendRestricted = "restricted"
)

var (
	languages = []string{"python", "js"}
	backends  = []string{backendDocker, backendSubprocess, backendRestricted}
)

// registry is the one list of every variable plaita reads, in the order they are resolved:
// a variable whose default or check depends on another comes after it.
func registry() []*Var {
	var out []*Var
	section := func(name string, vars ...*Var) {
		for _, v := range vars {
			v.Section = name
		}
		out = append(out, vars...)
	}
	section(secConnection,
		identityVar("PLAITA_REDIS_URL", CapRedis, defaultRedisURL).fallback("REDIS_URL").flag("redis-url").secretURL().
			validated(redisURLProblem).doc("Redis connection for the worker and the services."),
		identityVar("PLAITA_QUEUE_NAME", CapProducer, defaultQueue).fallback("QUEUE_NAME").flag("queue-name").semantic().
			doc("Task stream the worker consumes and the services fall back to."),
		identityVar("PLAITA_CONSUMER_GROUP", CapConsumer, "plaita-workers").semantic().
			doc("Consumer group; renaming it is a new group (old pending entries are not reclaimed)."),
		stringVar("PLAITA_CONSUMER_GROUP_START_ID", CapConsumer, "0", dflt().W()).validated(streamIDProblem).
			doc("Where a new consumer group starts: 0 replays the stream, $ starts at the end."),
		derivedIdentity("PLAITA_INSTANCE_ID", CapProcess, "<role>-<pid>", func(c *Config) string { return fmt.Sprintf("%s-%d", c.role, c.pid) }).flag("instance-id").
			doc("Registry instance id; generated when unset."),
		derivedString("PLAITA_CONSUMER_NAME", CapConsumer, "the instance id", dflt().W(),
			func(c *Config) string { return c.str("PLAITA_INSTANCE_ID") }).
			doc("Consumer name of this instance inside the group."),
		numVar("PLAITA_CLAIM_MIN_IDLE_MS", CapConsumer, numRule{def: 60000, zero: keep(), neg: dflt().R(), bad: dflt().R(),
			want: "a non-negative integer (milliseconds)"}).semantic().checked(warnIfZero("pending entries become reclaimable at once and can be taken from live sibling workers")).
			doc("Minimum idle time before a pending entry may be reclaimed."),
		numVar("PLAITA_LEASE_TTL_SECONDS", CapConsumer, numRule{def: 120, zero: dflt().R(), neg: dflt().R(), bad: dflt().R(),
			want: "a positive integer (seconds)"}).semantic().doc("Resume lease TTL."),
		numVar("PLAITA_MAX_DELIVERIES", CapConsumer, numRule{def: 5, zero: dflt().R(), neg: dflt().R(), bad: dflt().R(),
			want: "a positive integer"}).semantic().doc("Deliveries before a message is dead-lettered."),
		identityVar("PLAITA_DEPLOYMENT_EPOCH", CapTenant, "legacy").semantic().
			doc("Deployment epoch anchoring plaita:tenant_status:epoch."),
		intVar("PLAITA_TENANT_STATUS_RECONCILE_SECONDS", CapConsoleAPI, 60, keep(), dflt().W(), dflt().W()).
			checked(warnIfZero("periodic tenant-status reconcile is off; a Redis-only restore is corrected only by POST /api/cluster/tenant-status/reconcile")).
			doc("Period of the console's tenant-status reconcile; 0 turns it off."),
		enumVar("PLAITA_TENANT_STATUS_EPOCH_STRICT", CapConsumer, enumRule{def: "auto", allowed: []string{"auto", "1", "0"},
			alias: map[string]string{"": "auto"}, bad: dflt()}).semantic().defDoc("unset (on when an epoch exists)").
			rule("unset → on when an epoch exists; 1 → on; 0 → epoch gate off + WARNING; invalid → auto + WARNING").
			checked(func(v any, _ *Config) (any, string) {
				if v == "0" {
					return v, "tenant-status epoch gate is off: a stale snapshot's active status admits deleted tenants again"
				}
				return v, ""
			}).doc("Worker's tenant-status epoch gate."),
		floatVar("PLAITA_EXECUTION_DEADLINE_SECONDS", CapEngine, 1800, dflt().W(), dflt().W(), dflt().W()).timing(TimingCall).semantic().
			doc("Execution budget when the flow sets no timeout."),
		intVar("PLAITA_TASK_MAX_AGE_SECONDS", CapConsumer, defaultMaxAge, keep(), to(0).W(), dflt().W()).timing(TimingCall).semantic().
			checked(warnIfZero("the task age gate is off: once a tombstone expires nothing stops a stale task")).
			doc("Maximum age of a start/resume task; older ones are acked and dropped."),
		derivedIdentity("PLAITA_DLQ_KEY", CapConsumer, "<queue>:dlq", func(c *Config) string { return c.str("PLAITA_QUEUE_NAME") + ":dlq" }).
			semantic().doc("Dead-letter stream."),
		intVar("PLAITA_EVENT_TTL_SECONDS", CapEvents, 604800, dflt().W(), dflt().W(), dflt().W()).timing(TimingCall).semantic().
			doc("TTL of event records and type indexes."),
		intVar("PLAITA_EVENT_INDEX_SWEEP_INTERVAL", CapEvents, 60, dflt().W(), dflt().W(), dflt().W()).timing(TimingCtor).
			doc("Event/subscription index janitor period (seconds)."),
		intVar("PLAITA_EVENT_INDEX_SWEEP_BUDGET", CapEvents, 500, to(1).W(), to(1).W(), dflt().W()).timing(TimingCtor).
			doc("Index members checked per janitor tick and store."),
		boolVar("PLAITA_DISABLE_EVENT_INDEX_SWEEP", CapEvents, KindStrip1, false).
			checked(warnIfOn("the event index janitor is off: expired members of cold buckets are no longer pruned")).
			doc("Turns the event index janitor off."),
		boolVar("PLAITA_DISABLE_EVENT_INDEX_PRUNE_ON_WRITE", CapEvents, KindStrip1, false).timing(TimingCall).
			doc("Turns the write-side index prune off."),
		numVar("PLAITA_METRICS_PORT", CapProcess, upTo(numRule{def: 0, zero: keep(), neg: to(0), bad: to(0).W(),
			want: "a port number"}, 65535)).flag("metrics-port").defDoc("0 (off)").
			doc("Port of the role's /metrics, /healthz and /readyz endpoint; 0 = off."),
		stringVar("PLAITA_METRICS_HOST", CapProcess, "0.0.0.0", dflt()).doc("Listen address of /metrics."),
		stringVar("OTEL_EXPORTER_OTLP_ENDPOINT", CapProcess, "", dflt()).defDoc("unset (tracing off)").secretURL().validated(otlpEndpointProblem).
			doc("OTLP endpoint (base URL) the role sends its trace spans to; unset: tracing is off (docs/tracing.md)."),
		stringVar("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", CapProcess, "", dflt()).defDoc("unset").secretURL().validated(otlpEndpointProblem).
			doc("OTLP traces endpoint, used as it is (no /v1/traces added); wins over OTEL_EXPORTER_OTLP_ENDPOINT."),
		enumVar("OTEL_EXPORTER_OTLP_PROTOCOL", CapProcess, enumRule{def: "http/protobuf", allowed: []string{"http/protobuf", "grpc"}, bad: dflt().R()}).
			doc("OTLP transport of the spans (http/json is not supported)."),
		stringVar("OTEL_EXPORTER_OTLP_HEADERS", CapProcess, "", dflt()).defDoc("unset").secret().validated(otlpHeadersProblem).
			doc("Headers sent with every export: key=value pairs, comma-separated, values URL-encoded."),
		derivedString("OTEL_SERVICE_NAME", CapProcess, "plaita-<role>", dflt(), func(c *Config) string { return "plaita-" + string(c.role) }).
			doc("service.name of the role's spans."),
		enumVar("OTEL_TRACES_SAMPLER", CapProcess, enumRule{def: "parentbased_always_on", allowed: []string{"parentbased_always_on",
			"parentbased_always_off", "parentbased_traceidratio", "always_on", "always_off", "traceidratio"}, bad: dflt().R()}).
			doc("Which traces are recorded; a role continuing a trace follows its sampled flag under parentbased_*."),
		numVar("OTEL_TRACES_SAMPLER_ARG", CapProcess, upTo(numRule{def: 1, isFloat: true, zero: keep(), neg: dflt().W().R(), bad: dflt().W().R(),
			want: "a ratio from 0 to 1"}, 1)).doc("The ratio of the traceidratio samplers."),
		numVar("OTEL_BSP_SCHEDULE_DELAY", CapProcess, numRule{def: 5000, zero: dflt().W(), neg: dflt().W().R(), bad: dflt().W().R(),
			want: "a positive integer (milliseconds)"}).doc("The longest a finished span waits before it is sent (milliseconds)."),
		boolVar("OTEL_SDK_DISABLED", CapProcess, KindStrictBool, false).doc("Turns tracing off even with an endpoint set."),
		stringVar("PLAITA_ALERT_WEBHOOK", CapEngine, "", dflt()).secretURL().defDoc("unset").validated(webhookProblem).
			doc("JSON POST target for dead-letter and zombie alerts."),
		boolVar("PLAITA_ALLOW_EXPERIMENTAL_DB", CapEngine, KindExact01, false).timing(TimingCall).noEffect().
			doc("Experimental SQL event bus/storage; this build has none (Redis is the control plane)."),
		stringVar("PLAITA_NODES_WORKSPACE_ROOT", CapEngine, "", dflt().W()).defDoc("derived (writefile jail)").semantic().
			rule("explicit value used verbatim; blank → derived + WARNING").doc("Root of the writefile jail."),
		boolVar("PLAITA_ALLOW_UNRESTRICTED_WRITES", CapEngine, KindExact01, false).semantic().
			checked(warnIfOn("the writefile jail is off: flows may write anywhere the worker can; never use this multi-tenant")).
			doc("Only exact 1 turns the writefile jail off."),
	)
	section(secWorker,
		numVar("PLAITA_TENANT_MAX_RUNNING", CapTenant, numRule{def: 0, zero: to(0).W(), neg: to(0).W().R(), bad: to(0).W().R(),
			want: "a non-negative integer (0 = unlimited)"}).timing(TimingCall).semantic().defDoc("unlimited").
			doc("Per-tenant concurrent start limit; plaita:tenant_quota overrides per tenant. 0 = unlimited."),
		intVar("PLAITA_TENANT_RUNNING_TTL_SECONDS", CapTenant, 86400, dflt().W(), dflt().W(), dflt().W()).timing(TimingCall).semantic().
			doc("TTL of a running-slot entry (crash self-healing)."),
		intVar("PLAITA_TENANT_QUOTA_DEFER_MAX", CapConsumer, 64, dflt().W(), dflt().W(), dflt().W()).timing(TimingCall).semantic().
			doc("Re-enqueues of an over-quota start before it runs with quota_bypass."),
		numVar("PLAITA_DLQ_MAX_LEN", CapConsumer, numRule{def: 1000, zero: to(1).W().R(), neg: to(1).W().R(), bad: dflt().W().R(),
			want: "a positive integer"}).timing(TimingCtor).semantic().doc("Dead letters kept (XTRIM MAXLEN); 0 keeps 1, it is not off."),
		intVar("PLAITA_EXECUTION_STATE_TTL_DAYS", CapEngine, defaultStateTTL, keep(), to(0).W(), dflt().W()).timing(TimingCall).semantic().
			doc("TTL of terminal execution states; 0 is the only 'off'."),
		derivedInt("PLAITA_EXECUTION_TOMBSTONE_TTL_SECONDS", CapEngine, "max(2592000, state TTL)",
			dflt().W(), dflt().W(), dflt().W(), tombstoneDefault).timing(TimingCall).semantic().checked(clampTombstone).
			doc("TTL of the deletion tombstone; clamped up to the task max age."),
		numVar("PLAITA_WORKER_CONCURRENCY", CapConsumer, numRule{def: 1, zero: to(1).W(), neg: to(1).W(), bad: dflt().R(),
			want: "an integer"}).flag("concurrency").doc("Parallel executions per worker."),
		floatVar("PLAITA_CAPACITY_STALE_SECONDS", CapConsoleAPI, 90, dflt().W(), dflt().W(), dflt().W()).timing(TimingCall).
			doc("Freshness window of a capacity snapshot."),
		boolVar("PLAITA_CONSOLE_DISPATCH_SHADOW", CapConsoleAPI, KindLooseBool, true).timing(TimingCall).
			doc("Shadow decision labels of the dispatcher."),
		identityVar("PLAITA_CONSOLE_TASK_QUEUE", CapStarts, defaultQueue).timing(TimingCall).semantic().
			checked(func(v any, c *Config) (any, string) {
				if q := c.str("PLAITA_QUEUE_NAME"); q != v {
					return v, fmt.Sprintf("differs from PLAITA_QUEUE_NAME %q: the console enqueues where the workers do not read", q)
				}
				return v, ""
			}).doc("Stream the console and the schedule role enqueue starts to."),
		stringVar("PLAITA_DISPATCH_LEDGER_KEY", CapConsoleAPI, "plaita:dispatch:ledger", dflt()).timing(TimingCall).doc("Dispatch ledger key."),
		derivedString("PLAITA_DISPATCHER_ID", CapConsoleAPI, "hostname", dflt(), func(c *Config) string { return c.hostname }).
			timing(TimingCall).doc("Ledger actor id."),
		boolVar("PLAITA_SANDBOX_LIFECYCLE", CapEngine, KindExact01, true).timing(TimingCall).semantic().
			doc("Sandbox lifecycle callbacks; only byte-exact 0 disables."),
		boolVar("PLAITA_EXECUTION_EVENTS_PUBLISH", CapEngine, KindExact01, true).timing(TimingCall).
			doc("Live execution events (SSE); only byte-exact 0 disables."),
		intVar("PLAITA_EXECUTION_TIMELINE_MAX", CapEngine, 500, to(1).W(), to(1).W(), dflt().W()).timing(TimingCtor).semantic().
			doc("Timeline events kept per execution; 0 keeps 1."),
		intVar("PLAITA_EXECUTION_STATE_MAX_BYTES", CapEngine, 16777216, dflt().W(), dflt().W(), dflt().W()).timing(TimingCtor).semantic().
			doc("Bound on an execution's encoded state and on a start's input (bytes); a node whose result crosses it ends the execution in error. Added by this build."),
		numVar("PLAITA_EVENT_RECONCILE_INTERVAL", CapEventMatch, numRule{def: 300, isFloat: true, zero: dflt().W().R(), neg: dflt().W().R(),
			bad: dflt().W().R(), want: "a positive number of seconds"}).timing(TimingCtor).doc("Event reconcile period (seconds)."),
		floatVar("PLAITA_EVENT_RECONCILE_BACKFILL", CapEventMatch, 3600, keep(), dflt().W(), dflt().W()).timing(TimingCtor).
			doc("Backfill window at start or after a lost cursor; 0 = none."),
		listVar("PLAITA_WORKER_DENY_REPOS", CapConsumer, listRule{seps: ","}, nil).timing(TimingCall).semantic().
			doc("Repos whose starts this worker does not claim."),
		floatVar("PLAITA_WORKER_MIN_FREE_DISK_GIB", CapConsumer, 0, keep(), to(0).W(), to(0).W()).timing(TimingCall).defDoc("0 (off)").
			doc("Free-disk line below which the worker claims nothing."),
		stringVar("PLAITA_WORKER_DISK_GUARD_PATH", CapConsumer, ".", dflt()).timing(TimingCall).doc("Where free disk is measured."),
		floatVar("PLAITA_WORKER_DRAIN_TIMEOUT", CapConsumer, 30, keep(), to(0).W(), dflt().W()).timing(TimingCall).
			doc("Advisory bound of a graceful drain (seconds); 0 = no wait."),
		listVar("PLAITA_NODE_PATH", CapEngine, listRule{seps: string(filepath.ListSeparator)}, nil).
			doc("Directories searched for external node executables."),
		enumVar("PLAITA_LOG_LEVEL", CapProcess, enumRule{def: "info", allowed: []string{"debug", "info", "warn", "error"},
			alias: map[string]string{"warning": "warn", "critical": "error", "fatal": "error"}, bad: dflt().R()}).flag("log-level").
			doc("Log level; --quiet is warn."),
		numVar("PLAITA_CHECK_INTERVAL", CapCron, numRule{def: 1, isFloat: true, zero: dflt().W().R(), neg: dflt().W().R(),
			bad: dflt().W().R(), want: "a positive number of seconds"}).timing(TimingCtor).doc("Schedule scan period (seconds)."),
		delayQueueVar().timing(TimingCtor).semantic().doc("Delay queue key prefix (:scheduled, :attempts, :dead)."),
	)
	section(secSwitches,
		boolVar("PLAITA_DISABLE_TENANT_QUOTA", CapConsumer, KindStrip1, false).timing(TimingCall).semantic().doc("No per-tenant admission in the worker."),
		boolVar("PLAITA_DISABLE_NODE_RETRY", CapEngine, KindStrip1, false).timing(TimingCall).semantic().doc("A node failure is terminal."),
		boolVar("PLAITA_DISABLE_FENCING", CapEngine, KindStrip1, false).timing(TimingCall).semantic().doc("Bare lease, no fence generations."),
		boolVar("PLAITA_DISABLE_AFFINITY", CapConsumer, KindStrip1, false).timing(TimingCall).semantic().doc("Skip the repo affinity check."),
		boolVar("PLAITA_DISABLE_DISPATCH_TARGET", CapConsumer, KindStrip1, false).timing(TimingCall).semantic().doc("Ignore target_instance_id."),
		boolVar("PLAITA_DISABLE_HOLDER_LIVENESS", CapConsumer, KindStrip1, false).timing(TimingCall).semantic().doc("Ack lease conflicts unconditionally."),
		boolVar("PLAITA_DISABLE_LEASE_WATCHDOG", CapConsumer, KindStrip1, false).semantic().doc("No lease renewal."),
		boolVar("PLAITA_DISABLE_EVENT_RECONCILE", CapEventMatch, KindStrip1, false).doc("No event reconciler in the filter."),
		boolVar("PLAITA_DISABLE_CANCEL_CHECKPOINT", CapEngine, KindStrip1, false).timing(TimingCall).semantic().doc("No cancel flag check at step boundaries."),
		boolVar("PLAITA_DISABLE_CANCEL_INTERRUPT", CapEngine, KindStrip1, false).timing(TimingCall).semantic().doc("No in-step cancel listener."),
		boolVar("PLAITA_DISABLE_CODE_NODE", CapEngine, KindStrip1, false).semantic().doc("The code node type is not registered."),
	)
	section(secSandbox,
		numVar("PLAITA_SANDBOX_TIMEOUT", CapEngine, numRule{def: 10, zero: dflt().R(), neg: dflt().R(), bad: dflt().R(),
			want: "a positive whole number of seconds"}).timing(TimingImport).semantic().doc("Wall-clock limit of subprocess code."),
		numVar("PLAITA_SANDBOX_MEMORY_MB", CapEngine, numRule{def: 0, zero: keep(), neg: dflt().R(), bad: dflt().R(),
			want: "a non-negative integer (0 = unlimited)"}).timing(TimingImport).semantic().defDoc("0 (unlimited)").
			doc("RLIMIT_AS of subprocess code."),
		stringVar("PLAITA_SANDBOX_DOCKER_IMAGE", CapEngine, "python:3.12-slim", dflt().W()).timing(TimingImport).semantic().doc("Python docker image."),
		numVar("PLAITA_SANDBOX_DOCKER_TIMEOUT", CapEngine, numRule{def: 30, zero: dflt().R(), neg: dflt().R(), bad: dflt().R(),
			want: "a positive whole number of seconds"}).timing(TimingImport).semantic().doc("Wall-clock limit of docker code."),
		numVar("PLAITA_SANDBOX_DOCKER_MEMORY_MB", CapEngine, numRule{def: 128, zero: keep(), neg: keep(), bad: dflt().R(),
			want: "an integer"}).timing(TimingImport).semantic().doc("docker --memory; 0/negative are passed to docker as is."),
		stringVar("PLAITA_SANDBOX_DOCKER_CPUS", CapEngine, "0.5", dflt().W()).validated(cpusProblem).timing(TimingImport).semantic().
			strict("not a finite positive number → reject").doc("docker --cpus."),
		stringVar("PLAITA_SANDBOX_DOCKER_USER", CapEngine, "", keep()).timing(TimingImport).semantic().defDoc(`"" (image default)`).doc("docker --user."),
		stringVar("PLAITA_SANDBOX_NODE_BIN", CapEngine, "node", dflt().W()).timing(TimingImport).semantic().doc("Host executable for js subprocess code."),
		stringVar("PLAITA_SANDBOX_DOCKER_NODE_IMAGE", CapEngine, "node:20-alpine", dflt().W()).timing(TimingImport).semantic().doc("js docker image."),
		listVar("PLAITA_SANDBOX_ALLOWED_LANGUAGES", CapEngine, listRule{seps: ",;:", ws: true, allowed: languages,
			alias: map[string]string{"javascript": "js", "py": "python"}}, []string{"python"}).semantic().checked(keepPython).
			doc("Languages code nodes may use; python is always kept, js needs an explicit opt-in."),
		derivedEnum("PLAITA_CODE_BACKEND", CapEngine, enumRule{allowed: backends, bad: dflt().R()},
			"worker and dev: subprocess; console: docker (filter, schedule, delay: docker)", codeBackendDefault).semantic().
			doc("Default code backend; an unavailable one refuses to start unless the subprocess fallback is allowed."),
		listVar("PLAITA_SANDBOX_ALLOWED_BACKENDS", CapEngine, listRule{seps: ",;:", ws: true, allowed: backends}, nil).
			defDoc("docker ∪ the effective default backend (worker and dev: docker, subprocess; console: docker)").semantic().checked(unionBackend).
			doc("Backends code nodes may use; always includes the effective default backend."),
		boolVar("PLAITA_ALLOW_SUBPROCESS_FALLBACK", CapEngine, KindExact01, false).semantic().
			doc("Exact 1 lets an unavailable backend fall back to subprocess when subprocess is allow-listed."),
	)
	section(secExprHTTP,
		intVar("PLAITA_EXPR_MAX_RESULT_SIZE", CapEvents, 100000, dflt().W(), dflt().W(), dflt().W()).timing(TimingImport).semantic().
			doc("Base bound of an expression result."),
		floatVar("PLAITA_EXPR_GROWTH_FACTOR", CapEvents, 4, dflt().W(), dflt().W(), dflt().W()).timing(TimingImport).semantic().
			doc("Growth allowed by one expression step."),
		intVar("PLAITA_EXPR_MAX_RESULT_HARD", CapEvents, 100000000, dflt().W(), dflt().W(), dflt().W()).timing(TimingImport).semantic().
			doc("Hard bound of one expression result."),
		floatVar("PLAITA_HTTP_DNS_TTL", CapEngine, 30, keep(), dflt().W(), dflt().W()).timing(TimingCall).semantic().
			doc("DNS cache TTL of the SSRF check; 0 turns the cache off."),
		intVar("PLAITA_HTTP_CONNECTOR_LIMIT", CapEngine, 100, dflt().W(), dflt().W(), dflt().W()).timing(TimingCall).
			doc("Concurrent connections of the shared HTTP client."),
		boolVarBad("PLAITA_HTTP_COOKIES", CapEngine, KindStrictBool, false, to(0)).timing(TimingCall).semantic().doc("Per-flow cookie jar."),
		intVar("PLAITA_HTTP_MAX_RESPONSE_BYTES", CapEngine, 10485760, dflt().W(), dflt().W(), dflt().W()).timing(TimingCall).semantic().
			doc("Response body byte cap; never unlimited."),
		boolVarBad("PLAITA_HTTP_BLOCK_PRIVATE", CapEngine, KindStrictBool, false, to(1).R()).timing(TimingCall).semantic().
			doc("Block loopback, private and link-local targets for every http node."),
		numVar("PLAITA_BG_THREAD_WORKERS", CapEngine, numRule{def: 8, zero: dflt().R(), neg: dflt().R(), bad: dflt().R(),
			want: "a positive integer"}).timing(TimingImport).doc("Background pool size."),
		bgProcessWorkers().timing(TimingImport).noEffect().doc("Background process pool size (Python only)."),
		numVar("PLAITA_BG_STATE_MAX", CapEngine, numRule{def: 256, zero: dflt().R(), neg: dflt().R(), bad: dflt().R(),
			want: "a positive integer"}).timing(TimingImport).doc("Capacity of the concurrent node state LRU."),
	)
	section(secConsole,
		stringVar("PLAITA_CONSOLE_HOST", CapConsoleAPI, "127.0.0.1", dflt().W()).flag("host").checked(warnNonLoopback).
			doc("Console listen address; a non-loopback address is logged as a WARNING."),
		numVar("PLAITA_CONSOLE_PORT", CapConsoleAPI, upTo(numRule{def: 8080, zero: dflt().R(), neg: dflt().R(), bad: dflt().R(),
			want: "a port number 1-65535"}, 65535)).flag("port").doc("Console listen port."),
		identityVar("PLAITA_CONSOLE_REDIS_URL", CapConsoleAPI, defaultRedisURL).secretURL().validated(redisURLProblem).
			doc("Console Redis; unreachable at start → local mode (loud), unless the database has served with Redis: then the console waits for it."),
		boolVarBad("PLAITA_CONSOLE_LOCAL_FALLBACK", CapConsoleAPI, KindStrictBool, false, to(0).R()).
			doc("Allow local mode when Redis is unreachable at start on a database that has served with Redis (its executions in Redis are then out of sight); off: the console waits for Redis, not ready."),
		stringVar("PLAITA_CONSOLE_DB_URL", CapConsoleAPI, "sqlite:///./plaita_console.db", dflt().W()).secretURL().validated(dbURLProblem).
			doc("Console database: sqlite:///path (a file) or postgres://user:password@host:5432/database (several consoles on one; docs/console.md)."),
		stringVar("PLAITA_CONSOLE_ENV", CapConsoleAPI, "dev", dflt()).timing(TimingRequest).
			rule("any value; only exact prod makes delete admin-only").doc("Environment label."),
		stringVar("PLAITA_CONSOLE_ADMIN_API_KEY", CapConsoleAPI, "", keep()).timing(TimingRequest).secret().defDoc(`""`).
			doc("Admin API key; empty and insecure admin not allowed → admin API 503."),
		boolVarBad("PLAITA_CONSOLE_ALLOW_INSECURE_ADMIN", CapConsoleAPI, KindStrictBool, false, to(0).R()).timing(TimingRequest).
			doc("Allow the admin API without a key (local development only)."),
		stringVar("PLAITA_CONSOLE_ADMIN_PASSWORD", CapConsoleAPI, "", keep()).secret().defDoc("unset").
			doc("Creates the platform admin when the users table is empty."),
		stringVar("PLAITA_TRACE_URL_TEMPLATE", CapConsoleAPI, "", dflt()).defDoc("unset (no link)").validated(traceTemplateProblem).
			doc("Link from an execution's page to its trace: a URL with {trace_id}, e.g. http://jaeger:16686/trace/{trace_id}."),
		enumVar("PLAITA_CONSOLE_RECONCILE_ORPHANS", CapConsoleAPI, enumRule{def: "suspend", allowed: []string{"suspend", "fail", "off"}, bad: dflt()}).
			doc("Local-mode start-up handling of executions left running."),
		stringVar("PLAITA_CONSOLE_SECRET_ID", CapConsoleAPI, "", keep()).timing(TimingRequest).secret().defDoc(`""`).doc("Names the global contract key in the audit of signed triggers (docs/credentials.md)."),
		stringVar("PLAITA_CONSOLE_SECRET_KEY", CapConsoleAPI, "", keep()).timing(TimingRequest).secret().defDoc(`""`).doc("The global contract key of signed triggers: whsec_<base64>, or text of 16 bytes or more; empty → the global hook path answers 503 (tenant contract keys still work)."),
		enumVar("PLAITA_CONSOLE_LANGFUSE", CapConsoleAPI, enumRule{def: "auto", allowed: []string{"auto", "true", "false"},
			bad: dflt().R(), badTo: "false"}).timing(TimingCall).noEffect().doc("Langfuse tracing (Python only)."),
		boolVarBad("PLAITA_CONSOLE_DEBUG", CapConsoleAPI, KindStrictBool, false, to(0)).doc("Console debug mode."),
		floatVar("PLAITA_CONSOLE_ENGINE_SYNC_DEADLINE", CapConsoleAPI, 5, dflt().W(), dflt().W(), dflt().W()).
			doc("Wall-clock budget of the publish backfill at start (seconds); degrades, never blocks."),
		intVar("PLAITA_CONSOLE_ENGINE_SYNC_MAX_VERSIONS", CapConsoleAPI, 50000, dflt().W(), dflt().W(), dflt().W()).
			doc("Flow versions the publish backfill considers."),
		numVar("PLAITA_CONSOLE_MAX_STREAMS", CapConsoleAPI, upTo(numRule{def: 256, zero: dflt().W(), neg: dflt().W(), bad: dflt().W(), want: "an integer"}, 1000)).
			doc("Live streams (Server-Sent Events) one console serves at once, each on a Redis connection of its own (the client pools 1024); beyond it 503."),
		numVar("PLAITA_CONSOLE_MAX_STREAMS_PER_TENANT", CapConsoleAPI, upTo(numRule{def: 64, zero: dflt().W(), neg: dflt().W(), bad: dflt().W(), want: "an integer"}, 1000)).
			doc("Live streams the callers of one tenant hold at once on one console; beyond it 503, so one tenant cannot take every stream of the console."),
		numVar("PLAITA_CONSOLE_SESSION_TTL", CapConsoleAPI, upTo(numRule{def: 43200, zero: dflt().R(), neg: dflt().R(), bad: dflt().R(),
			want: "a positive integer (seconds)"}, 2592000)).
			doc("How long a login's session lasts (seconds, at most 30 days); it ends then, or at logout."),
		stringVar("PLAITA_CREDENTIALS_FILE", CapEngine, "", dflt()).timing(TimingCall).noEffect().defDoc("beside the SQLite DB, else cwd").
			checked(warnRelative).doc("Not used: credentials are kept sealed in the store the workers read (Redis; the console database in local mode), not exported to files (docs/credentials.md)."),
		stringVar("PLAITA_CREDENTIALS_KEY", CapEngine, "", keep()).timing(TimingCall).secret().defDoc("unset").
			doc("Inline master key of the credentials (url-safe base64 of 32 bytes, the Fernet format); wins over the key file."),
		stringVar("PLAITA_CREDENTIALS_KEY_FILE", CapEngine, "", dflt()).timing(TimingCall).defDoc("beside the SQLite DB, else cwd").
			checked(warnRelative).doc("Master key file of the credentials: the console creates it (O_EXCL, 0600); every other process fails closed without it (docs/credentials.md)."),
		stringVar("PLAITA_PROJECT_ROOT", CapEngine, "", dflt()).defDoc("unset").doc("First candidate of the writefile jail root."),
	)
	section(secPython,
		stringVar("PLAITA_LOOP", CapProcess, "", keep()).timing(TimingImport).noEffect().defDoc("unset").doc("uvloop policy (Python only)."),
		stringVar("PLAITA_PYTHON", CapConsoleAPI, "", keep()).timing(TimingLaunch).noEffect().defDoc("unset").doc("Interpreter of spawned services (Python only)."),
		boolVar("PLAITA_WORKER_LANGFUSE", CapConsumer, KindExact01, false).noEffect().doc("Langfuse callback (Python only)."),
		listVar("PLAITA_NODE_MODULES", CapConsumer, listRule{seps: ","}, nil).noEffect().doc("Python node modules to import (Python only)."),
		listVar("PLAITA_CONSOLE_NODE_MODULES", CapConsoleAPI, listRule{seps: ","}, nil).noEffect().doc("Python node modules of the console (Python only)."),
		listVar("PLAITA_CONSOLE_NODE_PATH", CapConsoleAPI, listRule{seps: string(filepath.ListSeparator)}, nil).noEffect().
			doc("Python import path of the console (Python only)."),
	)
	return out
}

// crossCheck is a warning about a combination of values each of which is fine on its own.
type crossCheck struct {
	vars  []string // registered names; the warning is filed under the first, Related lists the rest
	doc   string   // the rule in words, for docs/configuration.md
	check func(c *Config) string
}

// crossChecks run after every variable is resolved, for the roles that read all of a check's
// variables.
func crossChecks() []crossCheck {
	return []crossCheck{{
		vars: []string{"PLAITA_CLAIM_MIN_IDLE_MS", "PLAITA_MAX_DELIVERIES", "PLAITA_LEASE_TTL_SECONDS"},
		doc: "`PLAITA_CLAIM_MIN_IDLE_MS` × (`PLAITA_MAX_DELIVERIES` − 1) shorter than `PLAITA_LEASE_TTL_SECONDS` → WARNING: " +
			"a crashed worker's message can use up its deliveries and be dead-lettered while the dead holder's lease still lives.",
		check: reclaimOutlivesLease,
	}}
}

// reclaimOutlivesLease warns when the reclaim budget runs out before a lease expires. A worker
// that dies holding a lease leaves its message pending; siblings reclaim it at most once per
// claim idle time, each reclaim costs a delivery, and a redelivery that finds the lease still
// held cannot run. When every delivery is spent before the lease expires, the message is
// dead-lettered without anyone having been able to resume it.
func reclaimOutlivesLease(c *Config) string {
	idle, deliveries, lease := c.int("PLAITA_CLAIM_MIN_IDLE_MS"), c.int("PLAITA_MAX_DELIVERIES"), c.int("PLAITA_LEASE_TTL_SECONDS")
	// Every input may be as large as an int64: compare exactly.
	window := new(big.Int).Mul(big.NewInt(int64(idle)), big.NewInt(int64(deliveries-1)))
	leaseMS := new(big.Int).Mul(big.NewInt(int64(lease)), big.NewInt(1000))
	if window.Cmp(leaseMS) >= 0 {
		return ""
	}
	return fmt.Sprintf("PLAITA_CLAIM_MIN_IDLE_MS × (PLAITA_MAX_DELIVERIES − 1) = %d ms × %d = %s ms is shorter than "+
		"PLAITA_LEASE_TTL_SECONDS = %d s: a crashed worker's message can use up its %d deliveries and be dead-lettered "+
		"while the dead holder's lease still lives; raise PLAITA_CLAIM_MIN_IDLE_MS or PLAITA_MAX_DELIVERIES, or lower PLAITA_LEASE_TTL_SECONDS",
		idle, deliveries-1, window, lease, deliveries)
}

// ---- variables with shapes of their own ----

func delayQueueVar() *Var {
	v := identityVar("PLAITA_DELAY_QUEUE", CapDelayQueue, "plaita:delay:queue")
	r := stringRule{identity: true, noTrim: true}
	v.parse = func(in input, _ *Config) outcome { return r.parse(in, "plaita:delay:queue") }
	v.Rule = "empty → reject; not trimmed"
	return v
}

func bgProcessWorkers() *Var {
	v := newVar("PLAITA_BG_PROCESS_WORKERS", KindInt, CapEngine)
	v.DefaultDoc = "cpu count"
	v.parse = func(in input, c *Config) outcome {
		r := numRule{def: float64(c.numCPU), zero: dflt().R(), neg: dflt().R(), bad: dflt().R(), want: "a positive integer"}
		return r.parse(in)
	}
	v.Rule = "0/negative/invalid → reject (non-strict: default + WARNING)"
	v.Strict = "0 / negative / invalid → reject"
	return v
}

func derivedInt(name string, serves Capability, docDefault string, zero, neg, bad fix, def func(c *Config) int) *Var {
	v := intVar(name, serves, 0, zero, neg, bad)
	v.Default, v.DefaultDoc = "", docDefault
	v.Rule = numRuleDoc(numRule{zero: zero, neg: neg, bad: bad}, "default")
	v.parse = func(in input, c *Config) outcome {
		return numRule{def: float64(def(c)), zero: zero, neg: neg, bad: bad, want: "an integer"}.parse(in)
	}
	return v
}

func derivedEnum(name string, serves Capability, r enumRule, docDefault string, def func(c *Config) string) *Var {
	v := enumVar(name, serves, r)
	v.Default, v.DefaultDoc = "", docDefault
	v.parse = func(in input, c *Config) outcome {
		rr := r
		rr.def = def(c)
		return rr.parse(in)
	}
	v.Rule = "one of " + strings.Join(r.allowed, ", ") + " (trimmed, any case); unknown → reject"
	return v
}

func tombstoneDefault(c *Config) int {
	return max(defaultTombstone, c.int("PLAITA_EXECUTION_STATE_TTL_DAYS")*secondsPerDay)
}

// clampTombstone keeps a tombstone alive at least as long as a task may still be delivered.
func clampTombstone(v any, c *Config) (any, string) {
	ttl, age := v.(int), c.int("PLAITA_TASK_MAX_AGE_SECONDS")
	if age > 0 && ttl < age {
		return age, fmt.Sprintf("%d is shorter than PLAITA_TASK_MAX_AGE_SECONDS; using %d so a tombstone never expires before the age gate", ttl, age)
	}
	return v, ""
}

// codeBackendDefault: the worker defaults to subprocess, the console (and
// every library caller) to docker. dev runs a worker in its process, so it takes the worker's
// default: a laptop without docker must still run code nodes out of the box.
func codeBackendDefault(c *Config) string {
	if slices.Contains(c.role.scope(), RoleWorker) {
		return backendSubprocess
	}
	return backendDocker
}

func keepPython(v any, _ *Config) (any, string) {
	langs := v.([]string)
	if !slices.Contains(langs, "python") {
		langs = append([]string{"python"}, langs...)
	}
	if slices.Contains(langs, "js") {
		return langs, "js code nodes are allowed: they run on the worker with the sandbox backend's limits"
	}
	return langs, ""
}

func unionBackend(v any, c *Config) (any, string) {
	list := v.([]string)
	if len(list) == 0 {
		list = []string{backendDocker}
	}
	if eff := c.str("PLAITA_CODE_BACKEND"); !slices.Contains(list, eff) {
		list = append(list, eff)
	}
	return list, ""
}

// warnIfZero comments on an explicit 0; the variables using it never default to 0, so a 0
// value was always set by the operator.
func warnIfZero(why string) func(any, *Config) (any, string) {
	return func(v any, _ *Config) (any, string) {
		if v == 0 {
			return v, why
		}
		return v, ""
	}
}

func warnIfOn(why string) func(any, *Config) (any, string) {
	return func(v any, _ *Config) (any, string) {
		if v == true {
			return v, why
		}
		return v, ""
	}
}

func warnNonLoopback(v any, _ *Config) (any, string) {
	h := v.(string)
	if h == "localhost" {
		return v, ""
	}
	if ip := net.ParseIP(h); ip != nil && ip.IsLoopback() {
		return v, ""
	}
	return v, fmt.Sprintf("%q is not a loopback address: the console is reachable from the network; put it behind TLS and an admin key", h)
}

func warnRelative(v any, _ *Config) (any, string) {
	if p := v.(string); p != "" && !filepath.IsAbs(p) {
		return v, fmt.Sprintf("%q is relative: it is resolved against each process's working directory; use an absolute path with several replicas", p)
	}
	return v, ""
}

// ---- value checks ----

func redisURLProblem(s string) (string, bool) {
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Sprintf("%q is not a URL", maskURL(s)), true
	}
	switch u.Scheme {
	case "redis", "rediss", "unix":
	default:
		return fmt.Sprintf("%q is not a redis://, rediss:// or unix:// URL", maskURL(s)), true
	}
	if u.Scheme != "unix" && u.Host == "" {
		return fmt.Sprintf("%q has no host", maskURL(s)), true
	}
	return "", false
}

func webhookProblem(s string) (string, bool) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Sprintf("%q is not an http(s) URL", maskURL(s)), true
	}
	return "", false
}

var streamIDRe = regexp.MustCompile(`^(\$|[0-9]+(-[0-9]+)?)$`)

// otlpEndpointProblem refuses an OTLP endpoint that is no http(s) URL: the exporter would fail
// on every span, silently.
func otlpEndpointProblem(s string) (string, bool) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Sprintf("%q is not an http(s) URL (e.g. http://otel-collector:4318)", maskURL(s)), true
	}
	return "", false
}

// traceTemplateProblem refuses a trace link template without the place of the trace id.
func traceTemplateProblem(s string) (string, bool) {
	if !strings.Contains(s, "{trace_id}") {
		return fmt.Sprintf("%q has no {trace_id} (e.g. http://jaeger:16686/trace/{trace_id})", s), true
	}
	if u, err := url.Parse(strings.ReplaceAll(s, "{trace_id}", "0")); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Sprintf("%q is not an http(s) URL", s), true
	}
	return "", false
}

// otlpHeadersProblem checks OTEL_EXPORTER_OTLP_HEADERS as the OpenTelemetry specification
// writes it (W3C baggage's list: key=value, comma-separated, values URL-encoded).
func otlpHeadersProblem(s string) (string, bool) {
	if _, err := ParseOTLPHeaders(s); err != nil {
		return err.Error(), true
	}
	return "", false
}

// ParseOTLPHeaders reads OTEL_EXPORTER_OTLP_HEADERS into a map (an empty value: none).
func ParseOTLPHeaders(s string) (map[string]string, error) {
	out := map[string]string{}
	// The errors name an item by its place, never its text: the headers carry credentials.
	for i, pair := range strings.Split(s, ",") {
		if strings.TrimSpace(pair) == "" {
			continue
		}
		k, v, ok := strings.Cut(pair, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("item %d is not key=value (comma-separated pairs, values URL-encoded)", i+1)
		}
		val, err := url.PathUnescape(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("the value of item %d is not URL-encoded", i+1)
		}
		out[k] = val
	}
	return out, nil
}

func streamIDProblem(s string) (string, bool) {
	if !streamIDRe.MatchString(s) {
		return fmt.Sprintf("%q is not a stream id (0, $ or <ms>-<seq>)", s), true
	}
	return "", false
}

func cpusProblem(s string) (string, bool) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f <= 0 {
		return fmt.Sprintf("%q must be a finite positive number", s), true
	}
	return "", false
}

func dbURLProblem(s string) (string, bool) {
	if strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://") {
		if _, err := url.Parse(s); err != nil {
			return fmt.Sprintf("%q is not a readable PostgreSQL URL (postgres://user:password@host:5432/database)", maskURL(s)), true
		}
		return "", false
	}
	path, ok := strings.CutPrefix(s, "sqlite://")
	if !ok {
		return fmt.Sprintf("%q is neither a sqlite:// nor a postgres:// URL (the console's database is a SQLite file or a PostgreSQL database)", maskURL(s)), true
	}
	// sqlite:////abs/path is absolute; sqlite:///rel/path is relative to the working directory.
	if !strings.HasPrefix(path, "//") && !strings.Contains(path, ":memory:") {
		return fmt.Sprintf("%q is a relative path: resolved against the working directory", s), false
	}
	return "", false
}
