// Package config is plaita's one reader of the environment: the registry of every variable,
// their parsers, the strict preflight and the config generations.
package config

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/rs/zerolog"
)

// ErrRejected is what every preflight failure matches with errors.Is.
var ErrRejected = errors.New("configuration rejected")

// Problem is one value strict preflight refuses.
type Problem struct {
	Variable string `json:"variable"`
	Raw      string `json:"raw"` // masked for secrets
	Message  string `json:"message"`
	Hint     string `json:"hint,omitempty"`
}

// Events of the structured lines configuration warnings are logged as.
const (
	// EventWarning is a value that was clamped or defaulted, or a combination of values worth
	// an operator's attention.
	EventWarning = "config.warning"
	// EventUnknownVariable is a PLAITA_ variable that is set but not in the registry: a typo or
	// a retired name. It is ignored, never rejected, so old deployment files keep working.
	EventUnknownVariable = "config.unknown_variable"
)

// Warning is one value that was clamped, defaulted or is worth an operator's attention.
type Warning struct {
	Event    string `json:"event"` // EventWarning or EventUnknownVariable
	Variable string `json:"variable"`
	Raw      string `json:"raw"`  // masked for secrets; "" for unknown variables
	Used     string `json:"used"` // the value in effect, masked for secrets; "" for unknown variables
	Message  string `json:"message"`
	// Related names the other variables of a warning about a combination of values.
	Related []string `json:"related,omitempty"`
	// Suggestion is the registered name closest to an unknown variable, when one is close.
	Suggestion string `json:"suggestion,omitempty"`
}

// PreflightError aggregates every problem of one Load into one error.
type PreflightError struct {
	Role     Role
	Problems []Problem
}

func (e *PreflightError) Error() string {
	var b strings.Builder
	n := len(e.Problems)
	fmt.Fprintf(&b, "plaita: configuration rejected (%d problem%s):", n, plural(n))
	for _, p := range e.Problems {
		fmt.Fprintf(&b, "\n  %s: %s", p.Variable, p.Message)
		if p.Hint != "" {
			fmt.Fprintf(&b, " (%s)", p.Hint)
		}
	}
	return b.String()
}

func (e *PreflightError) Unwrap() error { return ErrRejected }

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// Source says where an effective value came from.
type Source string

const (
	SourceDefault Source = "default"
	SourceEnv     Source = "env"
	SourceFlag    Source = "flag"
)

type entry struct {
	v        *Var
	value    any
	source   Source
	from     string // the variable or flag actually read
	raw      string
	set      bool
	inScope  bool
	warnings []string
	problem  *Problem
}

// Config is the effective configuration of one role. It is safe for concurrent use.
type Config struct {
	role     Role
	strict   bool
	lookup   func(string) (string, bool)
	names    func() []string   // every variable name set, to find unknown PLAITA_ names
	flags    map[string]string // variable name → raw flag value
	pid      int
	hostname string
	numCPU   int
	log      zerolog.Logger

	entries map[string]*entry
	order   []*entry
	gens    Generations
	cross   []Warning // combinations of values, see crossChecks
	unknown []Warning // PLAITA_ names set but not registered

	mu sync.Mutex
}

// Option adjusts Load; tests use them to inject the environment and process facts.
type Option func(*Config)

// WithLookup replaces os.LookupEnv. A lookup cannot list what is set, so unless WithNames is
// given too, no variable is reported as unknown (the process's own environment is not a
// stand-in for the one the lookup serves).
func WithLookup(f func(string) (string, bool)) Option { return func(c *Config) { c.lookup = f } }

// WithNames lists the variable names that are set, for the unknown-variable check; it goes
// with WithLookup.
func WithNames(f func() []string) Option { return func(c *Config) { c.names = f } }

