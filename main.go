// Command plaita is the one binary of the plaita flow engine; the first argument picks the
// role or tool it runs.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"plaita/roles/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := cli.App(os.Stdout, os.Stderr).Run(ctx, os.Args)
	stop()
	os.Exit(cli.ExitCode(err, os.Stderr))
}
