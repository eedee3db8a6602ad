package config

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
)

// row is the expected outcome of one variable for each class of input, written from the
// configuration matrix (CONFIG.md). A cell reads "<value>[ W][ R]": the value in effect, W when
// a WARNING is logged, R when strict preflight rejects it (the value is then what non-strict
// mode uses, with a warning). The test below generates its cases from the registry, so a
// variable without a complete row fails the build.
type row struct {
	unset, empty, def, zero, neg, bad string
	frac                              string // integers: "1.5"
	nan, inf                          string // floats
	on, off, word                     string // booleans: " 1 ", " 0 ", "true"
}

var (
	strip1Row   = row{unset: "false", empty: "false", def: "false", zero: "false", neg: "false W", bad: "false W", on: "true", off: "false", word: "false W"}
	exactOffRow = row{unset: "false", empty: "false W", def: "false", zero: "false", neg: "false W", bad: "false W", on: "false W", off: "false W", word: "false W"}
	exactOnRow  = row{unset: "true", empty: "true W", def: "true", zero: "false", neg: "true W", bad: "true W", on: "true W", off: "true W", word: "true W"}
	freeTextRow = func(def string) row {
		return row{unset: def, empty: def, def: def, zero: `"0"`, neg: `"-5"`, bad: `"abc"`}
	}
	emptyTextRow = row{unset: `""`, empty: `""`, zero: `"0"`, neg: `"-5"`, bad: `"abc"`}
	listRow      = row{unset: "[]", empty: "[]", zero: "[0]", neg: "[-5]", bad: "[abc]"}
	intWarnRow   = func(d string) row {
		return row{unset: d, empty: d + " W", def: d, zero: d + " W", neg: d + " W", bad: d + " W", frac: d + " W"}
	}
	intRejectRow = func(d string) row {
		return row{unset: d, empty: d + " W R", def: d, zero: d + " W R", neg: d + " W R", bad: d + " W R", frac: d + " W R"}
	}
	floatWarnRow = func(d string) row {
		return row{unset: d, empty: d + " W", def: d, zero: d + " W", neg: d + " W", bad: d + " W", nan: d + " W", inf: d + " W"}
	}
	floatRejectRow = func(d string) row {
		return row{unset: d, empty: d + " W R", def: d, zero: d + " W R", neg: d + " W R", bad: d + " W R", nan: d + " W R", inf: d + " W R"}
	}
	identityRow = func(d string) row {
		return row{unset: d, empty: d + " W R", def: d, zero: `"0"`, neg: `"-5"`, bad: `"abc"`}
	}
	urlRow = func(d string) row {
		return row{unset: d, empty: d + " W R", def: d, zero: d + " W R", neg: d + " W R", bad: d + " W R"}
	}
	strictBoolRow = func(bad string) row {
		return row{unset: "false", empty: bad, def: "false", zero: "false", neg: bad, bad: bad, on: "true", off: "false", word: "true"}
	}
)

