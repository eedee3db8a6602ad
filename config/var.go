package config

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Role names a process role. The role table is in package roles (roles/roles.go): one row per
// role declares its name, what it does, the capabilities its configuration serves and whether
// plaita dev runs it. config must not import roles, so `go generate ./roles` writes the part of
// each row the configuration reads into roles_gen.go (the constants and roleTable), and a test
// in roles keeps that file in step with the table.
type Role string

// RoleDef is what the configuration knows of one row of the role table.
type RoleDef struct {
	Role    Role
	Summary string       // what the role does, as `plaita roles` says it
	Serves  []Capability // the capabilities whose variables the role reads (CapProcess is implied)
	Dev     bool         // plaita dev runs it, and so reads its variables
}

// Capability is a part of a role's work that configuration variables serve. A variable serves
// one capability; the roles that read it are the rows of the role table that have it, so a new
// role declares its capabilities and reads their variables without a variable changing.
type Capability string

const (
	CapProcess    Capability = "process"
	CapRedis      Capability = "redis"
	CapProducer   Capability = "producer"
	CapConsumer   Capability = "consumer"
	CapEngine     Capability = "engine"
	CapEvents     Capability = "events"
	CapDelayQueue Capability = "delay-queue"
	CapTenant     Capability = "tenant"
	CapStarts     Capability = "starts"
	CapConsoleAPI Capability = "console-api"
	CapEventMatch Capability = "event-match"
	CapCron       Capability = "cron"
)

// capabilityDoc is a capability and what it stands for, in words.
type capabilityDoc struct {
	cap Capability
	doc string
}

// capabilities lists every capability, in the order the docs show them.
func capabilities() []capabilityDoc {
	return []capabilityDoc{
		{CapProcess, "every service role has it: instance id, metrics endpoint, log level"},
		{CapRedis, "connects to PLAITA_REDIS_URL"},
		{CapProducer, "reads or writes the task stream at PLAITA_QUEUE_NAME"},
		{CapConsumer, "consumes the task stream: consumer group, leases, deliveries, dead letters, admission gates"},
		{CapEngine, "runs executions: the engine, its nodes and sandboxes, the credential store"},
		{CapEvents, "reads and writes event records and their indexes"},
		{CapDelayQueue, "writes or moves the delay queue's entries"},
		{CapTenant, "tenant status and quota: the worker admits starts by them, the console publishes and counts them"},
		{CapStarts, "enqueues starts on PLAITA_CONSOLE_TASK_QUEUE"},
		{CapConsoleAPI, "serves the console's API and UI from its database"},
		{CapEventMatch, "matches published events to the executions waiting for them"},
		{CapCron, "scans the cron schedules for due ticks"},
	}
}

// serviceRoles lists the roles that run a service, in table order: every row but dev.
func serviceRoles() []Role {
	var out []Role
	for _, d := range roleTable() {
		if d.Role != RoleDev {
			out = append(out, d.Role)
		}
	}
	return out
}

// scope returns the service roles a role stands for: dev stands for the roles it runs.
func (r Role) scope() []Role {
	if r != RoleDev {
		return []Role{r}
	}
	var out []Role
	for _, d := range roleTable() {
		if d.Dev {
			out = append(out, d.Role)
		}
	}
	return out
}

// reads is the set of capabilities whose variables r reads: those of the service roles it
// stands for, CapProcess included.
func (r Role) reads() map[Capability]bool {
	out := map[Capability]bool{}
	scope := r.scope()
	for _, d := range roleTable() {
		if d.Role == RoleDev || !slices.Contains(scope, d.Role) {
			continue
		}
		out[CapProcess] = true
		for _, c := range d.Serves {
			out[c] = true
		}
	}
	return out
}

