package cli

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/user"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v3"

	"plaita/config"
	"plaita/control"
	"plaita/internal/keyring"
	"plaita/roles"
)

// credentialsCommand manages the tenants' credentials (docs/credentials.md) through control, as
// the console does. A value is read from standard input or a file — never from a flag, which
// would leave it in the shell's history and the process list — sealed before it leaves the
// process, and never printed.
func credentialsCommand(stdout, stderr io.Writer) *cli.Command {
	valueFlags := []cli.Flag{
		&cli.StringFlag{Name: "value-file", Usage: "read the value from this file (default: standard input; one trailing newline is dropped)"},
	}
	return &cli.Command{
		Name:      "credentials",
		Usage:     "create, list, show, set and delete a tenant's credentials (values are sealed, never printed)",
		UsageText: "plaita credentials create|list|show|set|delete|new-key [NAME] [flags]",
		Description: "Every subcommand but new-key runs the worker's configuration preflight, reads the master key\n" +
			"(PLAITA_CREDENTIALS_KEY, else the file PLAITA_CREDENTIALS_KEY_FILE — the console creates it; the CLI\n" +
			"does not) and connects to PLAITA_REDIS_URL. Exit status: 0 done; 1 failure (no key, Redis, a name\n" +
			"taken or unknown); 2 bad usage.",
		Action: subcommandsOnly,
		Commands: []*cli.Command{
			{
				Name: "create", Usage: "create a credential; its value comes from standard input or --value-file",
				UsageText: "plaita credentials create NAME [--value-file F] [--tenant T] [--json]",
				Flags:     cliFlags(append([]cli.Flag{tenantFlag(), jsonFlag("print the credential (never its value) as JSON")}, valueFlags...)...),
				Action: func(ctx context.Context, cmd *cli.Command) error {
					return credentialWrite(cmd, "credentials create", stdout, stderr, func(c *control.Credentials, tenant, name string, v []byte) (control.CredentialView, error) {
						return c.Create(ctx, tenant, name, v, cliActor())
					})
				},
			},
			{
				Name: "set", Usage: "replace a credential's value (standard input or --value-file)",
				UsageText: "plaita credentials set NAME [--value-file F] [--tenant T] [--json]",
				Flags:     cliFlags(append([]cli.Flag{tenantFlag(), jsonFlag("print the credential (never its value) as JSON")}, valueFlags...)...),
				Action: func(ctx context.Context, cmd *cli.Command) error {
					return credentialWrite(cmd, "credentials set", stdout, stderr, func(c *control.Credentials, tenant, name string, v []byte) (control.CredentialView, error) {
						return c.SetValue(ctx, tenant, name, v, cliActor())
					})
				},
			},
			{
				Name: "list", Usage: "list the tenant's credentials: names, fingerprints, keys, revisions",
				UsageText: "plaita credentials list [--tenant T] [--json]",
				Flags:     cliFlags(tenantFlag(), jsonFlag("print {tenant_id, items} as JSON")),
				Action: func(ctx context.Context, cmd *cli.Command) error {
					return withCredentials(ctx, cmd, "credentials list", 0, stderr, func(c *control.Credentials, tenant string, _ []string) error {
						items, err := c.List(ctx, tenant)
						if err != nil {
							return refused("credentials list", err)
						}
						if cmd.Bool("json") {
							return writeJSON(stdout, map[string]any{"tenant_id": tenant, "items": items})
						}
						w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
						fmt.Fprintln(w, "NAME\tFINGERPRINT\tKEY\tREV\tUPDATED\tBY")
						for _, v := range items {
							fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\t%s\n", v.Name, v.Fingerprint, v.KeyID, v.Rev, v.UpdatedAt.Format(time.RFC3339), v.UpdatedBy)
						}
						return w.Flush()
					})
				},
			},
			{
				Name: "show", Usage: "print one credential (never its value)",
				UsageText: "plaita credentials show NAME [--tenant T] [--json]",
				Flags:     cliFlags(tenantFlag(), jsonFlag("print the credential as JSON")),
				Action: func(ctx context.Context, cmd *cli.Command) error {
					return withCredentials(ctx, cmd, "credentials show", 1, stderr, func(c *control.Credentials, tenant string, args []string) error {
						v, err := c.Get(ctx, tenant, args[0])
						if err != nil {
							return refused("credentials show", err)
						}
						return printCredential(cmd, stdout, v, "")
					})
				},
			},
			{
				Name: "delete", Usage: "delete a credential (a node that names it fails from then on)",
				UsageText: "plaita credentials delete NAME [--tenant T] [--json]",
				Flags:     cliFlags(tenantFlag(), jsonFlag("print a JSON object saying what was done")),
				Action: func(ctx context.Context, cmd *cli.Command) error {
					return withCredentials(ctx, cmd, "credentials delete", 1, stderr, func(c *control.Credentials, tenant string, args []string) error {
						if err := c.Delete(ctx, tenant, args[0]); err != nil {
							return refused("credentials delete", err)
						}
						if cmd.Bool("json") {
							return writeJSON(stdout, map[string]any{"tenant_id": tenant, "name": args[0], "deleted": true})
						}
						fmt.Fprintf(stdout, "credential %s: deleted\n", args[0])
						return nil
					})
				},
			},
			{
				Name: "rotate-key", Usage: "move every credential to the current master key (the first of the key file or PLAITA_CREDENTIALS_KEY)",
				UsageText: "plaita credentials rotate-key [--tenant T] [--dry-run] [--json]",
				Description: "A rotation: put the new key first in every process's key file (or PLAITA_CREDENTIALS_KEY), the\n" +
					"old one after it; run this; when it reports no credential under the old key, drop the old key.\n" +
					"Each credential's data key is re-wrapped (its value is not decrypted) and written at the revision\n" +
					"read: a run cut short is rerun, and moves what is left. Without --tenant: the default tenant\n" +
					"and every tenant the console published.",
				Flags: cliFlags(&cli.StringFlag{Name: "tenant", Usage: "only this tenant"},
					&cli.BoolFlag{Name: "dry-run", Usage: "say what would move, write nothing"},
					jsonFlag("print the report as JSON")),
				Action: func(ctx context.Context, cmd *cli.Command) error { return credentialsRotate(ctx, cmd, stdout, stderr) },
			},
			{
				Name: "new-key", Usage: "print a new master key (for PLAITA_CREDENTIALS_KEY, or a key file)",
				UsageText: "plaita credentials new-key [--json]",
				Flags:     cliFlags(jsonFlag("print {key, key_id} as JSON")),
				Action: func(_ context.Context, cmd *cli.Command) error {
					k := keyring.NewKey()
					if cmd.Bool("json") {
						return writeJSON(stdout, map[string]string{"key": k.String(), "key_id": k.ID()})
					}
					fmt.Fprintln(stdout, k.String())
					return nil
				},
			},
		},
	}
}

