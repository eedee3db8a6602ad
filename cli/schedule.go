package cli

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v3"

	"plaita/config"
	"plaita/control"
)

// scheduleCommand gives the schedule role's command its editing subcommands. `plaita schedule`
// alone runs the role, like every role command; `plaita schedule add|list|show|enable|disable|
// delete` edit the schedules in Redis (what the console will do) and exit. One command name
// for both keeps `plaita schedule --help` the one place an operator looks.
func scheduleCommand(role *cli.Command, stdout, stderr io.Writer) *cli.Command {
	runRole := role.Action
	role.UsageText = "plaita schedule [flags]                                          run the schedule role\n" +
		"plaita schedule add|list|show|enable|disable|delete [ID] [flags]   edit the schedules (each has --help)"
	role.Description = "Without a subcommand: runs the schedule role. Every PLAITA_CHECK_INTERVAL seconds it enqueues a\n" +
		"start on PLAITA_CONSOLE_TASK_QUEUE for every schedule with a cron tick due, across all tenants.\n" +
		"Any number of schedule processes may run: each tick is claimed by one of them and fired once. After\n" +
		"a stop, a schedule fires once for the ticks it missed (the newest one), not once per tick. Ticks of\n" +
		"disabled schedules and of disabled tenants are skipped and never fired later. docs/schedules.md\n" +
		"has the whole contract.\n\n" +
		"The subcommands edit the schedules and exit; they run the schedule role's configuration preflight and\n" +
		"connect to PLAITA_REDIS_URL. Exit status: 0 done; 1 failure (unknown schedule, Redis); 2 bad usage."
	role.Action = func(ctx context.Context, cmd *cli.Command) error {
		if cmd.Args().Len() > 0 {
			return cliUsage("schedule", "unknown subcommand %q (add, list, show, enable, disable, delete; none runs the role)", cmd.Args().First())
		}
		return runRole(ctx, cmd)
	}
	role.Commands = []*cli.Command{
		{
			Name:      "add",
			Usage:     "create a cron schedule that starts a flow",
			UsageText: "plaita schedule add [ID] --cron SPEC --flow FLOW_ID [--version V|latest] [--tz ZONE] [--input JSON|@file] [--disabled] [--tenant T] [--json]",
			Description: "SPEC is 5 fields (minute hour day-of-month month day-of-week), 6 with seconds first\n" +
				"(\"*/10 * * * * *\": every 10 seconds), or @yearly, @monthly, @weekly, @daily, @hourly; it is read\n" +
				"in --tz (an IANA zone, default UTC). --version latest (the default) starts the flow's most\n" +
				"recently published version at each tick. Only ticks after the schedule is created fire. Without\n" +
				"ID an id is generated. A flow that is not published yet is a warning: its ticks are skipped\n" +
				"until it is.",
			Flags: cliFlags(tenantFlag(),
				&cli.StringFlag{Name: "cron", Usage: "the cron spec (5 fields, or 6 with seconds first)"},
				&cli.StringFlag{Name: "tz", Value: "UTC", Usage: "IANA time zone the spec is read in"},
				&cli.StringFlag{Name: "flow", Usage: "the flow id to start"},
				&cli.StringFlag{Name: "version", Value: control.LatestVersion, Usage: "the flow version to start, or latest (resolved at each tick)"},
				&cli.StringFlag{Name: "input", Usage: "the executions' INPUT: inline JSON, or @path (default {})"},
				&cli.BoolFlag{Name: "disabled", Usage: "create it disabled (enable it later)"},
				jsonFlag("print the stored schedule as JSON")),
			Action: func(ctx context.Context, cmd *cli.Command) error { return scheduleAdd(ctx, cmd, stdout, stderr) },
		},
		{
			Name:      "list",
			Usage:     "list the tenant's schedules",
			UsageText: "plaita schedule list [--tenant T] [--json]",
			Flags:     cliFlags(tenantFlag(), jsonFlag("print {tenant_id, items, bad} as JSON")),
			Action:    func(ctx context.Context, cmd *cli.Command) error { return scheduleList(ctx, cmd, stdout, stderr) },
		},
		scheduleShowCommand(stdout, stderr),
		scheduleToggle("enable", true, stdout, stderr),
		scheduleToggle("disable", false, stdout, stderr),
		scheduleRunCommand(stdout, stderr),
		scheduleFiresCommand(stdout, stderr),
		scheduleDeleteCommand(stdout, stderr),
	}
	return role
}

