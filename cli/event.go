package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v3"

	"plaita/config"
	"plaita/control"
)

// eventCommand publishes and lists events (docs/events.md) through control, as the console
// does. A published event wakes the executions waiting for it through the filter role.
func eventCommand(stdout, stderr io.Writer) *cli.Command {
	return &cli.Command{
		Name:      "event",
		Usage:     "publish an event (it wakes the executions waiting for it, through the filter role) or list events",
		UsageText: "plaita event publish|list [flags]",
		Description: "Every subcommand runs the worker's configuration preflight and connects to PLAITA_REDIS_URL.\n" +
			"Exit status: 0 done; 1 failure (Redis, an event id taken by another event); 2 bad usage.",
		Action: subcommandsOnly,
		Commands: []*cli.Command{
			{
				Name:      "publish",
				Usage:     "publish an event of TYPE with its data",
				UsageText: "plaita event publish TYPE [--data JSON|@file] [--id ID] [--tenant T] [--no-count] [--json]",
				Description: "The data (default {}) is what a waiting execution sees as EVENT. The event is kept for\n" +
					"PLAITA_EVENT_TTL_SECONDS. Without --id an id is minted; publishing an id again with the same\n" +
					"type and data is idempotent (\"already published\", exit 0; a waiting execution is woken once),\n" +
					"with another type or other data it is refused (exit 1). It says how many executions wait for\n" +
					"it (counted before it is written) and how many filters are alive; --no-count skips both reads\n" +
					"(waiting and filters_alive are -1 in --json) for a producer that sends many events.",
				Flags: cliFlags(tenantFlag(),
					&cli.StringFlag{Name: "data", Usage: "the event's data: inline JSON, or @path to read it from a file (default {})"},
					&cli.StringFlag{Name: "id", Usage: "the event id (default: a new one); the same id publishes once"},
					&cli.BoolFlag{Name: "no-count", Usage: "publish only: do not count the waiting executions and the filters alive"},
					jsonFlag("print the stored event as JSON, with \"duplicate\"")),
				Action: func(ctx context.Context, cmd *cli.Command) error { return eventPublish(ctx, cmd, stdout, stderr) },
			},
			{
				Name:      "list",
				Usage:     "list the tenant's newest events, of one type or of all",
				UsageText: "plaita event list [--type T] [--tenant T] [--limit N] [--cursor C] [--json]",
				Flags: cliFlags(tenantFlag(),
					&cli.StringFlag{Name: "type", Usage: "only events of this type"},
					&cli.IntFlag{Name: "limit", Value: 50, Usage: fmt.Sprintf("events to list (1–%d)", control.MaxEventList)},
					&cli.StringFlag{Name: "cursor", Usage: "the next page (next_cursor of the previous one)"},
					jsonFlag("print the page as JSON: events, expired, corrupt")),
				Action: func(ctx context.Context, cmd *cli.Command) error { return eventList(ctx, cmd, stdout, stderr) },
			},
		},
	}
}

func eventPublish(ctx context.Context, cmd *cli.Command, stdout, stderr io.Writer) error {
	const name = "event publish"
	if cmd.Args().Len() != 1 {
		return cliUsage(name, "name one event type: plaita event publish TYPE [--data JSON]")
	}
	typ := cmd.Args().First()
	if err := control.ValidName("event type", typ); err != nil {
		return cliUsage(name, "%v", err)
	}
	id := cmd.String("id")
	if cmd.IsSet("id") {
		if err := control.ValidID(id); err != nil {
			return cliUsage(name, "--id %q: %v", id, err)
		}
	}
	k, err := prepare(cmd, name, config.RoleWorker, stderr)
	if err != nil {
		return err
	}
	data := json.RawMessage(`{}`)
	if cmd.IsSet("data") {
		if data, err = readDoc(ctx, name, "data", cmd.String("data"), eventBound); err != nil {
			return err
		}
	}
	if err := k.dial(name); err != nil {
		return err
	}
	defer k.close()
	publish := k.plane.PublishEvent
	if cmd.Bool("no-count") {
		publish = k.plane.PublishEventUncounted
	}
	ev, err := publish(ctx, control.Event{ID: id, Type: typ, TenantID: k.tenant, Data: data})
	if err != nil {
		return refused(name, err)
	}
	if cmd.Bool("json") {
		return writeJSON(stdout, ev)
	}
	what := "published"
	if ev.Duplicate {
		what = "already published at " + ev.PublishedAt.Format(time.RFC3339Nano)
	}
	fmt.Fprintf(stdout, "event %s: %s (type %s, tenant %s)\n", ev.ID, what, ev.Type, ev.TenantID)
	if ev.Text != "" {
		fmt.Fprintf(stdout, "  %s\n", ev.Text)
	}
	return nil
}

func eventList(ctx context.Context, cmd *cli.Command, stdout, stderr io.Writer) error {
	const name = "event list"
	if cmd.Args().Len() > 0 {
		return cliUsage(name, "takes no arguments (use --type T)")
	}
	typ := cmd.String("type")
	if cmd.IsSet("type") {
		if err := control.ValidName("event type", typ); err != nil {
			return cliUsage(name, "%v", err)
		}
	}
	limit := cmd.Int("limit")
	if limit < 1 || limit > control.MaxEventList {
		return cliUsage(name, "--limit %d: use 1 to %d", limit, control.MaxEventList)
	}
	k, err := connect(cmd, name, config.RoleWorker, stderr)
	if err != nil {
		return err
	}
	defer k.close()
	page, err := k.plane.ListEvents(ctx, control.EventList{Tenant: k.tenant, Type: typ, Cursor: cmd.String("cursor"), Limit: int(limit)})
	if err != nil {
		return refused(name, err)
	}
	if cmd.Bool("json") {
		return writeJSON(stdout, struct {
			TenantID string `json:"tenant_id"`
			Type     string `json:"type,omitempty"`
			control.EventPage
		}{k.tenant, typ, page})
	}
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PUBLISHED\tTYPE\tID\tDATA")
	for _, ev := range page.Events {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", ev.PublishedAt.Format(time.RFC3339), ev.Type, ev.ID, clip(string(ev.Data), 60))
	}
	tw.Flush()
	stdout.Write(buf.Bytes())
	of := "all types"
	if typ != "" {
		of = "type " + typ
	}
	fmt.Fprintf(stdout, "%d event(s) of %s in tenant %s\n", len(page.Events), of, k.tenant)
	if page.Expired > 0 || page.Corrupt > 0 {
		fmt.Fprintf(stdout, "skipped: %d expired (removed from the index), %d unreadable\n", page.Expired, page.Corrupt)
	}
	if page.NextCursor != "" {
		next := []string{"event", "list", "--cursor", page.NextCursor, "--limit", fmt.Sprint(limit)}
		if typ != "" {
			next = append(next, "--type", typ)
		}
		if k.tenant != control.DefaultTenant {
			next = append(next, "--tenant", k.tenant)
		}
		fmt.Fprintf(stdout, "more: %s\n", k.plane.Command(next...))
	}
	return nil
}

// clip shortens s to at most n runes for a table cell.
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