var matrix = map[string]row{
	// connection, queue, retention, observability
	"PLAITA_REDIS_URL":                          urlRow(`"redis://localhost:6379/0"`),
	"PLAITA_QUEUE_NAME":                         identityRow(`"plaita:flow:queue"`),
	"PLAITA_CONSUMER_GROUP":                     identityRow(`"plaita-workers"`),
	"PLAITA_CONSUMER_GROUP_START_ID":            {unset: `"0"`, empty: `"0" W`, def: `"0"`, zero: `"0"`, neg: `"0" W R`, bad: `"0" W R`},
	"PLAITA_INSTANCE_ID":                        {unset: `"dev-4242"`, empty: `"dev-4242" W R`, zero: `"0"`, neg: `"-5"`, bad: `"abc"`},
	"PLAITA_CONSUMER_NAME":                      {unset: `"dev-4242"`, empty: `"dev-4242" W`, zero: `"0"`, neg: `"-5"`, bad: `"abc"`},
	"PLAITA_CLAIM_MIN_IDLE_MS":                  {unset: "60000", empty: "60000 W R", def: "60000", zero: "0 W", neg: "60000 W R", bad: "60000 W R", frac: "60000 W R"},
	"PLAITA_LEASE_TTL_SECONDS":                  intRejectRow("120"),
	"PLAITA_MAX_DELIVERIES":                     intRejectRow("5"),
	"PLAITA_DEPLOYMENT_EPOCH":                   identityRow(`"legacy"`),
	"PLAITA_TENANT_STATUS_RECONCILE_SECONDS":    {unset: "60", empty: "60 W", def: "60", zero: "0 W", neg: "60 W", bad: "60 W", frac: "60 W"},
	"PLAITA_TENANT_STATUS_EPOCH_STRICT":         {unset: `"auto"`, empty: `"auto"`, def: `"auto"`, zero: `"0" W`, neg: `"auto" W`, bad: `"auto" W`},
	"PLAITA_EXECUTION_DEADLINE_SECONDS":         floatWarnRow("1800"),
	"PLAITA_TASK_MAX_AGE_SECONDS":               {unset: "2592000", empty: "2592000 W", def: "2592000", zero: "0 W", neg: "0 W", bad: "2592000 W", frac: "2592000 W"},
	"PLAITA_DLQ_KEY":                            {unset: `"plaita:flow:queue:dlq"`, empty: `"plaita:flow:queue:dlq" W R`, zero: `"0"`, neg: `"-5"`, bad: `"abc"`},
	"PLAITA_EVENT_TTL_SECONDS":                  intWarnRow("604800"),
	"PLAITA_EVENT_INDEX_SWEEP_INTERVAL":         intWarnRow("60"),
	"PLAITA_EVENT_INDEX_SWEEP_BUDGET":           {unset: "500", empty: "500 W", def: "500", zero: "1 W", neg: "1 W", bad: "500 W", frac: "500 W"},
	"PLAITA_DISABLE_EVENT_INDEX_SWEEP":          {unset: "false", empty: "false", def: "false", zero: "false", neg: "false W", bad: "false W", on: "true W", off: "false", word: "false W"},
	"PLAITA_DISABLE_EVENT_INDEX_PRUNE_ON_WRITE": strip1Row,
	"PLAITA_METRICS_PORT":                       {unset: "0", empty: "0 W", def: "0", zero: "0", neg: "0", bad: "0 W", frac: "0 W"},
	"PLAITA_METRICS_HOST":                       freeTextRow(`"0.0.0.0"`),
	"PLAITA_ALERT_WEBHOOK":                      {unset: `""`, empty: `""`, zero: `"" W R`, neg: `"" W R`, bad: `"" W R`},
	"PLAITA_ALLOW_EXPERIMENTAL_DB":              exactOffRow,
	"OTEL_EXPORTER_OTLP_ENDPOINT":               {unset: `""`, empty: `""`, zero: `"" W R`, neg: `"" W R`, bad: `"" W R`},
	"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT":        {unset: `""`, empty: `""`, zero: `"" W R`, neg: `"" W R`, bad: `"" W R`},
	"OTEL_EXPORTER_OTLP_PROTOCOL":               urlRow(`"http/protobuf"`),
	"OTEL_EXPORTER_OTLP_HEADERS":                {unset: `""`, empty: `""`, zero: `"" W R`, neg: `"" W R`, bad: `"" W R`},
	"OTEL_SERVICE_NAME":                         {unset: `"plaita-dev"`, empty: `"plaita-dev"`, zero: `"0"`, neg: `"-5"`, bad: `"abc"`},
	"OTEL_TRACES_SAMPLER":                       urlRow(`"parentbased_always_on"`),
	"OTEL_TRACES_SAMPLER_ARG":                   {unset: "1", empty: "1 W R", def: "1", zero: "0", neg: "1 W R", bad: "1 W R", nan: "1 W R", inf: "1 W R"},
	"OTEL_BSP_SCHEDULE_DELAY":                   {unset: "5000", empty: "5000 W R", def: "5000", zero: "5000 W", neg: "5000 W R", bad: "5000 W R", frac: "5000 W R"},
	"OTEL_SDK_DISABLED":                         strictBoolRow("false W"),
	"PLAITA_NODES_WORKSPACE_ROOT":               {unset: `""`, empty: `"" W`, zero: `"0"`, neg: `"-5"`, bad: `"abc"`},
	"PLAITA_ALLOW_UNRESTRICTED_WRITES":          exactOffRow,

	// worker, capacity, retention
	"PLAITA_TENANT_MAX_RUNNING":              {unset: "0", empty: "0 W R", def: "0 W", zero: "0 W", neg: "0 W R", bad: "0 W R", frac: "0 W R"},
	"PLAITA_TENANT_RUNNING_TTL_SECONDS":      intWarnRow("86400"),
	"PLAITA_TENANT_QUOTA_DEFER_MAX":          intWarnRow("64"),
	"PLAITA_DLQ_MAX_LEN":                     {unset: "1000", empty: "1000 W R", def: "1000", zero: "1 W R", neg: "1 W R", bad: "1000 W R", frac: "1000 W R"},
	"PLAITA_EXECUTION_STATE_TTL_DAYS":        {unset: "30", empty: "30 W", def: "30", zero: "0", neg: "0 W", bad: "30 W", frac: "30 W"},
	"PLAITA_EXECUTION_TOMBSTONE_TTL_SECONDS": {unset: "2592000", empty: "2592000 W", zero: "2592000 W", neg: "2592000 W", bad: "2592000 W", frac: "2592000 W"},
	"PLAITA_WORKER_CONCURRENCY":              {unset: "1", empty: "1 W R", def: "1", zero: "1 W", neg: "1 W", bad: "1 W R", frac: "1 W R"},
	"PLAITA_CAPACITY_STALE_SECONDS":          floatWarnRow("90"),
	"PLAITA_CONSOLE_DISPATCH_SHADOW":         {unset: "true", empty: "true W", def: "true", zero: "false", neg: "true W", bad: "true W", on: "true", off: "false", word: "true"},
	"PLAITA_CONSOLE_TASK_QUEUE":              {unset: `"plaita:flow:queue"`, empty: `"plaita:flow:queue" W R`, def: `"plaita:flow:queue"`, zero: `"0" W`, neg: `"-5" W`, bad: `"abc" W`},
	"PLAITA_DISPATCH_LEDGER_KEY":             freeTextRow(`"plaita:dispatch:ledger"`),
	"PLAITA_DISPATCHER_ID":                   {unset: `"host-a"`, empty: `"host-a"`, zero: `"0"`, neg: `"-5"`, bad: `"abc"`},
	"PLAITA_SANDBOX_LIFECYCLE":               exactOnRow,
	"PLAITA_EXECUTION_EVENTS_PUBLISH":        exactOnRow,
	"PLAITA_EXECUTION_TIMELINE_MAX":          {unset: "500", empty: "500 W", def: "500", zero: "1 W", neg: "1 W", bad: "500 W", frac: "500 W"},
	"PLAITA_EXECUTION_STATE_MAX_BYTES":       intWarnRow("16777216"),
	"PLAITA_EVENT_RECONCILE_INTERVAL":        floatRejectRow("300"),
	"PLAITA_EVENT_RECONCILE_BACKFILL":        {unset: "3600", empty: "3600 W", def: "3600", zero: "0", neg: "3600 W", bad: "3600 W", nan: "3600 W", inf: "3600 W"},
	"PLAITA_WORKER_DENY_REPOS":               listRow,
	"PLAITA_WORKER_MIN_FREE_DISK_GIB":        {unset: "0", empty: "0 W", def: "0", zero: "0", neg: "0 W", bad: "0 W", nan: "0 W", inf: "0 W"},
	"PLAITA_WORKER_DISK_GUARD_PATH":          freeTextRow(`"."`),
	"PLAITA_WORKER_DRAIN_TIMEOUT":            {unset: "30", empty: "30 W", def: "30", zero: "0", neg: "0 W", bad: "30 W", nan: "30 W", inf: "30 W"},
	"PLAITA_NODE_PATH":                       listRow,
	"PLAITA_LOG_LEVEL":                       urlRow(`"info"`),
	"PLAITA_CHECK_INTERVAL":                  floatRejectRow("1"),
	"PLAITA_DELAY_QUEUE":                     identityRow(`"plaita:delay:queue"`),

	// rollback switches
	"PLAITA_DISABLE_TENANT_QUOTA":      strip1Row,
	"PLAITA_DISABLE_NODE_RETRY":        strip1Row,
	"PLAITA_DISABLE_FENCING":           strip1Row,
	"PLAITA_DISABLE_AFFINITY":          strip1Row,
	"PLAITA_DISABLE_DISPATCH_TARGET":   strip1Row,
	"PLAITA_DISABLE_HOLDER_LIVENESS":   strip1Row,
	"PLAITA_DISABLE_LEASE_WATCHDOG":    strip1Row,
	"PLAITA_DISABLE_EVENT_RECONCILE":   strip1Row,
	"PLAITA_DISABLE_CANCEL_CHECKPOINT": strip1Row,
	"PLAITA_DISABLE_CANCEL_INTERRUPT":  strip1Row,
	"PLAITA_DISABLE_CODE_NODE":         strip1Row,

	// code sandbox
	"PLAITA_SANDBOX_TIMEOUT":           intRejectRow("10"),
	"PLAITA_SANDBOX_MEMORY_MB":         {unset: "0", empty: "0 W R", def: "0", zero: "0", neg: "0 W R", bad: "0 W R", frac: "0 W R"},
	"PLAITA_SANDBOX_DOCKER_IMAGE":      {unset: `"python:3.12-slim"`, empty: `"python:3.12-slim" W`, def: `"python:3.12-slim"`, zero: `"0"`, neg: `"-5"`, bad: `"abc"`},
	"PLAITA_SANDBOX_DOCKER_TIMEOUT":    intRejectRow("30"),
	"PLAITA_SANDBOX_DOCKER_MEMORY_MB":  {unset: "128", empty: "128 W R", def: "128", zero: "0", neg: "-5", bad: "128 W R", frac: "128 W R"},
	"PLAITA_SANDBOX_DOCKER_CPUS":       {unset: `"0.5"`, empty: `"0.5" W`, def: `"0.5"`, zero: `"0.5" W R`, neg: `"0.5" W R`, bad: `"0.5" W R`},
	"PLAITA_SANDBOX_DOCKER_USER":       emptyTextRow,
	"PLAITA_SANDBOX_NODE_BIN":          {unset: `"node"`, empty: `"node" W`, def: `"node"`, zero: `"0"`, neg: `"-5"`, bad: `"abc"`},
	"PLAITA_SANDBOX_DOCKER_NODE_IMAGE": {unset: `"node:20-alpine"`, empty: `"node:20-alpine" W`, def: `"node:20-alpine"`, zero: `"0"`, neg: `"-5"`, bad: `"abc"`},
	"PLAITA_SANDBOX_ALLOWED_LANGUAGES": {unset: "[python]", empty: "[python]", def: "[python]", zero: "[python] W R", neg: "[python] W R", bad: "[python] W R"},
	"PLAITA_CODE_BACKEND":              {unset: `"subprocess"`, empty: `"subprocess" W R`, zero: `"subprocess" W R`, neg: `"subprocess" W R`, bad: `"subprocess" W R`},
	"PLAITA_SANDBOX_ALLOWED_BACKENDS":  {unset: "[docker,subprocess]", empty: "[docker,subprocess]", zero: "[docker,subprocess] W R", neg: "[docker,subprocess] W R", bad: "[docker,subprocess] W R"},
	"PLAITA_ALLOW_SUBPROCESS_FALLBACK": exactOffRow,

	// expressions, HTTP, background work
	"PLAITA_EXPR_MAX_RESULT_SIZE":    intWarnRow("100000"),
	"PLAITA_EXPR_GROWTH_FACTOR":      floatWarnRow("4"),
	"PLAITA_EXPR_MAX_RESULT_HARD":    intWarnRow("100000000"),
	"PLAITA_HTTP_DNS_TTL":            {unset: "30", empty: "30 W", def: "30", zero: "0", neg: "30 W", bad: "30 W", nan: "30 W", inf: "30 W"},
	"PLAITA_HTTP_CONNECTOR_LIMIT":    intWarnRow("100"),
	"PLAITA_HTTP_COOKIES":            strictBoolRow("false W"),
	"PLAITA_HTTP_MAX_RESPONSE_BYTES": intWarnRow("10485760"),
	"PLAITA_HTTP_BLOCK_PRIVATE":      strictBoolRow("true W R"),
	"PLAITA_BG_THREAD_WORKERS":       intRejectRow("8"),
	"PLAITA_BG_PROCESS_WORKERS":      {unset: "8", empty: "8 W R", zero: "8 W R", neg: "8 W R", bad: "8 W R", frac: "8 W R"},
	"PLAITA_BG_STATE_MAX":            intRejectRow("256"),

	// console
	"PLAITA_CONSOLE_HOST":                     {unset: `"127.0.0.1"`, empty: `"127.0.0.1" W`, def: `"127.0.0.1"`, zero: `"0" W`, neg: `"-5" W`, bad: `"abc" W`},
	"PLAITA_CONSOLE_PORT":                     intRejectRow("8080"),
	"PLAITA_CONSOLE_REDIS_URL":                urlRow(`"redis://localhost:6379/0"`),
	"PLAITA_CONSOLE_DB_URL":                   {unset: `"sqlite:///./plaita_console.db"`, empty: `"sqlite:///./plaita_console.db" W`, def: `"sqlite:///./plaita_console.db" W`, zero: `"sqlite:///./plaita_console.db" W R`, neg: `"sqlite:///./plaita_console.db" W R`, bad: `"sqlite:///./plaita_console.db" W R`},
	"PLAITA_CONSOLE_ENV":                      freeTextRow(`"dev"`),
	"PLAITA_CONSOLE_ADMIN_API_KEY":            emptyTextRow,
	"PLAITA_CONSOLE_ALLOW_INSECURE_ADMIN":     strictBoolRow("false W R"),
	"PLAITA_CONSOLE_LOCAL_FALLBACK":           strictBoolRow("false W R"),
	"PLAITA_CONSOLE_ADMIN_PASSWORD":           emptyTextRow,
	"PLAITA_TRACE_URL_TEMPLATE":               {unset: `""`, empty: `""`, zero: `"" W R`, neg: `"" W R`, bad: `"" W R`},
	"PLAITA_CONSOLE_RECONCILE_ORPHANS":        {unset: `"suspend"`, empty: `"suspend" W`, def: `"suspend"`, zero: `"suspend" W`, neg: `"suspend" W`, bad: `"suspend" W`},
	"PLAITA_CONSOLE_SECRET_ID":                emptyTextRow,
	"PLAITA_CONSOLE_SECRET_KEY":               emptyTextRow,
	"PLAITA_CONSOLE_LANGFUSE":                 {unset: `"auto"`, empty: `"false" W R`, def: `"auto"`, zero: `"false" W R`, neg: `"false" W R`, bad: `"false" W R`},
	"PLAITA_CONSOLE_DEBUG":                    strictBoolRow("false W"),
	"PLAITA_CONSOLE_ENGINE_SYNC_DEADLINE":     floatWarnRow("5"),
	"PLAITA_CONSOLE_ENGINE_SYNC_MAX_VERSIONS": intWarnRow("50000"),
	"PLAITA_CONSOLE_MAX_STREAMS":              intWarnRow("256"),
	"PLAITA_CONSOLE_MAX_STREAMS_PER_TENANT":   intWarnRow("64"),
	"PLAITA_CONSOLE_SESSION_TTL":              intRejectRow("43200"),
	"PLAITA_CREDENTIALS_FILE":                 {unset: `""`, empty: `""`, zero: `"0" W`, neg: `"-5" W`, bad: `"abc" W`},
	"PLAITA_CREDENTIALS_KEY":                  emptyTextRow,
	"PLAITA_CREDENTIALS_KEY_FILE":             {unset: `""`, empty: `""`, zero: `"0" W`, neg: `"-5" W`, bad: `"abc" W`},
	"PLAITA_PROJECT_ROOT":                     emptyTextRow,

	// Python-only knobs
	"PLAITA_LOOP":                 emptyTextRow,
	"PLAITA_PYTHON":               emptyTextRow,
	"PLAITA_WORKER_LANGFUSE":      exactOffRow,
	"PLAITA_NODE_MODULES":         listRow,
	"PLAITA_CONSOLE_NODE_MODULES": listRow,
	"PLAITA_CONSOLE_NODE_PATH":    listRow,
}