// ParseRole validates a role name given on the command line.
func ParseRole(s string) (Role, error) {
	r := Role(strings.ToLower(strings.TrimSpace(s)))
	names := []string{}
	for _, d := range roleTable() {
		if r == d.Role {
			return r, nil
		}
		names = append(names, string(d.Role))
	}
	return "", fmt.Errorf("unknown role %q (one of %s)", s, strings.Join(names, ", "))
}

// Timing says when the implementation plaita replaces read a variable (import, startup,
// constructor, per call, per request, at launch), for operators who know it. It is documentation:
// this build reads every variable once, at start (docs/configuration.md).
type Timing string

const (
	TimingImport  Timing = "import"
	TimingStartup Timing = "startup"
	TimingCtor    Timing = "ctor"
	TimingCall    Timing = "call"
	TimingRequest Timing = "request"
	TimingLaunch  Timing = "launch"
)

// Var is one registry entry: everything the loader, doctor, the docs and the tests know about
// one environment variable.
type Var struct {
	Name       string
	Fallback   string // older name read when Name is unset
	Kind       Kind
	Timing     Timing
	Section    string
	Serves     Capability // the roles that have it read the variable
	Default    string     // the literal that yields the default when set; "" when the default is derived
	DefaultDoc string     // how the default reads in docs
	Rule       string     // the 0/negative/invalid rule in words
	Strict     string     // what strict preflight rejects, in words ("" = nothing)
	Flag       string     // the role flag that overrides it, without dashes
	Secret     bool       // value never shown
	SecretURL  bool       // credentials inside a URL are masked
	NoEffect   bool       // accepted for old deployment files, does nothing in this build
	Semantic   bool       // part of config_generation
	Doc        string     // one line: what it does

	parse func(in input, c *Config) outcome
	// check adjusts or comments on a parsed value using variables resolved before it.
	check func(v any, c *Config) (any, string)
}

// GoType is the Go type its typed accessor returns.
func (v *Var) GoType() string {
	switch v.Kind {
	case KindInt:
		return "int"
	case KindFloat:
		return "float64"
	case KindExact01, KindStrip1, KindStrictBool, KindLooseBool:
		return "bool"
	case KindList:
		return "[]string"
	}
	return "string"
}

// KeyName is the exported name of its typed accessor: PLAITA_WORKER_CONCURRENCY → WorkerConcurrency.
func (v *Var) KeyName() string {
	var b strings.Builder
	for _, part := range strings.Split(strings.TrimPrefix(v.Name, "PLAITA_"), "_") {
		if part == "" {
			continue
		}
		if w, ok := initialisms[part]; ok {
			b.WriteString(w)
			continue
		}
		b.WriteString(part[:1])
		b.WriteString(strings.ToLower(part[1:]))
	}
	return b.String()
}

var initialisms = map[string]string{
	"URL": "URL", "ID": "ID", "TTL": "TTL", "MS": "MS", "DLQ": "DLQ", "HTTP": "HTTP", "DNS": "DNS",
	"API": "API", "DB": "DB", "CPUS": "CPUs", "GIB": "GiB", "MB": "MB", "BG": "BG",
}

func (v *Var) inRole(r Role) bool { return r.reads()[v.Serves] }

// Roles are the service roles that read the variable, in table order.
func (v *Var) Roles() []Role {
	var out []Role
	for _, r := range serviceRoles() {
		if v.inRole(r) {
			out = append(out, r)
		}
	}
	return out
}

// ---- builders: each returns a *Var; chained setters fill in the rest ----

func newVar(name string, kind Kind, serves Capability) *Var {
	return &Var{Name: name, Kind: kind, Timing: TimingStartup, Serves: serves}
}

