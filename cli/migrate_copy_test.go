package cli

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"plaita/test/pgtest"
)

// plaita migrate copy from a SQLite console to PostgreSQL and back to a new file: every table
// verified, the checksums of the round trip the original's; bad usage exits 2 (a target that
// differs is store/postgres's TestCopyNamesTablesThatDiffer).
func TestMigrateCopyRoundTrip(t *testing.T) {
	dir := t.TempDir()
	laptop := "sqlite:///" + filepath.Join(dir, "laptop.db")
	t.Setenv("PLAITA_CONSOLE_DB_URL", laptop)
	t.Setenv("PLAITA_CONSOLE_ADMIN_PASSWORD", "")
	if code, _, errOut := runCLI(t, "migrate", "up", "--quiet"); code != 0 {
		t.Fatalf("migrate up: %d %s", code, errOut)
	}
	pg := pgtest.Database(t)
	copyTo := func(args ...string) (int, copyReport, string) {
		t.Helper()
		code, out, errOut := runCLI(t, append([]string{"migrate", "copy", "--quiet", "--json"}, args...)...)
		var rep copyReport
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("copy %v: exit %d, not JSON: %v\n%s\n%s", args, code, err, out, errOut)
		}
		return code, rep, errOut
	}
	code, there, errOut := copyTo("--to", pg)
	if code != 0 || !there.Verified || len(there.Tables) < 10 || strings.Contains(errOut, "xxxxx") {
		t.Fatalf("copy to PostgreSQL: exit %d %+v\n%s", code, there, errOut)
	}
	back := "sqlite:///" + filepath.Join(dir, "back.db")
	code, again, errOut := copyTo("--from", pg, "--to", back)
	if code != 0 || !again.Verified {
		t.Fatalf("copy back: exit %d %+v\n%s", code, again, errOut)
	}
	for i, tc := range again.Tables {
		if tc.SourceChecksum != there.Tables[i].SourceChecksum || tc.Rows != there.Tables[i].Rows {
			t.Errorf("%s: %+v after the round trip, %+v before", tc.Table, tc, there.Tables[i])
		}
	}
	if code, _, errOut := runCLI(t, "migrate", "copy", "--quiet"); code != 2 || !strings.Contains(errOut, "--to is required") {
		t.Errorf("no --to: exit %d %s", code, errOut)
	}
	if code, _, errOut := runCLI(t, "migrate", "copy", "--quiet", "--to", "mysql://db/x"); code != 2 || !strings.Contains(errOut, "--to") {
		t.Errorf("a --to that is no database URL: exit %d %s", code, errOut)
	}
}
