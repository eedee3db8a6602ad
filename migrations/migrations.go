// Package migrations holds the schema of the console database as golang-migrate SQL files
// (NNNN_name.up.sql with its NNNN_name.down.sql), embedded into the binary. store/sqlite applies
// them through golang-migrate's iofs source, at console start and from `plaita migrate`; no
// other package reads them. README.md describes the tables and how to add a migration.
package migrations

import "embed"

// FS is every migration file of this directory.
//
//go:embed *.sql
var FS embed.FS