// roleMatrix holds the rows of variables whose outcome depends on the role: the matrix above
// is loaded for dev, these rows for the role named. PLAITA_CODE_BACKEND defaults to subprocess
// for the worker and to docker for the console, and the allowed backends are docker ∪ that
// default, so a console never runs code outside a container unless told to.
var roleMatrix = map[Role]map[string]row{
	RoleWorker: {
		"PLAITA_CODE_BACKEND":             {unset: `"subprocess"`, empty: `"subprocess" W R`, zero: `"subprocess" W R`, neg: `"subprocess" W R`, bad: `"subprocess" W R`},
		"PLAITA_SANDBOX_ALLOWED_BACKENDS": {unset: "[docker,subprocess]", empty: "[docker,subprocess]", zero: "[docker,subprocess] W R", neg: "[docker,subprocess] W R", bad: "[docker,subprocess] W R"},
	},
	RoleConsole: {
		"PLAITA_CODE_BACKEND":             {unset: `"docker"`, empty: `"docker" W R`, zero: `"docker" W R`, neg: `"docker" W R`, bad: `"docker" W R`},
		"PLAITA_SANDBOX_ALLOWED_BACKENDS": {unset: "[docker]", empty: "[docker]", zero: "[docker] W R", neg: "[docker] W R", bad: "[docker] W R"},
	},
}

