package migrations

import (
	"io/fs"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

var name = regexp.MustCompile(`^([0-9]{4})_([a-z0-9_]+)\.(up|down)\.sql$`)

// The files of each line follow golang-migrate's layout and this directory's rules
// (README.md): every migration is a numbered pair, numbered 1, 2, 3 … without gaps, each file
// embedded, and no file opens or ends a transaction (golang-migrate runs each in its own) or
// sets a pragma (a pragma inside a transaction is ignored or refused). The two lines hold the
// same versions with the same names: a database's version means one schema change on both.
func TestMigrationFiles(t *testing.T) {
	sqlite := checkLine(t, "sqlite", SQLite())
	postgres := checkLine(t, "postgres", Postgres())
	for v, name := range sqlite {
		if postgres[v] != name {
			t.Errorf("migration %04d is %q in sqlite/ but %q in postgres/: write every migration for both lines", v, name, postgres[v])
		}
	}
	for v, name := range postgres {
		if _, ok := sqlite[v]; !ok {
			t.Errorf("migration %04d (%s) is in postgres/ only", v, name)
		}
	}
}

// checkLine checks one line's files and returns its migrations: version → name.
func checkLine(t *testing.T, dir string, line fs.FS) map[int]string {
	t.Helper()
	embedded, err := fs.ReadDir(line, ".")
	if err != nil {
		t.Fatal(err)
	}
	onDisk, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	inFS := map[string]bool{}
	for _, e := range embedded {
		inFS[e.Name()] = true
	}
	pairs := map[int]map[string]string{} // version → direction → name
	for _, e := range onDisk {
		if !strings.HasSuffix(e.Name(), ".sql") {
			t.Errorf("%s/%s: only migration files belong in a line", dir, e.Name())
			continue
		}
		if !inFS[e.Name()] {
			t.Errorf("%s/%s is not embedded", dir, e.Name())
		}
		m := name.FindStringSubmatch(e.Name())
		if m == nil {
			t.Errorf("%s/%s: name it NNNN_short_name.up.sql or .down.sql", dir, e.Name())
			continue
		}
		v, _ := strconv.Atoi(m[1])
		if pairs[v] == nil {
			pairs[v] = map[string]string{}
		}
		if other, ok := pairs[v][m[3]]; ok {
			t.Errorf("%s: version %d has two %s files: %s and %s", dir, v, m[3], other, e.Name())
		}
		pairs[v][m[3]] = m[2]
		body, err := fs.ReadFile(line, e.Name())
		if err != nil {
			t.Fatal(err)
		}
		checkBody(t, dir+"/"+e.Name(), string(body))
	}
	if len(pairs) == 0 {
		t.Fatalf("%s: no migrations", dir)
	}
	out := map[int]string{}
	for v := 1; v <= len(pairs); v++ {
		p, ok := pairs[v]
		switch {
		case !ok:
			t.Errorf("%s: no migration %04d: versions go 1, 2, 3 … without gaps", dir, v)
		case p["up"] == "" || p["down"] == "":
			t.Errorf("%s: migration %04d needs both an up and a down file: %v", dir, v, p)
		case p["up"] != p["down"]:
			t.Errorf("%s: migration %04d: the up and down files have different names (%s, %s)", dir, v, p["up"], p["down"])
		default:
			out[v] = p["up"]
		}
	}
	return out
}

var statements = regexp.MustCompile(`(?im)^\s*(BEGIN|COMMIT|END|ROLLBACK|SAVEPOINT|RELEASE|PRAGMA)\b`)

func checkBody(t *testing.T, file, body string) {
	t.Helper()
	if strings.TrimSpace(body) == "" {
		t.Errorf("%s is empty", file)
	}
	if m := statements.FindString(body); m != "" {
		t.Errorf("%s: %q: golang-migrate runs every file in its own transaction; write no transaction statements or pragmas", file, strings.TrimSpace(m))
	}
}
