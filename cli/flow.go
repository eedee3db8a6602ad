package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/rs/zerolog"
	"github.com/urfave/cli/v3"

	"plaita/config"
	"plaita/control"
	"plaita/engine"
)

// flowCommand publishes and reads flow definitions (control/flows.go): a published version is
// immutable, a change is published as a new version.
func flowCommand(stdout, stderr io.Writer) *cli.Command {
	return &cli.Command{
		Name:      "flow",
		Usage:     "publish a flow definition without starting it, or list and show the published ones",
		UsageText: "plaita flow publish|list|show|graph [flags]",
		Description: "Every subcommand runs the worker's configuration preflight and connects to PLAITA_REDIS_URL.\n" +
			"Exit status: 0 done; 1 failure, unknown flow, or a version published with another definition; 2 bad usage\n" +
			"or an invalid flow (every problem is listed with its JSON path).",
		Action: subcommandsOnly,
		Commands: []*cli.Command{
			{
				Name:      "publish",
				Usage:     "validate and publish FLOW.json (its \"version\", else --version, else 12 hex digits of its hash)",
				UsageText: "plaita flow publish FLOW.json [--version V] [--tenant T] [--json]",
				Flags: cliFlags(tenantFlag(), &cli.StringFlag{Name: "version", Usage: "the version to publish the file as"},
					jsonFlag("print {flow_id, version, result} as JSON")),
				Action: func(ctx context.Context, cmd *cli.Command) error { return flowPublish(ctx, cmd, stdout, stderr) },
			},
			{
				Name:      "list",
				Usage:     "list the tenant's published flows, most recently published first",
				UsageText: "plaita flow list [--tenant T] [--limit N] [--json]",
				Flags: cliFlags(tenantFlag(), &cli.IntFlag{Name: "limit", Value: 100, Usage: fmt.Sprintf("flows to list (1–%d)", control.MaxFlowList)},
					jsonFlag("print {tenant_id, items} as JSON")),
				Action: func(ctx context.Context, cmd *cli.Command) error { return flowList(ctx, cmd, stdout, stderr) },
			},
			{
				Name:      "show",
				Usage:     "print a published version (default: the latest) and the flow's versions",
				UsageText: "plaita flow show FLOW_ID [--version V] [--tenant T] [--json]",
				Flags: cliFlags(tenantFlag(), &cli.StringFlag{Name: "version", Usage: "the version to show (default: the latest)"},
					jsonFlag("print the version, its definition and the versions as JSON")),
				Action: func(ctx context.Context, cmd *cli.Command) error { return flowShow(ctx, cmd, stdout, stderr) },
			},
			flowGraphCommand(stdout, stderr),
		},
	}
}

func flowPublish(ctx context.Context, cmd *cli.Command, stdout, stderr io.Writer) error {
	const name = "flow publish"
	if cmd.Args().Len() != 1 {
		return cliUsage(name, "name one flow file: plaita flow publish FLOW.json")
	}
	path := cmd.Args().First()
	if cmd.IsSet("version") && cmd.String("version") == "" {
		return cliUsage(name, "--version must not be empty")
	}
	k, err := prepare(cmd, name, config.RoleWorker, stderr)
	if err != nil {
		return err
	}
	def, err := readFileBounded(ctx, path, flowBound)
	if errors.Is(err, errReadInterrupted) {
		return cliFail(name, "flow file %s: %v", path, err)
	} else if err != nil {
		return cliUsage(name, "flow file %s: %v", path, err)
	}
	if err := k.dial(name); err != nil {
		return err
	}
	defer k.close()
	pub, err := k.plane.PublishFlow(ctx, k.tenant, def, cmd.String("version"))
	if err != nil {
		return refused(name, fmt.Errorf("%s: %w", path, err))
	}
	warnFlow(k.log, path, pub.Flow)
	if cmd.Bool("json") {
		out := map[string]any{"flow_id": pub.Flow.ID, "tenant_id": k.tenant, "version": pub.Version,
			"flow_hash": pub.Flow.Hash, "result": pub.Result}
		if len(pub.Warnings) > 0 {
			out["warnings"] = pub.Warnings
		}
		return writeJSON(stdout, out)
	}
	what := "published"
	if pub.Result == control.AlreadyPublished {
		what = "already published with this definition: left as it is"
	}
	fmt.Fprintf(stdout, "flow %s version %s: %s (tenant %s)\n", pub.Flow.ID, pub.Version, what, k.tenant)
	return nil
}

func flowList(ctx context.Context, cmd *cli.Command, stdout, stderr io.Writer) error {
	const name = "flow list"
	if cmd.Args().Len() > 0 {
		return cliUsage(name, "takes no arguments")
	}
	k, err := connect(cmd, name, config.RoleWorker, stderr)
	if err != nil {
		return err
	}
	defer k.close()
	flows, err := k.plane.Flows(ctx, k.tenant, int(cmd.Int("limit")))
	if err != nil {
		return refused(name, err)
	}
	if cmd.Bool("json") {
		return writeJSON(stdout, map[string]any{"tenant_id": k.tenant, "items": flows})
	}
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "FLOW\tLATEST\tVERSIONS\tPUBLISHED")
	for _, f := range flows {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", f.FlowID, f.Latest, f.Versions, f.PublishedAt.Format(time.RFC3339))
	}
	tw.Flush()
	stdout.Write(buf.Bytes())
	fmt.Fprintf(stdout, "%d flow(s) in tenant %s\n", len(flows), k.tenant)
	return nil
}

func flowShow(ctx context.Context, cmd *cli.Command, stdout, stderr io.Writer) error {
	const name = "flow show"
	if cmd.Args().Len() != 1 {
		return cliUsage(name, "name one flow id: plaita flow show FLOW_ID")
	}
	id := cmd.Args().First()
	if err := control.ValidName("flow id", id); err != nil {
		return cliUsage(name, "%v", err)
	}
	k, err := connect(cmd, name, config.RoleWorker, stderr)
	if err != nil {
		return err
	}
	defer k.close()
	shown, err := k.plane.Flow(ctx, k.tenant, id, cmd.String("version"))
	if err != nil {
		return refused(name, err)
	}
	if cmd.Bool("json") {
		return writeJSON(stdout, shown)
	}
	writeFlow(stdout, shown)
	return nil
}

func writeFlow(w io.Writer, f control.FlowShown) {
	fmt.Fprintf(w, "flow %s version %s (tenant %s)\n", f.FlowID, f.Version, f.TenantID)
	if f.Name != "" {
		fmt.Fprintf(w, "  name:      %s\n", f.Name)
	}
	fmt.Fprintf(w, "  nodes:     %d\n", f.Nodes)
	fmt.Fprintf(w, "  hash:      %s\n", f.Hash)
	fmt.Fprintln(w, "  versions:")
	for _, v := range f.Versions {
		fmt.Fprintf(w, "    %s\t%s\n", v.Version, v.PublishedAt.Format(time.RFC3339))
	}
	var def bytes.Buffer
	if json.Indent(&def, f.Definition, "  ", "  ") != nil {
		def.Write(f.Definition)
	}
	fmt.Fprintf(w, "  definition:\n  %s\n", def.String())
}

// warnFlow logs a valid flow's validation warnings, one line each with its JSON path
// (docs/flows.md, "Warnings"): what works, but costs more than it needs to.
func warnFlow(log zerolog.Logger, file string, f *engine.Flow) {
	for _, w := range f.Warnings {
		log.Warn().Str("event", "flow.warning").Str("file", file).Str("flow_id", f.ID).Str("path", w.Path).Msg(w.Message)
	}
}