// WithEnv reads the environment from a map instead of the process.
func WithEnv(env map[string]string) Option {
	return func(c *Config) {
		c.lookup = func(k string) (string, bool) { v, ok := env[k]; return v, ok }
		c.names = func() []string {
			out := make([]string, 0, len(env))
			for k := range env {
				out = append(out, k)
			}
			return out
		}
	}
}

// environNames returns the names of os.Environ-style KEY=VALUE entries. Windows keeps
// per-drive directories as "=C:=C:\..." entries; they have no name and are skipped.
func environNames(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if name != "" {
			out = append(out, name)
		}
	}
	return out
}

// WithFlags passes role flag values, keyed by variable name; they win over the environment and
// go through the same parser.
func WithFlags(flags map[string]string) Option { return func(c *Config) { c.flags = flags } }

// WithProcess fixes the facts derived defaults use (pid, hostname, cpu count).
func WithProcess(pid int, hostname string, numCPU int) Option {
	return func(c *Config) { c.pid, c.hostname, c.numCPU = pid, hostname, numCPU }
}

// WithLogger is where the loader logs.
func WithLogger(l zerolog.Logger) Option { return func(c *Config) { c.log = l } }

// Load reads every registered variable for role. In strict mode every rejected value of a
// variable the role reads becomes one Problem and the returned error (a *PreflightError) lists
// them all; the Config is returned either way so doctor can show it. In non-strict mode nothing
// is rejected: security gates take their fail-closed value and the rest warn and default.
func Load(role Role, strict bool, opts ...Option) (*Config, error) {
	host, _ := os.Hostname()
	c := &Config{
		role: role, strict: strict,
		pid: os.Getpid(), hostname: host, numCPU: runtime.NumCPU(),
		log:     zerolog.Nop(),
		entries: map[string]*entry{},
	}
	for _, o := range opts {
		o(c)
	}
	if c.lookup == nil {
		c.lookup = os.LookupEnv
		if c.names == nil {
			c.names = func() []string { return environNames(os.Environ()) }
		}
	}
	var problems []Problem
	reads := role.reads()
	for _, v := range registry() {
		e := &entry{v: v, inScope: reads[v.Serves]}
		e.raw, e.set, e.source, e.from = c.read(v)
		c.entries[v.Name] = e
		c.order = append(c.order, e)

		out := v.parse(input{raw: e.raw, set: e.set, flag: e.source == SourceFlag}, c)
		e.value = out.value
		if strict && out.reject != "" && e.inScope {
			e.problem = &Problem{Variable: e.from, Raw: c.mask(v, e.raw), Message: c.maskText(v, e.raw, out.reject), Hint: out.hint}
			problems = append(problems, *e.problem)
		} else if out.warn != "" {
			e.warnings = append(e.warnings, c.maskText(v, e.raw, out.warn))
		}
		if v.check != nil {
			var note string
			e.value, note = v.check(e.value, c)
			if note != "" {
				e.warnings = append(e.warnings, c.maskText(v, e.raw, note))
			}
		}
	}
	c.cross = c.crossWarnings()
	c.unknown = c.unknownVariables()
	c.gens = c.generations()
	if len(problems) > 0 {
		return c, &PreflightError{Role: role, Problems: problems}
	}
	return c, nil
}

// As reads the same environment and flags for another role, non-strict: what that role would
// take from them. The console checks flows with the node types a worker of its environment
// would set up (its own code backend default is another role's).
func (c *Config) As(role Role) *Config {
	out, _ := Load(role, false, WithLookup(c.lookup), WithNames(c.names), WithFlags(c.flags), WithProcess(c.pid, c.hostname, c.numCPU))
	return out
}

// AsWith is As with values of its own for some variables (keyed by variable name), over the
// flags: plaita dev runs every role in one process, each with its own instance id and the
// console's Redis set to the others'.
func (c *Config) AsWith(role Role, values map[string]string) *Config {
	flags := make(map[string]string, len(c.flags)+len(values))
	for k, v := range c.flags {
		flags[k] = v
	}
	for k, v := range values {
		flags[k] = v
	}
	out, _ := Load(role, false, WithLookup(c.lookup), WithNames(c.names), WithFlags(flags), WithProcess(c.pid, c.hostname, c.numCPU))
	return out
}