func (v *Var) fallback(n string) *Var                          { v.Fallback = n; return v }
func (v *Var) timing(t Timing) *Var                            { v.Timing = t; return v }
func (v *Var) doc(s string) *Var                               { v.Doc = s; return v }
func (v *Var) rule(s string) *Var                              { v.Rule = s; return v }
func (v *Var) strict(s string) *Var                            { v.Strict = s; return v }
func (v *Var) flag(s string) *Var                              { v.Flag = s; return v }
func (v *Var) secret() *Var                                    { v.Secret = true; return v }
func (v *Var) secretURL() *Var                                 { v.SecretURL = true; return v }
func (v *Var) noEffect() *Var                                  { v.NoEffect = true; return v }
func (v *Var) semantic() *Var                                  { v.Semantic = true; return v }
func (v *Var) defDoc(s string) *Var                            { v.DefaultDoc = s; return v }
func (v *Var) checked(f func(any, *Config) (any, string)) *Var { v.check = f; return v }

func intVar(name string, serves Capability, def int, zero, neg, bad fix) *Var {
	return numVar(name, serves, numRule{def: float64(def), zero: zero, neg: neg, bad: bad, want: "an integer"})
}

func floatVar(name string, serves Capability, def float64, zero, neg, bad fix) *Var {
	return numVar(name, serves, numRule{def: def, isFloat: true, zero: zero, neg: neg, bad: bad, want: "a finite number"})
}

func numVar(name string, serves Capability, r numRule) *Var {
	kind := KindInt
	if r.isFloat {
		kind = KindFloat
	}
	v := newVar(name, kind, serves)
	v.Default = fmtValue(r.format(r.def))
	v.parse = func(in input, _ *Config) outcome { return r.parse(in) }
	v.Rule = numRuleDoc(r, v.Default)
	var rej []string
	for _, c := range []struct {
		f fix
		s string
	}{{r.zero, "0"}, {r.neg, "negative"}, {r.bad, "invalid"}} {
		if c.f.reject {
			rej = append(rej, c.s)
		}
	}
	if len(rej) > 0 {
		v.Strict = strings.Join(rej, " / ") + " → reject"
	}
	return v
}

func numRuleDoc(r numRule, def string) string {
	s := fmt.Sprintf("0 %s; negative %s; invalid %s", r.zero.describe(def), r.neg.describe(def), r.bad.describe(def))
	if r.max > 0 {
		s += "; above " + r.maxText + " is invalid"
	}
	return s
}

// upTo caps a numeric variable: values above max are invalid.
func upTo(r numRule, max float64) numRule {
	r.max = max
	r.maxText = strconv.FormatFloat(max, 'f', -1, 64)
	return r
}

func boolVar(name string, serves Capability, kind Kind, def bool) *Var {
	return boolVarBad(name, serves, kind, def, fix{})
}

func boolVarBad(name string, serves Capability, kind Kind, def bool, bad fix) *Var {
	v := newVar(name, kind, serves)
	r := boolRule{kind: kind, def: def, bad: bad}
	v.parse = func(in input, _ *Config) outcome { return r.parse(in) }
	v.DefaultDoc = onOff(def)
	switch kind {
	case KindExact01:
		v.Rule = "only byte-exact 1 or 0 counts; anything else keeps " + onOff(def) + " (WARNING)"
		if def {
			v.Default = "1"
		} else {
			v.Default = "0"
		}
	case KindStrip1:
		v.Rule = "on only when the trimmed value is 1 (\" 1 \" is on, \"true\" is off + WARNING)"
		v.Default = "0"
	case KindLooseBool:
		v.Rule = "0/false/no/off → off; anything else → on (unknown words + WARNING)"
		v.Default = strconv.FormatBool(def)
	case KindStrictBool:
		v.Default = strconv.FormatBool(def)
		v.Rule = fmt.Sprintf("1/true/yes/on or 0/false/no/off (trimmed, any case); invalid → %t + WARNING", bad.to != 0)
		if bad.reject {
			v.Strict = "invalid → reject"
		}
	}
	return v
}

func identityVar(name string, serves Capability, def string) *Var {
	v := newVar(name, KindIdentity, serves)
	v.Default = def
	r := stringRule{identity: true}
	v.parse = func(in input, _ *Config) outcome { return r.parse(in, def) }
	v.Rule = "empty → reject"
	v.Strict = "empty → reject"
	return v
}

