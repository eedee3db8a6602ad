package roles_test

import (
	"io"
	"slices"
	"strings"
	"testing"

	ucli "github.com/urfave/cli/v3"

	"plaita/cli"
	"plaita/config"
	"plaita/roles"
)

// Every row of the role table is a command of the binary, with the row's summary and the flags of
// the variables the role reads; the root's help and dev's name them.
func TestEveryRowIsACommand(t *testing.T) {
	app := cli.App(io.Discard, io.Discard)
	dev := app.Command(string(config.RoleDev))
	if dev == nil {
		t.Fatal("no dev command")
	}
	for _, s := range roles.Table() {
		cmd := app.Command(string(s.Role))
		if cmd == nil {
			t.Errorf("no command for role %s", s.Role)
			continue
		}
		if cmd.Usage != s.Summary {
			t.Errorf("%s: usage %q, the table says %q", s.Role, cmd.Usage, s.Summary)
		}
		for _, f := range config.Flags(s.Role) {
			if !hasFlag(cmd, f.Name) {
				t.Errorf("%s: no --%s (%s)", s.Role, f.Name, f.Var)
			}
		}
		if !strings.Contains(app.Description, string(s.Role)) {
			t.Errorf("the root's help does not name %s: %q", s.Role, app.Description)
		}
		if s.Dev && !strings.Contains(dev.UsageText, string(s.Role)) {
			t.Errorf("dev's help does not name %s, which it runs: %q", s.Role, dev.UsageText)
		}
	}
}

func hasFlag(cmd *ucli.Command, name string) bool {
	for _, f := range cmd.Flags {
		if slices.Contains(f.Names(), name) {
			return true
		}
	}
	return false
}
