package postgres

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite" // the pure-Go driver "sqlite", to read the SQLite schema

	"plaita/store/sqlite"
)

// table is a table's schema by meaning: its columns (name, kind, nullability, in order), its
// key, indexes (unique or not, partial or not, by their columns), foreign keys and how many
// CHECK constraints it has — what two databases spell differently left out (type names,
// index names, the audit id's AUTOINCREMENT or IDENTITY).
type table struct {
	Columns []string
	Key     string
	Indexes []string
	Foreign []string
	Checks  int
}

func (t table) String() string {
	return fmt.Sprintf("columns %v\n  key %s\n  indexes %v\n  foreign %v\n  checks %d", t.Columns, t.Key, t.Indexes, t.Foreign, t.Checks)
}

// kind is a column type's meaning.
func kind(typ string) string {
	switch t := strings.ToLower(typ); {
	case t == "text":
		return "text"
	case t == "integer" || t == "bigint":
		return "integer"
	case t == "boolean":
		return "boolean"
	default:
		return "other:" + t
	}
}

// The two migration lines, each at its latest version, hold the same console tables with the
// same columns, keys, indexes, foreign keys and checks (local mode's tables are SQLite's only).
func TestSchemasAreEquivalent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "console.db")
	lite, err := sqlite.Open(ctx, "sqlite:///"+path)
	if err != nil {
		t.Fatal(err)
	}
	lite.Close()
	url := newDatabase(t)
	pg, err := Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	pg.Close()

	ls := sqliteSchema(t, path)
	ps := postgresSchema(t, url)
	for _, name := range sqlite.LocalTables() {
		if _, ok := ls[name]; !ok {
			t.Errorf("%s is listed as local mode's but SQLite has no such table", name)
		}
		delete(ls, name)
	}
	var names []string
	for name := range ls {
		names = append(names, name)
	}
	for name := range ps {
		if _, ok := ls[name]; !ok {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	// The copy (plaita migrate copy) walks every console table.
	if copied := slices.Sorted(slices.Values(sqlite.ConsoleTables())); !slices.Equal(copied, names) {
		t.Errorf("the copy's tables %v, the console's %v", copied, names)
	}
	if len(names) < 10 {
		t.Fatalf("only %d tables: %v", len(names), names)
	}
	for _, name := range names {
		l, lok := ls[name]
		p, pok := ps[name]
		switch {
		case !lok:
			t.Errorf("%s is PostgreSQL's only", name)
		case !pok:
			t.Errorf("%s is SQLite's only (a console table must be on both; local mode's are sqlite.LocalTables)", name)
		case l.String() != p.String():
			t.Errorf("%s differs:\nSQLite:\n  %s\nPostgreSQL:\n  %s", name, l, p)
		}
	}
}

var checkRe = regexp.MustCompile(`(?i)\bCHECK\s*\(`)

func sqliteSchema(t *testing.T, path string) map[string]table {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	out := map[string]table{}
	for _, tbl := range query[[2]string](t, db, "SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name NOT IN ('schema_migrations', 'sqlite_sequence')") {
		name := tbl[0]
		var tb table
		tb.Checks = len(checkRe.FindAllString(tbl[1], -1))
		var key []string
		type col struct {
			cid       int
			name, typ string
			notnull   bool
			dflt      sql.NullString
			pk        int
		}
		rows, err := db.Query(`SELECT cid, name, type, "notnull", dflt_value, pk FROM pragma_table_info(?) ORDER BY cid`, name)
		if err != nil {
			t.Fatal(err)
		}
		var cols []col
		for rows.Next() {
			var c col
			if err := rows.Scan(&c.cid, &c.name, &c.typ, &c.notnull, &c.dflt, &c.pk); err != nil {
				t.Fatal(err)
			}
			cols = append(cols, c)
		}
		rows.Close()
		pks := map[int]string{}
		for _, c := range cols {
			// A primary key is NOT NULL on PostgreSQL whether it says so or not.
			tb.Columns = append(tb.Columns, fmt.Sprintf("%s %s null=%v", c.name, kind(c.typ), !c.notnull && c.pk == 0))
			if c.pk > 0 {
				pks[c.pk] = c.name
			}
		}
		for i := 1; i <= len(pks); i++ {
			key = append(key, pks[i])
		}
		tb.Key = strings.Join(key, ",")
		for _, ix := range query[[4]string](t, db, "SELECT name, \"unique\", origin, partial FROM pragma_index_list(?)", name) {
			if ix[2] == "pk" {
				continue
			}
			cols := query[[1]string](t, db, "SELECT name FROM pragma_index_info(?) ORDER BY seqno", ix[0])
			var names []string
			for _, c := range cols {
				names = append(names, c[0])
			}
			tb.Indexes = append(tb.Indexes, fmt.Sprintf("unique=%v partial=%v (%s)", ix[1] == "1", ix[3] == "1", strings.Join(names, ",")))
		}
		slices.Sort(tb.Indexes)
		for _, fk := range query[[4]string](t, db, "SELECT \"from\", \"table\", \"to\", on_delete FROM pragma_foreign_key_list(?)", name) {
			tb.Foreign = append(tb.Foreign, fmt.Sprintf("(%s) -> %s(%s) on delete %s", fk[0], fk[1], fk[2], strings.ToLower(fk[3])))
		}
		slices.Sort(tb.Foreign)
		out[name] = tb
	}
	return out
}

func postgresSchema(t *testing.T, url string) map[string]table {
	t.Helper()
	srv, err := connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	db := stdlib.OpenDBFromPool(srv.pool)
	defer db.Close()
	out := map[string]table{}
	for _, tbl := range query[[1]string](t, db, "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' AND table_name <> 'schema_migrations'") {
		name := tbl[0]
		var tb table
		for _, c := range query[[3]string](t, db, `SELECT column_name, data_type, is_nullable FROM information_schema.columns
			WHERE table_schema = current_schema() AND table_name = $1 ORDER BY ordinal_position`, name) {
			tb.Columns = append(tb.Columns, fmt.Sprintf("%s %s null=%v", c[0], kind(c[1]), c[2] == "YES"))
		}
		for _, ix := range query[[4]string](t, db, `SELECT ix.indisunique::text, ix.indisprimary::text, (ix.indpred IS NOT NULL)::text,
				string_agg(a.attname, ',' ORDER BY k.ord)
			FROM pg_index ix
			JOIN pg_class tc ON tc.oid = ix.indrelid
			CROSS JOIN LATERAL unnest(ix.indkey) WITH ORDINALITY AS k(attnum, ord)
			JOIN pg_attribute a ON a.attrelid = tc.oid AND a.attnum = k.attnum
			WHERE tc.relname = $1 AND tc.relnamespace = current_schema()::regnamespace
			GROUP BY ix.indexrelid, ix.indisunique, ix.indisprimary, ix.indpred`, name) {
			if ix[1] == "true" {
				tb.Key = ix[3]
				continue
			}
			tb.Indexes = append(tb.Indexes, fmt.Sprintf("unique=%v partial=%v (%s)", ix[0] == "true", ix[2] == "true", ix[3]))
		}
		slices.Sort(tb.Indexes)
		fkRe := regexp.MustCompile(`^FOREIGN KEY \(([^)]*)\) REFERENCES (\w+)\(([^)]*)\)(?: ON DELETE (\w+(?: \w+)?))?`)
		for _, c := range query[[2]string](t, db, `SELECT contype::text, pg_get_constraintdef(oid) FROM pg_constraint
			WHERE conrelid = (current_schema() || '.' || $1)::regclass`, name) {
			switch c[0] {
			case "c":
				tb.Checks++
			case "f":
				m := fkRe.FindStringSubmatch(c[1])
				if m == nil {
					t.Fatalf("a foreign key of %s: %q", name, c[1])
				}
				onDelete := strings.ToLower(m[4])
				if onDelete == "" {
					onDelete = "no action"
				}
				tb.Foreign = append(tb.Foreign, fmt.Sprintf("(%s) -> %s(%s) on delete %s", m[1], m[2], m[3], onDelete))
			}
		}
		slices.Sort(tb.Foreign)
		out[name] = tb
	}
	return out
}

// query reads rows of n text columns.
func query[R [1]string | [2]string | [3]string | [4]string](t *testing.T, db *sql.DB, q string, args ...any) []R {
	t.Helper()
	rows, err := db.Query(q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	var out []R
	for rows.Next() {
		var r R
		vals := make([]sql.NullString, len(r))
		ptrs := make([]any, len(r))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		for i := range vals {
			r[i] = vals[i].String
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