type matrixCase struct {
	name   string
	raw    string
	set    bool
	expect string
}

// casesFor generates the input classes that apply to a variable's parser.
func casesFor(v *Var, r row) (cases []matrixCase, missing []string) {
	add := func(name, raw string, set bool, expect string) {
		if expect == "" {
			missing = append(missing, name)
			return
		}
		cases = append(cases, matrixCase{name, raw, set, expect})
	}
	add("unset", "", false, r.unset)
	add("empty", "", true, r.empty)
	if v.Default != "" {
		add("default", v.Default, true, r.def)
	} else if r.def != "" {
		missing = append(missing, "default (row has a cell but the variable has no default literal)")
	}
	add("zero", "0", true, r.zero)
	add("negative", "-5", true, r.neg)
	add("garbage", "abc", true, r.bad)
	extra := map[string]bool{"frac": r.frac != "", "nan": r.nan != "", "inf": r.inf != "", "on": r.on != "", "off": r.off != "", "word": r.word != ""}
	switch v.Kind {
	case KindInt:
		add("fraction", "1.5", true, r.frac)
		delete(extra, "frac")
	case KindFloat:
		add("nan", "nan", true, r.nan)
		add("inf", "inf", true, r.inf)
		delete(extra, "nan")
		delete(extra, "inf")
	case KindExact01, KindStrip1, KindStrictBool, KindLooseBool:
		add("spaced 1", " 1 ", true, r.on)
		add("spaced 0", " 0 ", true, r.off)
		add("true", "true", true, r.word)
		delete(extra, "on")
		delete(extra, "off")
		delete(extra, "word")
	}
	for k, has := range extra {
		if has {
			missing = append(missing, k+" (cell given for a parser that has no such case)")
		}
	}
	return cases, missing
}

