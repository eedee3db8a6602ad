package cli

import (
	"context"
	"errors"
	"io"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v3"

	"plaita/config"
	"plaita/roles/bench"
)

// benchCommand is `plaita bench`: flags and rendering over package roles/bench.
func benchCommand(stdout, stderr io.Writer) *cli.Command {
	return &cli.Command{
		Name:      "bench",
		Usage:     "measure the engine end to end on a real Redis: e2e, steps, enqueue, suspend",
		UsageText: "plaita bench e2e|steps|enqueue|suspend [--redis URL] [--n N] [--concurrency C] [--waits W] [--types K] [--json]",
		Description: "e2e: N pre-enqueued starts of a 1-node flow run by an in-process worker with C consumers;\n" +
			"executions/s from the worker's start until all are acked, p50/p99 enqueue→terminal latency,\n" +
			"Redis calls per execution (INFO commandstats deltas, calls inside scripts included; on a Redis\n" +
			"Cluster summed over every primary, found with CLUSTER NODES, and shown per node).\n" +
			"steps: the same with a 20-node linear flow (steps/s, calls per step). enqueue: starts/s.\n" +
			"suspend: W executions (--waits, default N) waiting at a correlated wait_event (EVENT.n == INPUT.n,\n" +
			"a value each) on K event types (--types, default 1), seeded straight into the store, and N more\n" +
			"for the round trip: N events published with C producers, an in-process filter (C handlers) and\n" +
			"worker resume them (round trips/s from the first publish until all completed, p50/p99\n" +
			"publish→completed); then, the worker stopped, N events that each wake one of the W and N that\n" +
			"wake none: the filter's Redis calls and CPU per event, less the publish's.\n" +
			"Without --redis a private redis-server is started (it must be installed) and removed; a --redis database\n" +
			"that holds keys already is refused unless --force (the bench's executions would land beside them).",
		Flags: localFlags(
			&cli.StringFlag{Name: "redis", Usage: "a Redis (or Redis Cluster node) URL to run against; default: a private redis-server"},
			&cli.IntFlag{Name: "n", Value: 20000, Usage: "executions (enqueue: starts; suspend: events that wake a wait)"},
			&cli.IntFlag{Name: "waits", Usage: "suspend: executions waiting while the events are delivered (default: --n)"},
			&cli.IntFlag{Name: "types", Usage: "suspend: event types the waits are spread over (default 1: every wait on one type)"},
			&cli.IntFlag{Name: "concurrency", Value: 10, Usage: "worker consumers (enqueue: producers)"},
			jsonFlag("print the figures as one JSON object"),
			&cli.StringFlag{Name: "cpuprofile", Usage: "write a CPU profile of the measured window (from the worker's start until every execution is acked; suspend: the round trips) to this file (go tool pprof)"},
			&cli.BoolFlag{Name: "force", Usage: "with --redis: run even when the database holds keys already (the bench's executions land beside them)"},
		),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			const name = "bench"
			res, err := bench.Run(ctx, bench.Options{Scenario: cmd.Args().First(), N: int(cmd.Int("n")), Concurrency: int(cmd.Int("concurrency")),
				Waits: int(cmd.Int("waits")), Types: int(cmd.Int("types")),
				Redis: cmd.String("redis"), CPUProfile: cmd.String("cpuprofile"), Force: cmd.Bool("force"), Flags: overrides(cmd, config.RoleWorker),
				NewLogger: func(level zerolog.Level) zerolog.Logger { return NewLogger(stderr, LogAuto, level) }})
			var ce *bench.ConfigError
			switch {
			case errors.As(err, &ce):
				io.WriteString(stderr, ce.Error()+"\n")
				return &exitError{code: ExitRejected, err: err, printed: true}
			case errors.Is(err, bench.ErrUsage):
				return cliUsage(name, "%v", err)
			case err != nil:
				return cliFail(name, "%v", err)
			}
			if cmd.Bool("json") {
				return writeJSON(stdout, res)
			}
			bench.WriteText(stdout, res)
			return nil
		},
	}
}
