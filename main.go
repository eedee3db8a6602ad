// Command plaita is the one binary of the plaita flow engine; the first argument picks the
// role or tool it runs.
package main

import (
	"context"
	"embed"
	"io/fs"
	"os"
	"os/signal"
	"syscall"

	"github.com/VictoriaMetrics/metrics"

	"plaita/cli"
)

// demoFlows are the flows plaita dev publishes: the repository's examples, in the binary so that
// dev shows them wherever the binary runs.
//
//go:embed examples/*.json
var demoFlows embed.FS

func main() {
	// First of all: a plaita `go run` started ends when the go command does (cli.EndWithGoRun).
	if !cli.EndWithGoRun() {
		os.Exit(128 + int(syscall.SIGTERM)) // its go run has ended: as the parent-death signal would
	}
	// /metrics carries # TYPE lines, so Prometheus and promtool know each series' type. The
	// library keeps this one switch for the process; it is set before anything serves metrics.
	metrics.ExposeMetadata(true)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	flows, err := fs.Sub(demoFlows, "examples")
	if err != nil {
		panic(err) // the pattern above names that directory
	}
	err = cli.App(os.Stdout, os.Stderr, cli.WithDemoFlows(flows)).Run(ctx, os.Args)
	stop()
	os.Exit(cli.ExitCode(err, os.Stderr))
}
