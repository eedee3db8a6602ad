package roles

import (
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
	}
	for _, r := range []config.Role{config.RoleWorker, config.RoleConsole, config.RoleFilter, config.RoleSchedule, config.RoleDelay, config.RoleDev} {
		if !seen[r] {
			t.Errorf("role %s missing from the table", r)
		}
	}
}
