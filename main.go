// Command plaita is the one binary of the plaita flow engine; the first argument picks the
// role or tool it runs.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/VictoriaMetrics/metrics"

	"plaita/roles/cli"
)

func main() {
	// /metrics carries # TYPE lines, so Prometheus and promtool know each series' type. The
	// library keeps this one switch for the process; it is set before anything serves metrics.
	metrics.ExposeMetadata(true)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := cli.App(os.Stdout, os.Stderr).Run(ctx, os.Args)
	stop()
	os.Exit(cli.ExitCode(err, os.Stderr))
}
