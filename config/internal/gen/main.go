// Command gen writes the files derived from the config registry: the configuration reference
// and the typed accessors. Run it with `go generate ./config`.
package main

import (
	"flag"
	"fmt"
	"os"

	"plaita/config"
)

func main() {
	docs := flag.String("docs", "", "path of the configuration reference to write")
	keys := flag.String("keys", "", "path of the typed accessors to write")
	flag.Parse()
	if err := run(*docs, *keys); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func run(docs, keys string) error {
	if docs != "" {
		if err := os.WriteFile(docs, config.Markdown(), 0o644); err != nil {
			return err
		}
	}
	if keys != "" {
		src, err := config.KeysSource()
		if err != nil {
			return fmt.Errorf("render keys: %w", err)
		}
		if err := os.WriteFile(keys, src, 0o644); err != nil {
			return err
		}
	}
	return nil
}
