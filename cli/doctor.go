package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/urfave/cli/v3"

	"plaita/config"
	"plaita/control"
	"plaita/internal/callctx"
	"plaita/roles"
)

// doctorCommand runs the same strict loader as the roles and prints what it found.
func doctorCommand(stdout, stderr io.Writer) *cli.Command {
	return &cli.Command{
		Name:      "doctor",
		Usage:     "run the strict configuration preflight and print the effective configuration",
		UsageText: "plaita doctor [--role ROLE | --all] [--json] [--log-level LEVEL | --quiet] [--log-format FORMAT]",
		Description: "Exit status 0 when every value is accepted, 2 when any is rejected.\n" +
			"The --json layout is documented in docs/doctor.md.",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "role", Usage: "check one role: worker, console, filter, schedule, delay or dev"},
			&cli.BoolFlag{Name: "all", Usage: "check every variable of every role (the default)"},
			&cli.BoolFlag{Name: "json", Usage: "print the report as JSON"},
			&cli.BoolFlag{Name: "redis", Usage: "also connect to PLAITA_REDIS_URL and check the keys the configuration names (the task queue's streams)"},
		}, append(logFlags(), logLevelFlag())...),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			// The report is doctor's output; the logging flags are taken so one set of flags
			// fits every command, and --log-level/--quiet set the level checked, as they would
			// for the role.
			if _, err := parseLogFormat(flagValue(cmd, "log-format")); err != nil {
				return &exitError{code: ExitRejected, err: err}
			}
			role := config.RoleDev
			if cmd.IsSet("role") {
				if cmd.Bool("all") {
					return &exitError{code: ExitRejected, err: fmt.Errorf("doctor: use --role or --all, not both")}
				}
				r, err := config.ParseRole(cmd.String("role"))
				if err != nil {
					return &exitError{code: ExitRejected, err: fmt.Errorf("doctor: %w", err)}
				}
				role = r
			}
			cfg, loadErr := optionsOf(cmd).load(role, overrides(cmd, role))
			report := doctorReport{Report: cfg.Report()}
			if cmd.Bool("redis") && loadErr == nil {
				report.Redis = checkRedisKeys(ctx, cfg)
			}
			if cmd.Bool("json") {
				enc := json.NewEncoder(stdout)
				enc.SetIndent("", "  ")
				if err := enc.Encode(report); err != nil {
					return &exitError{code: ExitFailure, err: fmt.Errorf("doctor: write report: %w", err)}
				}
			} else if err := report.writeText(stdout); err != nil {
				return &exitError{code: ExitFailure, err: fmt.Errorf("doctor: write report: %w", err)}
			}
			if loadErr != nil {
				// The report already lists every problem.
				return &exitError{code: ExitRejected, err: loadErr, printed: true}
			}
			if r := report.Redis; r != nil && !r.OK {
				return &exitError{code: ExitRejected, err: fmt.Errorf("doctor: %s", r.Problem), printed: true}
			}
			return nil
		},
	}
}

// doctorReport is the configuration report, with the Redis checks of --redis.
type doctorReport struct {
	config.Report
	Redis *redisCheck `json:"redis,omitempty"`
}

// redisCheck is what --redis found: the keys the configuration names are usable.
type redisCheck struct {
	URL     string `json:"url"` // masked
	OK      bool   `json:"ok"`
	Problem string `json:"problem,omitempty"`
}

func (r doctorReport) writeText(w io.Writer) error {
	if err := r.Report.WriteText(w); err != nil {
		return err
	}
	if c := r.Redis; c != nil {
		verdict := "the task queue's stream and dead-letter stream are streams or absent"
		if !c.OK {
			verdict = "PROBLEM: " + c.Problem
		}
		if _, err := fmt.Fprintf(w, "\nredis (%s): %s\n", c.URL, verdict); err != nil {
			return err
		}
	}
	return nil
}

// checkRedisKeys connects and checks the queue's keys (what a worker checks before it starts).
func checkRedisKeys(ctx context.Context, cfg *config.Config) *redisCheck {
	rc := &redisCheck{URL: config.MaskURL(config.RedisURL.In(cfg))}
	c, err := roles.RedisClient(config.RedisURL.In(cfg))
	if err != nil {
		rc.Problem = err.Error()
		return rc
	}
	defer c.Close()
	ctx, cancel := callctx.Within(ctx, callctx.RedisOp)
	defer cancel()
	if err := control.CheckQueueKeys(ctx, c, config.QueueName.In(cfg), config.DLQKey.In(cfg)); err != nil {
		rc.Problem = err.Error()
		return rc
	}
	rc.OK = true
	return rc
}