// withCredentials runs f with the credentials over PLAITA_REDIS_URL, after checking that the
// command has exactly args arguments (names).
func withCredentials(ctx context.Context, cmd *cli.Command, name string, args int, stderr io.Writer,
	f func(c *control.Credentials, tenant string, args []string) error) error {
	if cmd.Args().Len() != args {
		if args == 0 {
			return cliUsage(name, "takes no argument")
		}
		return cliUsage(name, "name one credential")
	}
	k, err := connect(cmd, name, config.RoleWorker, stderr)
	if err != nil {
		return err
	}
	defer k.close()
	return f(roles.Credentials(k.cfg, k.c, k.log), k.tenant, cmd.Args().Slice())
}

// credentialWrite runs the preflight, reads the value (standard input or --value-file), then
// connects and writes it with f.
func credentialWrite(cmd *cli.Command, name string, stdout, stderr io.Writer,
	f func(c *control.Credentials, tenant, name string, v []byte) (control.CredentialView, error)) error {
	if cmd.Args().Len() != 1 {
		return cliUsage(name, "name one credential; its value comes from standard input or --value-file")
	}
	k, err := prepare(cmd, name, config.RoleWorker, stderr)
	if err != nil {
		return err
	}
	value, err := readValue(cmd)
	if err != nil {
		return cliUsage(name, "%v", err)
	}
	if err := k.dial(name); err != nil {
		return err
	}
	defer k.close()
	v, err := f(roles.Credentials(k.cfg, k.c, k.log), k.tenant, cmd.Args().First(), value)
	if err != nil {
		return refused(name, err)
	}
	return printCredential(cmd, stdout, v, "written")
}

