package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v3"
)

// cliFlags are the flags every command over the shared Redis has: its own, the connection's
// (the roles take them too) and the logging ones.
func cliFlags(extra ...cli.Flag) []cli.Flag {
	flags := append(extra, connectionFlags()...)
	flags = append(flags, logFlags()...)
	return append(flags, logLevelFlag())
}

// localFlags are the flags of a command that picks its own Redis (bench): its own and the logging
// ones.
func localFlags(extra ...cli.Flag) []cli.Flag {
	return append(append(extra, logFlags()...), logLevelFlag())
}

// connectionFlags override the variables that say where the shared Redis and the task queue
// are, as the roles' own flags do.
func connectionFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "redis-url", Usage: "the Redis to use (overrides PLAITA_REDIS_URL)"},
		&cli.StringFlag{Name: "queue-name", Usage: "the task stream (overrides PLAITA_QUEUE_NAME)"},
	}
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
	name := cmd.Args().First()
	if s := cli.SuggestCommand(cmd.Commands, name); s != "" {
		return cliUsage(cmd.Name, "unknown subcommand %q: did you mean %q? (%s)", name, s, strings.Join(names, ", "))
	}
	return cliUsage(cmd.Name, "unknown subcommand %q (%s)", name, strings.Join(names, ", "))
}

func writeJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
