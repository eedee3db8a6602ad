package roles

import (
	"bytes"
	"os"
	"slices"
	"strings"
	"testing"

	"plaita/config"
)

func TestTableCoversEveryRole(t *testing.T) {
	seen := map[config.Role]bool{}
	for _, s := range Table() {
		if seen[s.Role] {
			t.Errorf("role %s listed twice", s.Role)
		}
		seen[s.Role] = true
		if _, err := config.ParseRole(string(s.Role)); err != nil {
			t.Errorf("table role %s is not a config role: %v", s.Role, err)
		}
		if len(s.Needs) == 0 || s.Summary == "" {
			t.Errorf("role %s lacks needs or summary", s.Role)
		}
		if s.Role == config.RoleDev {
			if s.Body != nil || s.Dev || len(s.Serves) > 0 {
				t.Errorf("dev runs the other rows: it has no body, capabilities or Dev mark of its own")
			}
			continue
		}
		if s.Body == nil || !s.Built {
			t.Errorf("role %s has no body", s.Role)
		}
		body, ok := Body(s.Role)
		if !ok || body == nil {
			t.Errorf("Body(%s) does not find the row's body", s.Role)
		}
	}
	for _, r := range []config.Role{config.RoleWorker, config.RoleConsole, config.RoleFilter, config.RoleSchedule, config.RoleDelay, config.RoleDev} {
		if !seen[r] {
			t.Errorf("role %s missing from the table", r)
		}
	}
}

// config/roles_gen.go is the table as the configuration reads it: `go generate ./roles` after a
// row changes.
func TestConfigRolesAreGeneratedFromTheTable(t *testing.T) {
	got, err := os.ReadFile("../config/roles_gen.go")
	if err != nil {
		t.Fatal(err)
	}
	want, err := config.RolesSource(ConfigTable())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Error("config/roles_gen.go is stale: run go generate ./roles")
	}
}

// plaita dev runs the rows marked Dev, in table order: the console its own way, the others by
// their bodies.
func TestDevRunsTheRowsMarkedDev(t *testing.T) {
	var want, got []config.Role
	for _, s := range Table() {
		if s.Dev && s.Role != config.RoleConsole {
			want = append(want, s.Role)
		}
	}
	for _, s := range devRoles() {
		got = append(got, s.Role)
		if s.Body == nil {
			t.Errorf("dev would run %s without a body", s.Role)
		}
	}
	if !slices.Equal(got, want) || len(got) == 0 {
		t.Errorf("dev runs %v, the table marks %v", got, want)
	}
	// The configuration dev loads stands for the roles it runs and reads every variable of them.
	cfg, _ := config.Load(config.RoleDev, false, config.WithEnv(nil))
	var dev []config.Role
	for _, s := range Table() {
		if !s.Dev {
			continue
		}
		dev = append(dev, s.Role)
		for _, f := range config.Flags(s.Role) {
			if !slices.ContainsFunc(config.Flags(config.RoleDev), func(d config.FlagSpec) bool { return d.Var == f.Var }) {
				t.Errorf("dev lacks --%s of %s", f.Name, s.Role)
			}
		}
	}
	if !slices.Equal(cfg.Report().Roles, dev) {
		t.Errorf("dev's configuration stands for %v", cfg.Report().Roles)
	}
}

// `plaita roles` and the docs' roles table (docs/configuration.md) show every row.
func TestRolesAndDocsShowEveryRow(t *testing.T) {
	var out bytes.Buffer
	if err := WriteTable(&out); err != nil {
		t.Fatal(err)
	}
	docs, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range Table() {
		line := string(s.Role) + " " + strings.Join(s.Needs, ", ")
		found := false
		for _, l := range strings.Split(out.String(), "\n") {
			if strings.HasPrefix(strings.Join(strings.Fields(l), " "), line) && strings.HasSuffix(l, s.Summary) {
				found = true
			}
		}
		if !found {
			t.Errorf("plaita roles has no line for %s:\n%s", s.Role, out.String())
		}
		if !strings.Contains(string(docs), "| `"+string(s.Role)+"` | "+s.Summary+" |") {
			t.Errorf("docs/configuration.md has no row for %s", s.Role)
		}
	}
}