// readValue reads a credential's value: --value-file, else standard input; one trailing newline
// (what `echo` and editors add) is dropped.
func readValue(cmd *cli.Command) ([]byte, error) {
	var r io.Reader = cmd.Root().Reader
	if r == nil {
		r = os.Stdin
	}
	if p := cmd.String("value-file"); p != "" {
		f, err := os.Open(p)
		if err != nil {
			return nil, fmt.Errorf("--value-file: %w", err)
		}
		defer f.Close()
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(bufio.NewReader(r), control.MaxCredentialBytes+2))
	if err != nil {
		return nil, fmt.Errorf("read the value: %w", err)
	}
	s := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	if s == "" {
		return nil, fmt.Errorf("the value is empty (give it on standard input or with --value-file)")
	}
	return []byte(s), nil
}

func printCredential(cmd *cli.Command, stdout io.Writer, v control.CredentialView, what string) error {
	if cmd.Bool("json") {
		return writeJSON(stdout, v)
	}
	if what != "" {
		fmt.Fprintf(stdout, "credential %s %s: rev %d, fingerprint %s, key %s\n", v.Name, what, v.Rev, v.Fingerprint, v.KeyID)
		return nil
	}
	fmt.Fprintf(stdout, "credential %s (tenant %s)\n  fingerprint %s\n  key         %s\n  rev         %d\n  created     %s by %s\n  updated     %s by %s\n",
		v.Name, v.Tenant, v.Fingerprint, v.KeyID, v.Rev, v.CreatedAt.Format(time.RFC3339), v.CreatedBy, v.UpdatedAt.Format(time.RFC3339), v.UpdatedBy)
	return nil
}

// cliActor names the CLI's user in what it writes (as an approval's answer does).
func cliActor() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return "cli:" + u.Username
	}
	return "cli"
}

func credentialsRotate(ctx context.Context, cmd *cli.Command, stdout, stderr io.Writer) error {
	const name = "credentials rotate-key"
	if cmd.Args().Len() != 0 {
		return cliUsage(name, "takes no argument")
	}
	k, err := connect(cmd, name, config.RoleWorker, stderr)
	if err != nil {
		return err
	}
	defer k.close()
	tenants := []string{k.tenant}
	if !cmd.IsSet("tenant") {
		if tenants, err = roles.CredentialTenants(ctx, k.c); err != nil {
			return cliFail(name, "%v", err)
		}
	}
	rep, err := roles.Credentials(k.cfg, k.c, k.log).RotateKey(ctx, tenants, cmd.Bool("dry-run"), func(tenant string, r control.KeyRotation) {
		fmt.Fprintf(stderr, "tenant %s done: %d credentials so far, %d rewrapped, %d already under %s\n", tenant, r.Credentials, r.Rewrapped, r.Already, r.CurrentKey)
	})
	if err != nil {
		return refused(name, err)
	}
	k.log.Info().Str("event", "credentials.key_rotated").Bool("dry_run", rep.DryRun).Str("current_key", rep.CurrentKey).Int("tenants", rep.Tenants).
		Int("credentials", rep.Credentials).Int("rewrapped", rep.Rewrapped).Int("already", rep.Already).Int("unopenable", len(rep.Unopenable)).
		Msg("credentials moved to the current key")
	if cmd.Bool("json") {
		if err := writeJSON(stdout, rep); err != nil {
			return err
		}
	} else {
		verb := "rewrapped"
		if rep.DryRun {
			verb = "would be rewrapped"
		}
		fmt.Fprintf(stdout, "%d credentials in %d tenants: %d %s to %s, %d already under it\n", rep.Credentials, rep.Tenants, rep.Rewrapped, verb,
			rep.CurrentKey, rep.Already)
		for id, n := range rep.ByKey {
			fmt.Fprintf(stdout, "  under key %s: %d\n", id, n)
		}
		for _, u := range rep.Unopenable {
			fmt.Fprintf(stdout, "  %s: under a key this process does not hold — left as it is\n", u)
		}
	}
	if len(rep.Unopenable) > 0 {
		return cliFail(name, "%d credentials are under a key this process does not hold: keep that key in the ring", len(rep.Unopenable))
	}
	return nil
}
