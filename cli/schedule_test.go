package cli

import (
	"strings"
	"testing"
)

// TestScheduleErrorsNameTheCommand: a schedule subcommand's error names it as typed ("schedule
// add"), not by its last word (it once printed "plaita: add: …").
func TestScheduleErrorsNameTheCommand(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"schedule", "add", "--cron", "* * * * *"}, "plaita: schedule add: --cron and --flow are required"},
		{[]string{"schedule", "add", "--cron", "nonsense", "--flow", "f"}, "plaita: schedule add: "},
		{[]string{"schedule", "list", "x"}, "plaita: schedule list: no arguments"},
		{[]string{"schedule", "enable"}, "plaita: schedule enable: name one schedule: plaita schedule enable ID"},
		{[]string{"schedule", "show", "a b"}, "plaita: schedule show: "},
	} {
		code, _, stderr := runCLI(t, tc.args...)
		if code != ExitRejected || !strings.HasPrefix(stderr, tc.want) {
			t.Errorf("%v: exit %d, want %d and %q\n%s", tc.args, code, ExitRejected, tc.want, stderr)
		}
	}
}