func scheduleShowCommand(stdout, stderr io.Writer) *cli.Command {
	return &cli.Command{
		Name:      "show",
		Usage:     "print one schedule with its firing state",
		UsageText: "plaita schedule show ID [--tenant T] [--json]",
		Flags:     cliFlags(tenantFlag(), jsonFlag("print the stored schedule as JSON")),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			return withSchedule(ctx, cmd, "show", stderr, func(k *conn, id string) error {
				rec, err := k.plane.Schedule(ctx, k.tenant, id)
				if err != nil {
					return refused("schedule show", err)
				}
				if cmd.Bool("json") {
					return writeJSON(stdout, rec)
				}
				writeSchedule(stdout, rec)
				return nil
			})
		},
	}
}

func scheduleDeleteCommand(stdout, stderr io.Writer) *cli.Command {
	return &cli.Command{
		Name:      "delete",
		Usage:     "delete a schedule (a start already enqueued still runs)",
		UsageText: "plaita schedule delete ID [--tenant T] [--json]",
		Flags:     cliFlags(tenantFlag(), jsonFlag("print a JSON object saying what was done")),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			return withSchedule(ctx, cmd, "delete", stderr, func(k *conn, id string) error {
				if err := k.plane.DeleteSchedule(ctx, k.tenant, id); err != nil {
					return refused("schedule delete", err)
				}
				if cmd.Bool("json") {
					return writeJSON(stdout, map[string]any{"id": id, "tenant_id": k.tenant, "action": "delete", "deleted": true})
				}
				fmt.Fprintf(stdout, "schedule %s: deleted\n", id)
				return nil
			})
		},
	}
}

func scheduleToggle(name string, enable bool, stdout, stderr io.Writer) *cli.Command {
	usage := "disable a schedule: its ticks are skipped until it is enabled again"
	if enable {
		usage = "enable a schedule: ticks from now on fire (ticks while it was disabled never do)"
	}
	return &cli.Command{
		Name:      name,
		Usage:     usage,
		UsageText: "plaita schedule " + name + " ID [--tenant T] [--json]",
		Flags:     cliFlags(tenantFlag(), jsonFlag("print a JSON object saying what was done")),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			return withSchedule(ctx, cmd, name, stderr, func(k *conn, id string) error {
				rec, changed, err := k.plane.SetScheduleEnabled(ctx, k.tenant, id, enable)
				if err != nil {
					return refused("schedule "+name, err)
				}
				if cmd.Bool("json") {
					out := map[string]any{"id": id, "tenant_id": k.tenant, "action": name, "changed": changed, "enabled": rec.Enabled}
					if !rec.Next.IsZero() {
						out["next_tick"] = rec.Next
					}
					return writeJSON(stdout, out)
				}
				state := "disabled"
				if enable {
					state = "enabled"
				}
				if !changed {
					fmt.Fprintf(stdout, "schedule %s: already %s; nothing to do\n", id, state)
					return nil
				}
				fmt.Fprintf(stdout, "schedule %s: %s", id, state)
				if !rec.Next.IsZero() {
					fmt.Fprintf(stdout, " (next tick %s)", rec.Next.Format(time.RFC3339))
				}
				fmt.Fprintln(stdout)
				return nil
			})
		},
	}
}

// scheduleRunCommand is `plaita schedule run ID`: what the schedule starts, now and once
// (control.RunScheduleNow, as the console's Run now).
func scheduleRunCommand(stdout, stderr io.Writer) *cli.Command {
	return &cli.Command{
		Name:      "run",
		Usage:     "start what a schedule starts, now and once (its ticks stay as they are)",
		UsageText: "plaita schedule run ID [--tenant T] [--json]",
		Flags:     cliFlags(tenantFlag(), jsonFlag("print the start as JSON")),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			return withSchedule(ctx, cmd, "run", stderr, func(k *conn, id string) error {
				s, err := k.plane.RunScheduleNow(ctx, k.tenant, id)
				if err != nil {
					return refused("schedule run", err)
				}
				if cmd.Bool("json") {
					return writeJSON(stdout, s)
				}
				fmt.Fprintf(stdout, "schedule %s: started %s (%s version %s)\n", id, s.ExecutionID, s.FlowID, s.FlowVersion)
				return nil
			})
		},
	}
}