func loadOne(t *testing.T, role Role, name, raw string, set, strict bool) (*Config, error) {
	t.Helper()
	env := map[string]string{}
	if set {
		env[name] = raw
	}
	return Load(role, strict, WithEnv(env), WithProcess(4242, "host-a", 8))
}

func TestMatrixCoversRegistry(t *testing.T) {
	seen := map[string]bool{}
	for _, v := range registry() {
		seen[v.Name] = true
		if _, ok := matrix[v.Name]; !ok {
			t.Errorf("%s: no row in the matrix; every variable needs its expected outcomes", v.Name)
		}
	}
	for name := range matrix {
		if !seen[name] {
			t.Errorf("%s: matrix row for a variable the registry does not have", name)
		}
	}
}

func TestMatrix(t *testing.T) {
	for _, v := range registry() {
		r, ok := matrix[v.Name]
		if !ok {
			continue // reported by TestMatrixCoversRegistry
		}
		checkRow(t, RoleDev, v, r)
	}
}

// TestRoleMatrix checks the rows whose outcome depends on the role, loaded for that role.
func TestRoleMatrix(t *testing.T) {
	vars := map[string]*Var{}
	for _, v := range registry() {
		vars[v.Name] = v
	}
	for _, role := range []Role{RoleWorker, RoleConsole} {
		rows := roleMatrix[role]
		if len(rows) == 0 {
			t.Errorf("role %s has no rows", role)
		}
		t.Run(string(role), func(t *testing.T) {
			for _, name := range slices.Sorted(maps.Keys(rows)) {
				v, ok := vars[name]
				if !ok {
					t.Errorf("%s: role matrix row for a variable the registry does not have", name)
					continue
				}
				if !v.inRole(role) {
					t.Errorf("%s: row for role %s, which does not read it", name, role)
					continue
				}
				checkRow(t, role, v, rows[name])
			}
		})
	}
}

