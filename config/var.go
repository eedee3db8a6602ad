package config

import (
	"fmt"
	"strconv"
	"strings"
)

// Role names a process role. The dependency table lives in package roles; config only needs
// the names to scope variables and to derive role-dependent defaults.
type Role string

const (
	RoleWorker   Role = "worker"
	RoleConsole  Role = "console"
	RoleFilter   Role = "filter"
	RoleSchedule Role = "schedule"
	RoleDelay    Role = "delay"
	RoleDev      Role = "dev" // every service role in one process; also what `doctor --all` checks
)

// serviceRoles lists the roles that run a service, in display order.
var serviceRoles = []Role{RoleWorker, RoleConsole, RoleFilter, RoleSchedule, RoleDelay}

// scope returns the service roles a role stands for.
func (r Role) scope() []Role {
	if r == RoleDev {
		return serviceRoles
	}
	return []Role{r}
}

// ParseRole validates a role name given on the command line.
func ParseRole(s string) (Role, error) {
	r := Role(strings.ToLower(strings.TrimSpace(s)))
	if r == RoleDev {
		return r, nil
	}
	for _, x := range serviceRoles {
		if r == x {
			return r, nil
		}
	}
	names := []string{}
	for _, x := range serviceRoles {
		names = append(names, string(x))
	}
	return "", fmt.Errorf("unknown role %q (one of %s, dev)", s, strings.Join(names, ", "))
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
	Roles      []Role // service roles that read it
	Default    string // the literal that yields the default when set; "" when the default is derived
	DefaultDoc string // how the default reads in docs
	Rule       string // the 0/negative/invalid rule in words
	Strict     string // what strict preflight rejects, in words ("" = nothing)
	Flag       string // the role flag that overrides it, without dashes
	Secret     bool   // value never shown
	SecretURL  bool   // credentials inside a URL are masked
	NoEffect   bool   // accepted for old deployment files, does nothing in this build
	Semantic   bool   // part of config_generation
	Doc        string // one line: what it does

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

func (v *Var) inRole(r Role) bool {
	for _, s := range r.scope() {
		for _, x := range v.Roles {
			if x == s {
				return true
			}
		}
	}
	return false
}

// ---- builders: each returns a *Var; chained setters fill in the rest ----

func newVar(name string, kind Kind, roles []Role) *Var {
	return &Var{Name: name, Kind: kind, Timing: TimingStartup, Roles: roles}
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

func intVar(name string, roles []Role, def int, zero, neg, bad fix) *Var {
	return numVar(name, roles, numRule{def: float64(def), zero: zero, neg: neg, bad: bad, want: "an integer"})
}

func floatVar(name string, roles []Role, def float64, zero, neg, bad fix) *Var {
	return numVar(name, roles, numRule{def: def, isFloat: true, zero: zero, neg: neg, bad: bad, want: "a finite number"})
}

func numVar(name string, roles []Role, r numRule) *Var {
	kind := KindInt
	if r.isFloat {
		kind = KindFloat
	}
	v := newVar(name, kind, roles)
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

func boolVar(name string, roles []Role, kind Kind, def bool) *Var {
	return boolVarBad(name, roles, kind, def, fix{})
}

func boolVarBad(name string, roles []Role, kind Kind, def bool, bad fix) *Var {
	v := newVar(name, kind, roles)
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

func identityVar(name string, roles []Role, def string) *Var {
	v := newVar(name, KindIdentity, roles)
	v.Default = def
	r := stringRule{identity: true}
	v.parse = func(in input, _ *Config) outcome { return r.parse(in, def) }
	v.Rule = "empty → reject"
	v.Strict = "empty → reject"
	return v
}

// derivedIdentity is an identity whose default comes from other variables.
func derivedIdentity(name string, roles []Role, docDefault string, def func(c *Config) string) *Var {
	v := newVar(name, KindIdentity, roles)
	v.DefaultDoc = docDefault
	r := stringRule{identity: true}
	v.parse = func(in input, c *Config) outcome { return r.parse(in, def(c)) }
	v.Rule = "empty → reject"
	v.Strict = "empty → reject"
	return v
}

func stringVar(name string, roles []Role, def string, blank fix) *Var {
	v := newVar(name, KindString, roles)
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

func derivedString(name string, roles []Role, docDefault string, blank fix, def func(c *Config) string) *Var {
	v := newVar(name, KindString, roles)
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
					hint: "unset it to use the default " + fmtValue(def)}
			}
			o.warn = p
		}
		return o
	}
	return v
}

func enumVar(name string, roles []Role, r enumRule) *Var {
	v := newVar(name, KindEnum, roles)
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

func listVar(name string, roles []Role, r listRule, def []string) *Var {
	v := newVar(name, KindList, roles)
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
	for _, v := range registry() {
		if v.Flag != "" && v.inRole(role) {
			out = append(out, FlagSpec{Name: v.Flag, Var: v.Name, Usage: fmt.Sprintf("%s (overrides %s)", strings.TrimSuffix(v.Doc, "."), v.Name)})
		}
	}
	return out
}