// IsSet reports whether a variable was given (by a flag or the environment) rather than
// defaulted.
func (c *Config) IsSet(name string) bool {
	e, ok := c.entries[name]
	return ok && e.set
}

// read finds a variable's raw value: flag, then its name, then its fallback name.
func (c *Config) read(v *Var) (raw string, set bool, src Source, from string) {
	if f, ok := c.flags[v.Name]; ok {
		return f, true, SourceFlag, "--" + v.Flag
	}
	if s, ok := c.lookup(v.Name); ok {
		return s, true, SourceEnv, v.Name
	}
	if v.Fallback != "" {
		if s, ok := c.lookup(v.Fallback); ok {
			return s, true, SourceEnv, v.Fallback
		}
	}
	return "", false, SourceDefault, v.Name
}

// get returns the effective value. Every variable is read once, when the configuration is
// loaded: a Go process's environment cannot be changed from outside, so the call/request
// timings of the implementation this build replaces (it re-read those on use) buy nothing here
// and would cost a lock per use. The registry keeps those timings for the reference.
func (c *Config) get(name string) any {
	e, ok := c.entries[name]
	if !ok {
		panic("config: variable " + name + " is not registered")
	}
	return e.value
}

// ParseLogLevel checks a --log-level value with PLAITA_LOG_LEVEL's own rule and returns the
// canonical level; a bad value is a *PreflightError worded as a role's preflight words it. It
// serves commands that take --log-level without loading a configuration.
func ParseLogLevel(raw string) (string, error) {
	for _, v := range registry() {
		if v.Name == "PLAITA_LOG_LEVEL" {
			out := v.parse(input{raw: raw, set: true, flag: true}, nil)
			if out.reject != "" {
				return "", &PreflightError{Problems: []Problem{{Variable: "--" + v.Flag, Raw: raw, Message: out.reject, Hint: out.hint}}}
			}
			return out.value.(string), nil
		}
	}
	panic("config: PLAITA_LOG_LEVEL is not registered")
}

// SetLogger replaces where the configuration logs.
func (c *Config) SetLogger(l zerolog.Logger) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.log = l
}

// str and int read load-time values; checks and derived defaults use them while loading.
func (c *Config) str(name string) string { return c.entries[name].value.(string) }
func (c *Config) int(name string) int    { return c.entries[name].value.(int) }

// Role is the role this configuration was loaded for.
func (c *Config) Role() Role { return c.role }

// Key is a typed accessor of one registered variable; the generated keys.go declares one per
// variable, e.g. config.WorkerConcurrency.In(cfg).
type Key[T any] string

// In returns the variable's effective value in c.
func (k Key[T]) In(c *Config) T { return c.get(string(k)).(T) }

// Warnings lists the warnings of the variables the role reads in registry order, then the
// warnings about combinations of values, then the unknown PLAITA_ variables by name.
func (c *Config) Warnings() []Warning {
	var out []Warning
	for _, e := range c.order {
		if !e.inScope {
			continue
		}
		for _, w := range e.warnings {
			out = append(out, Warning{Event: EventWarning, Variable: e.from, Raw: c.mask(e.v, e.raw), Used: c.mask(e.v, fmtValue(e.value)), Message: w})
		}
	}
	out = append(out, c.cross...)
	return append(out, c.unknown...)
}

