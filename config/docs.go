package config

import (
	"bytes"
	"fmt"
	"go/format"
	"strconv"
	"strings"
)

//go:generate go run ./internal/gen -docs ../docs/configuration.md -keys keys_gen.go

// Markdown renders docs/configuration.md from the registry.
func Markdown() []byte {
	var b bytes.Buffer
	b.WriteString("# plaita configuration reference\n\n")
	b.WriteString("<!-- Generated from config/registry.go by `go generate ./config`; do not edit. -->\n\n")
	b.WriteString("Every variable plaita reads, with its parser, default, read timing and the rule for 0,\n")
	b.WriteString("negative and invalid values. `plaita doctor --all` shows the effective values on a machine.\n\n")
	b.WriteString("Every role runs the strict preflight at start: a value in the *strict preflight* column\n")
	b.WriteString("stops the role with exit status 2 and one message listing every problem. Values marked\n")
	b.WriteString("WARNING are used as shown and logged once as `event=config.warning`.\n\n")
	b.WriteString("Read timing: when the Python implementation this build replaces read each variable. In this\n")
	b.WriteString("build every variable is read once, when a process starts: change one and restart the role.\n\n")
	b.WriteString("Parsers: **exact01** compares bytes (`1`/`0` only); **strip1** is on when the trimmed value\n")
	b.WriteString("is `1`; **strictbool** takes 1/true/yes/on and 0/false/no/off (trimmed, any case);\n")
	b.WriteString("**loosebool** is false only for 0/false/no/off; **identity** refuses an empty value.\n")
	writeRoles(&b)
	section := ""
	for _, v := range registry() {
		if v.Section != section {
			section = v.Section
			fmt.Fprintf(&b, "\n## %s\n\n", section)
			b.WriteString("| variable | what it does | parser | default | timing | roles | 0 / negative / invalid | strict preflight |\n")
			b.WriteString("|---|---|---|---|---|---|---|---|\n")
		}
		name := "`" + v.Name + "`"
		if v.Fallback != "" {
			name += " (fallback `" + v.Fallback + "`)"
		}
		if v.Flag != "" {
			name += " / `--" + v.Flag + "`"
		}
		rule := v.Rule
		if v.NoEffect {
			rule = strings.TrimPrefix(rule+"; ", "; ") + EffectNone
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", name, cell(v.Doc), v.Kind, cell(defaultText(v)), v.Timing,
			roleList(v.Roles()), cell(rule), cell(v.Strict))
	}
	b.WriteString("\n## Checks across variables\n\n")
	b.WriteString("Values that pass one by one can still be wrong together. These are logged as `event=config.warning`\n")
	b.WriteString("(with `related` naming the other variables) by the roles that read every variable involved; they never\n")
	b.WriteString("stop a role.\n\n")
	for _, x := range crossChecks() {
		fmt.Fprintf(&b, "- %s\n", x.doc)
	}
	b.WriteString("\n## Unknown variables\n\n")
	b.WriteString("A `PLAITA_` variable that is set but is not listed here (in any letter case) is ignored and logged\n")
	b.WriteString("once as `event=config.unknown_variable`, with `suggestion` naming the closest variable when the name\n")
	b.WriteString("looks like a typo (`PLAITA_WORKER_CONCURENCY` → `PLAITA_WORKER_CONCURRENCY`). It is a warning, never a\n")
	b.WriteString("rejection, so deployment files that still carry retired names keep working. Its value is not shown:\n")
	b.WriteString("a misspelt secret is still a secret. `PLAITA_TEST_REDIS_URL` and `PLAITA_TEST_POSTGRES_URL` (the test suite's Redis\n")
	b.WriteString("and PostgreSQL) are not reported.\n")
	b.WriteString("\n## Config generations\n\n")
	b.WriteString("Computed at start, logged as `event=config.effective`, shown by `plaita doctor`.\n\n")
	fmt.Fprintf(&b, "- `config_family` = `cf1-` + sha256 of %s, the task schema version (%d) and the namespace (`%s`), first 12 hex digits.\n",
		codeList(familyFields), TaskSchemaVersion, Namespace)
	fmt.Fprintf(&b, "- `budget_generation` = `bg1-` + sha256 of %s.\n", codeList(budgetFields))
	fmt.Fprintf(&b, "- `config_generation` = `cfg1-` + sha256 of every semantics-affecting variable: %s.\n", codeList(SemanticFields()))
	b.WriteString("\nEach input is one `NAME=value` line of the effective value; log level, ports, ids and\n")
	b.WriteString("secrets are not inputs, so changing them never changes a generation.\n")
	return b.Bytes()
}

