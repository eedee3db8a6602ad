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

// The files follow golang-migrate's layout and this directory's rules (README.md): every
// migration is a numbered pair, numbered 1, 2, 3 … without gaps, each file embedded, and no
// file opens or ends a transaction (golang-migrate runs each in its own) or sets a pragma
// (a pragma inside a transaction is ignored or refused).
func TestMigrationFiles(t *testing.T) {
	embedded, err := fs.ReadDir(FS, ".")
	if err != nil {
		t.Fatal(err)
	}
	onDisk, err := os.ReadDir(".")
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
			continue
		}
		if !inFS[e.Name()] {
			t.Errorf("%s is not embedded", e.Name())
		}
		m := name.FindStringSubmatch(e.Name())
		if m == nil {
			t.Errorf("%s: name it NNNN_short_name.up.sql or .down.sql", e.Name())
			continue
		}
		v, _ := strconv.Atoi(m[1])
		if pairs[v] == nil {
			pairs[v] = map[string]string{}
		}
		if other, ok := pairs[v][m[3]]; ok {
			t.Errorf("version %d has two %s files: %s and %s", v, m[3], other, e.Name())
		}
		pairs[v][m[3]] = m[2]
		body, err := fs.ReadFile(FS, e.Name())
		if err != nil {
			t.Fatal(err)
		}
		checkBody(t, e.Name(), string(body))
	}
	if len(pairs) == 0 {
		t.Fatal("no migrations")
	}
	for v := 1; v <= len(pairs); v++ {
		p, ok := pairs[v]
		switch {
		case !ok:
			t.Errorf("no migration %04d: versions go 1, 2, 3 … without gaps", v)
		case p["up"] == "" || p["down"] == "":
			t.Errorf("migration %04d needs both an up and a down file: %v", v, p)
		case p["up"] != p["down"]:
			t.Errorf("migration %04d: the up and down files have different names (%s, %s)", v, p["up"], p["down"])
		}
	}
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
