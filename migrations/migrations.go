// Package migrations holds the schema of the console database as golang-migrate SQL files
// (NNNN_name.up.sql with its NNNN_name.down.sql), one line per database the console runs on —
// sqlite/ and postgres/, at the same versions with the same names — embedded into the binary.
// store/sqlite applies them through golang-migrate's iofs source, at console start and from
// `plaita migrate`; no other package reads them. README.md describes the tables and how to add
// a migration.
package migrations

import (
	"embed"
	"io/fs"
)

//go:embed sqlite/*.sql postgres/*.sql
var files embed.FS

// SQLite is the SQLite line (the files of sqlite/, at the root of the FS).
func SQLite() fs.FS { return sub("sqlite") }

// Postgres is the PostgreSQL line (the files of postgres/, at the root of the FS).
func Postgres() fs.FS { return sub("postgres") }

func sub(dir string) fs.FS {
	f, err := fs.Sub(files, dir)
	if err != nil { // a constant, valid directory name: cannot happen
		panic(err)
	}
	return f
}