// checkRow runs every input class of one row through strict and non-strict loads for role.
func checkRow(t *testing.T, role Role, v *Var, r row) {
	t.Helper()
	cases, missing := casesFor(v, r)
	for _, m := range missing {
		t.Errorf("%s: matrix row incomplete: %s", v.Name, m)
	}
	for _, tc := range cases {
		t.Run(v.Name+"/"+tc.name, func(t *testing.T) {
			wantValue, wantWarn, wantReject := parseCell(tc.expect)

			// Strict preflight.
			cfg, err := loadOne(t, role, v.Name, tc.raw, tc.set, true)
			e := cfg.entries[v.Name]
			if wantReject {
				if err == nil || e.problem == nil {
					t.Fatalf("input %q: strict preflight accepted it (value %s), want a rejection", tc.raw, fmtValue(e.value))
				}
				if !strings.Contains(err.Error(), v.Name+": ") {
					t.Fatalf("rejection does not name the variable: %v", err)
				}
			} else {
				if e.problem != nil {
					t.Fatalf("input %q: strict preflight rejected it: %s", tc.raw, e.problem.Message)
				}
				if got := fmtValue(e.value); got != wantValue {
					t.Fatalf("input %q: value %s, want %s", tc.raw, got, wantValue)
				}
				if got := len(e.warnings) > 0; got != wantWarn {
					t.Fatalf("input %q: warning=%v (%q), want warning=%v", tc.raw, got, e.warnings, wantWarn)
				}
			}

			// Non-strict mode never fails; what strict rejects becomes a warning.
			cfg, err = loadOne(t, role, v.Name, tc.raw, tc.set, false)
			if err != nil {
				t.Fatalf("non-strict Load failed: %v", err)
			}
			e = cfg.entries[v.Name]
			if got := fmtValue(e.value); got != wantValue {
				t.Fatalf("non-strict, input %q: value %s, want %s", tc.raw, got, wantValue)
			}
			if got := len(e.warnings) > 0; got != (wantWarn || wantReject) {
				t.Fatalf("non-strict, input %q: warning=%v (%q), want %v", tc.raw, got, e.warnings, wantWarn || wantReject)
			}
			// The typed accessor returns the same value.
			if got := fmtValue(cfg.get(v.Name)); got != wantValue {
				t.Fatalf("accessor: %s, want %s", got, wantValue)
			}
		})
	}
}

func parseCell(cell string) (value string, warn, reject bool) {
	value = cell
	for {
		switch {
		case strings.HasSuffix(value, " R"):
			reject, value = true, strings.TrimSuffix(value, " R")
		case strings.HasSuffix(value, " W"):
			warn, value = true, strings.TrimSuffix(value, " W")
		default:
			return value, warn, reject
		}
	}
}

func TestParseCell(t *testing.T) {
	for cell, want := range map[string]string{"1 W R": "1|true|true", `"x" W`: `"x"|true|false`, "30": "30|false|false"} {
		v, w, r := parseCell(cell)
		if got := fmt.Sprintf("%s|%v|%v", v, w, r); got != want {
			t.Errorf("parseCell(%q) = %s, want %s", cell, got, want)
		}
	}
}
