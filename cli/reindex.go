package cli

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/urfave/cli/v3"

	"plaita/control"
	"plaita/roles"
)

// reindexCommand is `plaita reindex`: control's rebuild of execution indexes, with its progress
// on stderr.
func reindexCommand(tool roles.Tool, stdout, stderr io.Writer) *cli.Command {
	return &cli.Command{
		Name:      tool.Name,
		Usage:     tool.Summary,
		UsageText: "plaita reindex [--tenant T | --all-tenants] [--json]",
		Description: "Gives every execution state of the tenant its index member (a SCAN of the tenant's execution keys on\n" +
			"every node; an interrupted run goes on where it stopped) and removes the members that have no state.\n" +
			"Listings keep working meanwhile. --all-tenants: the default tenant and every tenant Redis knows.\n" +
			"Exit status: 0 done; 1 failure; 2 bad usage or configuration.",
		Flags: cliFlags(tenantFlag(), &cli.BoolFlag{Name: "all-tenants", Usage: "every tenant Redis knows (default: the --tenant's only)"},
			jsonFlag("print {tenants: [{tenant_id, scanned, added, removed}]} as JSON")),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			const name = "reindex"
			if cmd.Args().Len() > 0 {
				return cliUsage(name, "takes no arguments")
			}
			return withConn(ctx, cmd, name, stderr, func(k *conn) error {
				tenants, err := tenantsOf(ctx, cmd, k, name)
				if err != nil {
					return err
				}
				last := time.Now()
				rep, err := k.plane.Reindex(ctx, tenants, func(p control.ReindexProgress) {
					if time.Since(last) >= time.Second {
						last = time.Now()
						k.log.Info().Str("event", "reindex.progress").Str("tenant_id", p.Tenant).Str("phase", p.Phase).
							Int("scanned", p.Scanned).Int("added", p.Added).Int("removed", p.Removed).Msg("reindexing")
					}
				})
				if err != nil {
					return refused(name, err)
				}
				if cmd.Bool("json") {
					return writeJSON(stdout, rep)
				}
				for _, t := range rep.Tenants {
					fmt.Fprintf(stdout, "tenant %s: %d keys scanned, %d states indexed, %d members without a state removed\n",
						t.Tenant, t.Scanned, t.Added, t.Removed)
				}
				return nil
			})
		},
	}
}