func cell(s string) string {
	if s == "" {
		return ""
	}
	return strings.ReplaceAll(s, "|", `\|`)
}

func roleList(roles []Role) string {
	if len(roles) == len(serviceRoles()) {
		return "all"
	}
	s := make([]string, len(roles))
	for i, r := range roles {
		s[i] = string(r)
	}
	return strings.Join(s, ", ")
}

// writeRoles renders the role table as the configuration reads it: which capabilities each role
// has, and so which variables it reads.
func writeRoles(b *bytes.Buffer) {
	b.WriteString("\n## Roles\n\n")
	b.WriteString("Each variable serves one capability; the roles that have it read the variable (the *roles* column\n")
	b.WriteString("below) and reject its bad values at start. This table comes from the role table in `roles/roles.go`.\n\n")
	b.WriteString("| role | what it does | capabilities | run by `plaita dev` |\n|---|---|---|---|\n")
	for _, d := range roleTable() {
		caps, dev := "process", "no"
		for _, c := range d.Serves {
			caps += ", " + string(c)
		}
		if d.Dev {
			dev = "yes"
		}
		if d.Role == RoleDev {
			caps, dev = "those of the roles it runs", "—"
		}
		fmt.Fprintf(b, "| `%s` | %s | %s | %s |\n", d.Role, cell(d.Summary), caps, dev)
	}
	b.WriteString("\n| capability | what it stands for | roles |\n|---|---|---|\n")
	for _, c := range capabilities() {
		var roles []Role
		for _, r := range serviceRoles() {
			if r.reads()[c.cap] {
				roles = append(roles, r)
			}
		}
		fmt.Fprintf(b, "| `%s` | %s | %s |\n", c.cap, cell(c.doc), roleList(roles))
	}
}

// RolesSource renders roles_gen.go from the role table's rows (`go generate ./roles`): one Role
// constant per row and roleTable.
func RolesSource(defs []RoleDef) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString("// Code generated by go generate ./roles from the role table (roles/roles.go); DO NOT EDIT.\n\npackage config\n\n")
	b.WriteString("// The roles, one per row of the role table.\nconst (\n")
	for _, d := range defs {
		fmt.Fprintf(&b, "\t%s Role = %q\n", roleConst(d.Role), d.Role)
	}
	b.WriteString(")\n\n// roleTable is the role table as the configuration reads it.\nfunc roleTable() []RoleDef {\n\treturn []RoleDef{\n")
	for _, d := range defs {
		caps := make([]string, len(d.Serves))
		for i, c := range d.Serves {
			caps[i] = strconv.Quote(string(c))
		}
		fmt.Fprintf(&b, "\t\t{Role: %s, Summary: %q, Serves: []Capability{%s}, Dev: %t},\n", roleConst(d.Role), d.Summary, strings.Join(caps, ", "), d.Dev)
	}
	b.WriteString("\t}\n}\n")
	return format.Source(b.Bytes())
}

// roleConst is a role's constant: worker → RoleWorker, drain-list → RoleDrainList.
func roleConst(r Role) string {
	var b strings.Builder
	b.WriteString("Role")
	for _, part := range strings.FieldsFunc(string(r), func(c rune) bool { return c == '-' || c == '_' }) {
		b.WriteString(strings.ToUpper(part[:1]) + part[1:])
	}
	return b.String()
}

func codeList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = "`" + n + "`"
	}
	return strings.Join(q, ", ")
}

// KeysSource renders keys_gen.go: one typed accessor per variable.
func KeysSource() ([]byte, error) {
	var b bytes.Buffer
	b.WriteString("// Code generated by go generate ./config; DO NOT EDIT.\n\npackage config\n\n")
	b.WriteString("// Typed accessors, one per registered variable: config.WorkerConcurrency.In(cfg).\n")
	b.WriteString("const (\n")
	for _, v := range registry() {
		fmt.Fprintf(&b, "\t%s Key[%s] = %q\n", v.KeyName(), v.GoType(), v.Name)
	}
	b.WriteString(")\n")
	return format.Source(b.Bytes())
}