// derivedIdentity is an identity whose default comes from other variables.
func derivedIdentity(name string, serves Capability, docDefault string, def func(c *Config) string) *Var {
	v := newVar(name, KindIdentity, serves)
	v.DefaultDoc = docDefault
	r := stringRule{identity: true}
	v.parse = func(in input, c *Config) outcome { return r.parse(in, def(c)) }
	v.Rule = "empty → reject"
	v.Strict = "empty → reject"
	return v
}

func stringVar(name string, serves Capability, def string, blank fix) *Var {
	v := newVar(name, KindString, serves)
	v.Default = def
	r := stringRule{blank: blank}
	v.parse = func(in input, _ *Config) outcome { return r.parse(in, def) }
	if blank.mode == fixDefault {
		v.Rule = "blank → default"
		if blank.warn {
			v.Rule += " + WARNING"
		}
	}
	return v
}

func derivedString(name string, serves Capability, docDefault string, blank fix, def func(c *Config) string) *Var {
	v := newVar(name, KindString, serves)
	v.DefaultDoc = docDefault
	r := stringRule{blank: blank}
	v.parse = func(in input, c *Config) outcome { return r.parse(in, def(c)) }
	v.Rule = "blank → default"
	if blank.warn {
		v.Rule += " + WARNING"
	}
	return v
}

// validated adds a value check to a string or identity variable.
func (v *Var) validated(f func(s string) (problem string, fatal bool)) *Var {
	inner := v.parse
	v.parse = func(in input, c *Config) outcome {
		o := inner(in, c)
		if o.reject != "" || !in.set {
			return o
		}
		s, _ := o.value.(string)
		if s == "" {
			return o
		}
		if p, fatal := f(s); p != "" {
			def := inner(input{}, c).value
			if fatal {
				return outcome{value: def, warn: p + "; using the default " + fmtValue(def), reject: p,
					hint: in.useDefault(fmtValue(def))}
			}
			o.warn = p
		}
		return o
	}
	return v
}

func enumVar(name string, serves Capability, r enumRule) *Var {
	v := newVar(name, KindEnum, serves)
	v.Default = r.def
	v.parse = func(in input, _ *Config) outcome { return r.parse(in) }
	used := r.def
	if r.badTo != "" {
		used = r.badTo
	}
	v.Rule = fmt.Sprintf("one of %s (trimmed, any case); invalid → %s + WARNING", strings.Join(r.allowed, ", "), used)
	if r.bad.reject {
		v.Strict = "invalid → reject"
	}
	return v
}

func listVar(name string, serves Capability, r listRule, def []string) *Var {
	v := newVar(name, KindList, serves)
	v.Default = strings.Join(def, ",")
	if len(def) == 0 {
		v.DefaultDoc = "unset"
	}
	v.parse = func(in input, _ *Config) outcome { return r.parse(in, def) }
	if r.allowed != nil {
		v.Rule = "items from " + strings.Join(r.allowed, ", ") + "; unknown item → reject"
		v.Strict = "unknown item → reject"
	} else {
		v.Rule = "items trimmed, empty items ignored"
	}
	return v
}

// FlagSpec is a role flag that overrides a variable.
type FlagSpec struct {
	Name  string // without dashes
	Var   string
	Usage string
}

// Flags lists the override flags of the variables a role reads, in registry order.
func Flags(role Role) []FlagSpec {
	var out []FlagSpec
	reads := role.reads()
	for _, v := range registry() {
		if v.Flag != "" && reads[v.Serves] {
			out = append(out, FlagSpec{Name: v.Flag, Var: v.Name, Usage: fmt.Sprintf("%s (overrides %s)", strings.TrimSuffix(v.Doc, "."), v.Name)})
		}
	}
	return out
}
