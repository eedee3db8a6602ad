package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/urfave/cli/v3"

	"plaita/engine"
	"plaita/engine/nodes"
	"plaita/graph"
	"plaita/roles/settings"
)

// flowGraphCommand draws FLOW.json as SVG on stdout: the picture the console's flow page
// shows (package graph), for docs and reviews. It parses the flow as a worker would (the
// worker's preflight and node types) and needs no Redis.
func flowGraphCommand(stdout, stderr io.Writer) *cli.Command {
	return &cli.Command{
		Name:      "graph",
		Usage:     "draw FLOW.json as SVG on stdout (the console's picture of the flow)",
		UsageText: "plaita flow graph FLOW.json > flow.svg",
		Description: "Runs the worker's configuration preflight and parses the flow with the worker's node types;\n" +
			"connects to nothing. Exit status: 0 drawn; 1 the flow cannot be drawn (too many nodes);\n" +
			"2 bad usage or an invalid flow (every problem is listed with its JSON path).",
		Flags:  append(logFlags(), logLevelFlag()),
		Action: func(ctx context.Context, cmd *cli.Command) error { return flowGraph(ctx, cmd, stdout, stderr) },
	}
}

func flowGraph(ctx context.Context, cmd *cli.Command, stdout, stderr io.Writer) error {
	const name = "flow graph"
	if cmd.Args().Len() != 1 {
		return cliUsage(name, "name one flow file: plaita flow graph FLOW.json > flow.svg")
	}
	path := cmd.Args().First()
	cfg, log, err := runPreflight(cmd, stderr)
	if err != nil {
		return err
	}
	def, err := readFileBounded(ctx, path, flowBound)
	if err != nil {
		return cliUsage(name, "flow file %s: %v", path, err)
	}
	reg := engine.NewRegistry()
	if err := nodes.Register(reg, settings.Nodes(cfg), nodeSetupLog(log)); err != nil {
		return cliFail(name, "%v", err)
	}
	f, err := engine.Parse(def, reg, settings.Engine(cfg).Expr)
	if err != nil {
		return &exitError{code: ExitRejected, err: fmt.Errorf("%s: %s: %w", name, path, err)}
	}
	svg, err := graph.New().SVG(f, nil)
	if err != nil {
		return cliFail(name, "%s: %v", path, err)
	}
	if _, err := stdout.Write(svg); err != nil {
		return cliFail(name, "write: %v", err)
	}
	return nil
}
