package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v3"
)

// cliFlags are the flags every command over the shared Redis has.
func cliFlags(extra ...cli.Flag) []cli.Flag {
	flags := append(extra, logFlags()...)
	return append(flags, logLevelFlag())
}

func tenantFlag() cli.Flag {
	return &cli.StringFlag{Name: "tenant", Usage: "tenant slug (default: the default tenant)"}
}

func jsonFlag(usage string) cli.Flag { return &cli.BoolFlag{Name: "json", Usage: usage} }

// cliUsage is bad usage of the named command: exit 2.
func cliUsage(name, format string, args ...any) error {
	return &exitError{code: ExitRejected, err: fmt.Errorf(name+": "+format, args...)}
}

// cliFail is a command that ran and failed: exit 1.
func cliFail(name, format string, args ...any) error {
	return &exitError{code: ExitFailure, err: fmt.Errorf(name+": "+format, args...)}
}

// subcommandsOnly is the action of a command that only groups subcommands (execution, event):
// an argument that names none of them is bad usage, no argument prints the help.
func subcommandsOnly(_ context.Context, cmd *cli.Command) error {
	if cmd.Args().Len() == 0 {
		return cli.ShowSubcommandHelp(cmd)
	}
	var names []string
	for _, c := range cmd.Commands {
		if c.Name != "help" && !c.Hidden { // urfave/cli's own help command
			names = append(names, c.Name)
		}
	}
	return cliUsage(cmd.Name, "unknown subcommand %q (%s)", cmd.Args().First(), strings.Join(names, ", "))
}

func writeJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
