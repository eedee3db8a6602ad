package config

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
)

// ReportSchema names the layout of `plaita doctor --json`. Fields are only ever added; a
// changed meaning gets a new schema name. docs/doctor.md documents every field.
const ReportSchema = "plaita.doctor/v1"

// EffectNone marks variables kept for old deployment files that do nothing in this build.
const (
	EffectActive = "active"
	EffectNone   = "accepted, no effect in this build"
)

// Report is what doctor prints: every variable the role reads, with its effective value.
type Report struct {
	Schema      string      `json:"schema"`
	Role        Role        `json:"role"`
	Roles       []Role      `json:"roles"`
	Strict      bool        `json:"strict"`
	OK          bool        `json:"ok"`
	Generations Generations `json:"generations"`
	Variables   []VarReport `json:"variables"`
	Warnings    []Warning   `json:"warnings"`
	Problems    []Problem   `json:"problems"`
}

// VarReport is one variable in a Report.
type VarReport struct {
	Name        string   `json:"name"`
	Fallback    string   `json:"fallback,omitempty"`
	Section     string   `json:"section"`
	Kind        Kind     `json:"kind"`
	Timing      Timing   `json:"timing"`
	Roles       []Role   `json:"roles"`
	Value       any      `json:"value"`
	Default     string   `json:"default"`
	Source      Source   `json:"source"`
	From        string   `json:"from,omitempty"`
	Raw         *string  `json:"raw"`
	Secret      bool     `json:"secret"`
	Effect      string   `json:"effect"`
	Generations []string `json:"generations"`
	Warnings    []string `json:"warnings"`
	Problem     *Problem `json:"problem"`
}

// Report describes the variables the role reads.
func (c *Config) Report() Report {
	r := Report{
		Schema: ReportSchema, Role: c.role, Roles: c.role.scope(), Strict: c.strict,
		Generations: c.gens, Variables: []VarReport{}, Warnings: c.Warnings(), Problems: []Problem{},
	}
	if r.Warnings == nil {
		r.Warnings = []Warning{}
	}
	for _, e := range c.order {
		if !e.inScope {
			continue
		}
		v := e.v
		vr := VarReport{
			Name: v.Name, Fallback: v.Fallback, Section: v.Section, Kind: v.Kind, Timing: v.Timing,
			Roles: v.Roles(), Value: c.shown(e), Default: defaultText(v), Source: e.source,
			Secret: v.Secret || v.SecretURL, Effect: EffectActive, Generations: genNames(v.Name, v.Semantic),
			Warnings: append([]string{}, e.warnings...), Problem: e.problem,
		}
		if e.source != SourceDefault {
			vr.From = e.from
		}
		if e.set {
			raw := c.mask(v, e.raw)
			vr.Raw = &raw
		}
		if v.NoEffect {
			vr.Effect = EffectNone
		}
		if e.problem != nil {
			r.Problems = append(r.Problems, *e.problem)
		}
		r.Variables = append(r.Variables, vr)
	}
	r.OK = len(r.Problems) == 0
	return r
}

// shown is the effective value as doctor may print it.
func (c *Config) shown(e *entry) any {
	if s, ok := e.value.(string); ok {
		return c.mask(e.v, s)
	}
	return e.value
}

func defaultText(v *Var) string {
	if v.DefaultDoc != "" {
		return v.DefaultDoc
	}
	return v.Default
}

func genNames(name string, semantic bool) []string {
	out := []string{}
	if slices.Contains(familyFields, name) {
		out = append(out, "config_family")
	}
	if semantic {
		out = append(out, "config_generation")
	}
	if slices.Contains(budgetFields, name) {
		out = append(out, "budget_generation")
	}
	return out
}

// WriteText prints the report for a terminal.
func (r Report) WriteText(w io.Writer) error {
	fmt.Fprintf(w, "plaita doctor: role %s", r.Role)
	if r.Role == RoleDev {
		fmt.Fprint(w, " (every service role)")
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	section := ""
	for _, v := range r.Variables {
		if v.Section != section {
			section = v.Section
			fmt.Fprintf(tw, "\n%s\n", section)
		}
		src := string(v.Source)
		if v.From != "" && v.From != v.Name {
			src += " (" + v.From + ")"
		}
		mark := ""
		switch {
		case v.Problem != nil:
			mark = "REJECTED: " + v.Problem.Message
		case len(v.Warnings) > 0:
			mark = "WARNING: " + strings.Join(v.Warnings, "; ")
		case v.Effect == EffectNone:
			mark = v.Effect
		}
		timing := "read at start"
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", v.Name, fmtValue(v.Value), src, timing, mark)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// Warnings that belong to no single row of the table above.
	var cross, unknown []Warning
	for _, x := range r.Warnings {
		switch {
		case x.Event == EventUnknownVariable:
			unknown = append(unknown, x)
		case len(x.Related) > 0:
			cross = append(cross, x)
		}
	}
	for _, group := range []struct {
		title string
		list  []Warning
	}{{"Cross-variable checks", cross}, {"Unknown variables (ignored)", unknown}} {
		if len(group.list) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s\n", group.title)
		for _, x := range group.list {
			fmt.Fprintf(w, "  WARNING: %s\n", x.Message)
		}
	}
	fmt.Fprintf(w, "\nGenerations\n  config_family      %s\n  config_generation  %s\n  budget_generation  %s\n",
		r.Generations.Family, r.Generations.Config, r.Generations.Budget)
	fmt.Fprintf(w, "\n%d warning%s, %d problem%s\n", len(r.Warnings), plural(len(r.Warnings)), len(r.Problems), plural(len(r.Problems)))
	if !r.OK {
		err := &PreflightError{Role: r.Role, Problems: r.Problems}
		fmt.Fprintln(w, err.Error())
	}
	return nil
}