func scheduleFiresCommand(stdout, stderr io.Writer) *cli.Command {
	return &cli.Command{
		Name:      "fires",
		Usage:     "print a schedule's newest past ticks, each with its execution and that execution's status",
		UsageText: "plaita schedule fires ID [--limit N] [--tenant T] [--json]",
		Flags: cliFlags(tenantFlag(), &cli.IntFlag{Name: "limit", Value: 20, Usage: fmt.Sprintf("ticks to print (1–%d)", control.MaxScheduleFires)},
			jsonFlag("print the ticks as JSON")),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			return withSchedule(ctx, cmd, "fires", stderr, func(k *conn, id string) error {
				rows, err := k.plane.ScheduleFires(ctx, k.tenant, id, int(cmd.Int("limit")))
				if err != nil {
					return refused("schedule fires", err)
				}
				if cmd.Bool("json") {
					return writeJSON(stdout, map[string]any{"schedule_id": id, "items": rows})
				}
				if len(rows) == 0 {
					fmt.Fprintf(stdout, "schedule %s: no tick handled yet\n", id)
				}
				for _, r := range rows {
					fmt.Fprintf(stdout, "%s  %s  %s\n", r.Tick.UTC().Format(time.RFC3339), r.ExecutionID, cmp.Or(string(r.Status), "none (skipped, or deleted)"))
				}
				return nil
			})
		},
	}
}

// withSchedule checks the one ID argument, runs the schedule role's preflight, connects and
// runs fn. Its messages name the command as typed: "schedule show", not "show".
func withSchedule(ctx context.Context, cmd *cli.Command, verb string, stderr io.Writer, fn func(k *conn, id string) error) error {
	name := "schedule " + verb
	if cmd.Args().Len() != 1 {
		return cliUsage(name, "name one schedule: plaita %s ID", name)
	}
	id := cmd.Args().First()
	if err := control.ValidName("schedule id", id); err != nil {
		return cliUsage(name, "%v", err)
	}
	k, err := connect(cmd, name, config.RoleSchedule, stderr)
	if err != nil {
		return err
	}
	defer k.close()
	return fn(k, id)
}

func scheduleAdd(ctx context.Context, cmd *cli.Command, stdout, stderr io.Writer) error {
	const name = "schedule add"
	var id string
	switch cmd.Args().Len() {
	case 0:
	case 1:
		id = cmd.Args().First()
		if err := control.ValidName("schedule id", id); err != nil {
			return cliUsage(name, "%v", err)
		}
	default:
		return cliUsage(name, "at most one schedule id: plaita schedule add [ID] --cron SPEC --flow FLOW_ID")
	}
	if !cmd.IsSet("cron") || !cmd.IsSet("flow") {
		return cliUsage(name, "--cron and --flow are required")
	}
	s := control.Schedule{ID: id, Cron: cmd.String("cron"), TimeZone: cmd.String("tz"),
		Enabled: !cmd.Bool("disabled"), FlowID: cmd.String("flow"), FlowVersion: cmd.String("version")}
	if err := control.CheckSchedule(&s); err != nil {
		return refused(name, err) // before any connection: a bad spec is refused without Redis
	}
	k, err := prepare(cmd, name, config.RoleSchedule, stderr)
	if err != nil {
		return err
	}
	s.TenantID = k.tenant
	if cmd.IsSet("input") {
		// No start could carry an input over the state bound.
		if s.Input, err = readDoc(ctx, name, "input", cmd.String("input"), stateBound(k.cfg)); err != nil {
			return err
		}
	}
	if err := k.dial(name); err != nil {
		return err
	}
	defer k.close()
	added, err := k.plane.AddSchedule(ctx, s)
	if err != nil {
		return refused(name, err)
	}
	for _, w := range added.Warnings {
		k.log.Warn().Str("event", "schedule.flow_not_published").Str("flow_id", added.FlowID).Str("flow_version", added.FlowVersion).Msg(w)
	}
	if cmd.Bool("json") {
		return writeJSON(stdout, added)
	}
	rec := added.ScheduleRecord
	state := "enabled"
	if !rec.Enabled {
		state = "disabled"
	}
	fmt.Fprintf(stdout, "schedule %s created in tenant %s: cron %q (%s), flow %s version %s, %s\n",
		rec.ID, rec.TenantID, rec.Cron, rec.TimeZone, rec.FlowID, rec.FlowVersion, state)
	if !rec.Next.IsZero() {
		fmt.Fprintf(stdout, "next tick: %s\n", rec.Next.Format(time.RFC3339))
	}
	return nil
}

