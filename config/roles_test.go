package config

import (
	"slices"
	"strings"
	"testing"
)

// The role table (roles_gen.go, from roles/roles.go) and the registry's capabilities fit: every
// capability a row names or a variable serves is a known one, every variable is read by some
// role, and dev stands for the rows marked Dev.
func TestRoleTableAndCapabilitiesFit(t *testing.T) {
	known := map[Capability]bool{}
	for _, c := range capabilities() {
		if known[c.cap] || c.doc == "" {
			t.Errorf("capability %s listed twice or without words", c.cap)
		}
		known[c.cap] = true
	}
	served := map[Capability]bool{}
	var dev []Role
	for _, d := range roleTable() {
		if _, err := ParseRole(string(d.Role)); err != nil {
			t.Errorf("ParseRole(%s): %v", d.Role, err)
		}
		for _, c := range d.Serves {
			if !known[c] {
				t.Errorf("role %s has capability %q, which config does not know", d.Role, c)
			}
			served[c] = true
		}
		if d.Dev {
			dev = append(dev, d.Role)
		}
	}
	if !slices.Equal(RoleDev.scope(), dev) {
		t.Errorf("dev stands for %v, the rows marked Dev are %v", RoleDev.scope(), dev)
	}
	for _, c := range capabilities() {
		if c.cap != CapProcess && !served[c.cap] {
			t.Errorf("no role has capability %s", c.cap)
		}
	}
	for _, v := range registry() {
		if !known[v.Serves] {
			t.Errorf("%s serves %q, which config does not know", v.Name, v.Serves)
		}
		if !v.inRole(RoleDev) {
			t.Errorf("%s: plaita dev does not read it", v.Name)
		}
	}
	var names []string
	for _, d := range roleTable() {
		names = append(names, string(d.Role))
	}
	if _, err := ParseRole("nope"); err == nil || !strings.Contains(err.Error(), "(one of "+strings.Join(names, ", ")+")") {
		t.Errorf("ParseRole(nope): %v", err)
	}
}

// A role reads exactly the variables of its capabilities: its preflight checks them and
// config.Flags offers their flags.
func TestRoleReadsTheVariablesOfItsCapabilities(t *testing.T) {
	for _, d := range roleTable() {
		if d.Role == RoleDev {
			continue
		}
		flags := map[string]bool{}
		for _, f := range Flags(d.Role) {
			flags[f.Var] = true
		}
		for _, v := range registry() {
			want := v.Serves == CapProcess || slices.Contains(d.Serves, v.Serves)
			if got := v.inRole(d.Role); got != want {
				t.Errorf("%s reads %s: %v, its capabilities say %v", d.Role, v.Name, got, want)
			}
			if got := slices.Contains(v.Roles(), d.Role); got != want {
				t.Errorf("%s lists %s among its roles: %v, want %v", v.Name, d.Role, got, want)
			}
			if v.Flag != "" && flags[v.Name] != want {
				t.Errorf("%s offers --%s: %v, want %v", d.Role, v.Flag, flags[v.Name], want)
			}
		}
	}
}
