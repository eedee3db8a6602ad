// Command gen writes what the configuration knows of the role table (roles/roles.go) into
// config/roles_gen.go: config is a leaf and cannot import roles. Run it with
// `go generate ./roles`, which then regenerates the configuration's own files.
package main

import (
	"flag"
	"fmt"
	"os"

	"plaita/config"
	"plaita/roles"
)

func main() {
	out := flag.String("config", "", "path of config/roles_gen.go to write")
	flag.Parse()
	if err := run(*out); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func run(path string) error {
	if path == "" {
		return fmt.Errorf("-config is required")
	}
	src, err := config.RolesSource(roles.ConfigTable())
	if err != nil {
		return fmt.Errorf("render roles: %w", err)
	}
	return os.WriteFile(path, src, 0o644)
}