func scheduleList(ctx context.Context, cmd *cli.Command, stdout, stderr io.Writer) error {
	const name = "schedule list"
	if cmd.Args().Len() > 0 {
		return cliUsage(name, "no arguments: plaita schedule list [--tenant T] [--json]")
	}
	k, err := connect(cmd, name, config.RoleSchedule, stderr)
	if err != nil {
		return err
	}
	defer k.close()
	recs, bad, err := k.plane.Schedules(ctx, k.tenant)
	if err != nil {
		return refused(name, err)
	}
	for _, b := range bad {
		k.log.Warn().Err(b.Err).Str("event", "schedule.bad_record").Str("schedule_id", b.ID).Msg("a schedule's record does not decode: delete it, or write it again")
	}
	if cmd.Bool("json") {
		type badOut struct {
			ID    string `json:"id"`
			Error string `json:"error"`
		}
		out := struct {
			TenantID string                   `json:"tenant_id"`
			Items    []control.ScheduleRecord `json:"items"`
			Bad      []badOut                 `json:"bad"`
		}{TenantID: k.tenant, Items: nonNil(recs), Bad: []badOut{}}
		for _, b := range bad {
			out.Bad = append(out.Bad, badOut{ID: b.ID, Error: b.Err.Error()})
		}
		return writeJSON(stdout, out)
	}
	if len(recs) == 0 && len(bad) == 0 {
		fmt.Fprintf(stdout, "no schedules in tenant %s\n", k.tenant)
		return nil
	}
	var b bytes.Buffer
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tENABLED\tCRON\tTZ\tFLOW\tVERSION\tNEXT TICK\tLAST FIRED")
	for _, r := range recs {
		fmt.Fprintf(tw, "%s\t%v\t%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.Enabled, r.Cron, r.TimeZone, r.FlowID, r.FlowVersion, tickText(r.Next), lastFired(r))
	}
	for _, bd := range bad {
		fmt.Fprintf(tw, "%s\t?\t(unreadable record)\t\t\t\t\t\n", bd.ID)
	}
	if err := tw.Flush(); err != nil {
		return cliFail(name, "%v", err)
	}
	for _, line := range strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n") {
		fmt.Fprintln(stdout, strings.TrimRight(line, " "))
	}
	return nil
}

func tickText(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Format(time.RFC3339)
}

func lastFired(r control.ScheduleRecord) string {
	if r.LastFire == nil {
		return "-"
	}
	return r.LastFire.Tick.Format(time.RFC3339) + " " + r.LastFire.ExecutionID
}

// writeSchedule prints one schedule for `plaita schedule show`.
func writeSchedule(w io.Writer, r control.ScheduleRecord) {
	fmt.Fprintf(w, "schedule %s (tenant %s)\n", r.ID, r.TenantID)
	fmt.Fprintf(w, "  enabled:   %v\n", r.Enabled)
	fmt.Fprintf(w, "  cron:      %s (%s)\n", r.Cron, r.TimeZone)
	fmt.Fprintf(w, "  flow:      %s version %s\n", r.FlowID, r.FlowVersion)
	fmt.Fprintf(w, "  input:     %s\n", string(r.Input))
	fmt.Fprintf(w, "  created:   %s, updated %s\n", r.CreatedAt.Format(time.RFC3339), r.UpdatedAt.Format(time.RFC3339))
	fmt.Fprintf(w, "  next tick: %s\n", tickText(r.Next))
	if f := r.LastFire; f != nil {
		how := ""
		if f.Recovered {
			how = ", completed by a takeover"
		}
		fmt.Fprintf(w, "  last fired: tick %s → execution %s (version %s, by %s%s)\n", f.Tick.Format(time.RFC3339), f.ExecutionID, f.FlowVersion, f.By, how)
	}
	if s := r.LastSkip; s != nil {
		fmt.Fprintf(w, "  last skipped: tick %s: %s\n", s.Tick.Format(time.RFC3339), s.Reason)
	}
	for _, p := range r.Pending {
		fmt.Fprintf(w, "  pending: tick %s → execution %s, claimed by %s at %s\n", p.Tick().Format(time.RFC3339), p.ExecutionID, p.By,
			time.UnixMilli(p.ClaimedMS).UTC().Format(time.RFC3339))
	}
}