// LogWarnings writes every warning once as a structured line: event=config.warning for values,
// event=config.unknown_variable for names the registry does not know.
func (c *Config) LogWarnings(log zerolog.Logger) {
	for _, w := range c.Warnings() {
		ev := log.Warn().Str("event", w.Event).Str("variable", w.Variable)
		if w.Event == EventUnknownVariable {
			// No raw value: an unknown name may be a misspelled secret.
			if w.Suggestion != "" {
				ev = ev.Str("suggestion", w.Suggestion)
			}
		} else {
			ev = ev.Str("raw", w.Raw).Str("used", w.Used)
			if len(w.Related) > 0 {
				ev = ev.Strs("related", w.Related)
			}
		}
		ev.Msg(w.Message)
	}
}

// crossWarnings runs the checks of value combinations over the variables the role reads. A
// check is skipped when one of its variables was rejected: the role stops anyway, and a
// message about the default standing in for the rejected value would only mislead.
func (c *Config) crossWarnings() []Warning {
	var out []Warning
	for _, x := range crossChecks() {
		usable := true
		for _, n := range x.vars {
			if e := c.entries[n]; !e.inScope || e.problem != nil {
				usable = false
			}
		}
		if !usable {
			continue
		}
		msg := x.check(c)
		if msg == "" {
			continue
		}
		first := c.entries[x.vars[0]]
		w := Warning{Event: EventWarning, Variable: first.from, Raw: c.mask(first.v, first.raw),
			Used: c.mask(first.v, fmtValue(first.value)), Message: msg}
		for _, n := range x.vars[1:] {
			w.Related = append(w.Related, c.entries[n].from)
		}
		out = append(out, w)
	}
	return out
}

// unknownVariables reports every PLAITA_ name that is set but not registered, once each, with
// the closest registered name when one is close enough to be a typo. The prefix is matched
// in any case: plaita_log_level is as silently ignored as a misspelling.
func (c *Config) unknownVariables() []Warning {
	if c.names == nil {
		return nil
	}
	var out []Warning
	seen := map[string]bool{}
	for _, name := range slices.Sorted(slices.Values(c.names())) {
		if seen[name] || !strings.HasPrefix(strings.ToUpper(name), "PLAITA_") || notConfiguration(name) {
			continue
		}
		seen[name] = true
		if _, known := c.entries[name]; known {
			continue
		}
		w := Warning{Event: EventUnknownVariable, Variable: name, Suggestion: closestName(name, c.order)}
		if w.Suggestion != "" {
			w.Message = fmt.Sprintf("%s is not a plaita variable and is ignored; did you mean %s?", name, w.Suggestion)
		} else {
			w.Message = fmt.Sprintf("%s is not a plaita variable and is ignored (misspelt, or not used by this build)", name)
		}
		out = append(out, w)
	}
	return out
}

// LogEffective writes the event=config.effective line with the three generations.
func (c *Config) LogEffective(log zerolog.Logger) {
	log.Info().Str("event", "config.effective").
		Str("config_family", c.gens.Family).Str("config_generation", c.gens.Config).
		Str("budget_generation", c.gens.Budget).Int("warnings", len(c.Warnings())).Msg("configuration loaded")
}

// mask hides secrets: whole values of secret variables, the password part of URLs.
func (c *Config) mask(v *Var, s string) string {
	switch {
	case s == "":
		return s
	case v.Secret:
		return "****"
	case v.SecretURL:
		return maskURL(s)
	}
	return s
}

// maskText removes a secret raw value from a message built around it.
func (c *Config) maskText(v *Var, raw, msg string) string {
	if raw == "" || (!v.Secret && !v.SecretURL) {
		return msg
	}
	return strings.ReplaceAll(msg, raw, c.mask(v, raw))
}

// MaskURL is a URL as reports and logs print it: scheme, host and path, no password.
func MaskURL(s string) string { return maskURL(s) }

// maskURL keeps scheme, host and path and hides any password.
func maskURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		if strings.Contains(s, "@") {
			return "****"
		}
		return s
	}
	if u.User == nil {
		return s
	}
	if _, has := u.User.Password(); has {
		return u.Redacted()
	}
	// redis://token@host: a bare user part is a credential too.
	u.User = url.User("****")
	return u.String()
}
