//go:build e2e

package e2e

import (
	"io"
	"strings"
	"testing"

	"github.com/urfave/cli/v3"

	cliapp "plaita/cli"
)

// The preflight, the logging flags, doctor and the roles table, through the binary. None of
// these commands may reach Redis: a trap stands in for it and counts the connections.

func TestWorkerRejectsBadConfigurationBeforeConnecting(t *testing.T) {
	t.Parallel()
	tr := newTrap(t)
	r := run(t, map[string]string{
		"PLAITA_REDIS_URL":   tr.url(),
		"PLAITA_QUEUE_NAME":  "",
		"PLAITA_DLQ_MAX_LEN": "0",
		"PLAITA_LOG_LEVEL":   "verbose",
	}, "worker")
	if r.code != 2 {
		t.Fatalf("exit status %d, want 2\nstderr:\n%s", r.code, r.stderr)
	}
	// One message holding all three problems, each line naming its variable.
	i := strings.Index(r.stderr, "plaita: configuration rejected (3 problems):")
	if i < 0 {
		t.Fatalf("no aggregated message in stderr:\n%s", r.stderr)
	}
	block := strings.SplitN(r.stderr[i:], "\n", 5)
	if len(block) < 4 {
		t.Fatalf("message too short:\n%s", r.stderr[i:])
	}
	for j, name := range []string{"PLAITA_QUEUE_NAME: ", "PLAITA_DLQ_MAX_LEN: ", "PLAITA_LOG_LEVEL: "} {
		if !strings.HasPrefix(block[j+1], "  "+name) {
			t.Errorf("line %d of the message is %q, want it to start with %q", j+1, block[j+1], name)
		}
	}
	if n := tr.connections(); n != 0 {
		t.Fatalf("the worker opened %d connection(s) to Redis before its preflight passed", n)
	}
}

// TestDevPreflightStopsBeforeRedis: dev runs the strict preflight of every role it runs before
// it looks for a Redis: a rejected flag or value stops it (exit 2) without a connection.
func TestDevPreflightStopsBeforeRedis(t *testing.T) {
	t.Parallel()
	tr := newTrap(t)
	r := run(t, map[string]string{"PLAITA_REDIS_URL": tr.url()}, "dev", "--log-level", "0")
	if r.code != 2 || !strings.Contains(r.stderr, "--log-level") {
		t.Fatalf("--log-level 0 must be rejected by name: exit %d, stderr:\n%s", r.code, r.stderr)
	}
	r = run(t, map[string]string{"PLAITA_REDIS_URL": tr.url(), "PLAITA_WORKER_CONCURRENCY": "0", "PLAITA_QUEUE_NAME": ""}, "dev")
	if r.code != 2 || !strings.Contains(r.stderr, "PLAITA_QUEUE_NAME") || !strings.Contains(r.stderr, "PLAITA_WORKER_CONCURRENCY") {
		t.Fatalf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
	if n := tr.connections(); n != 0 {
		t.Fatalf("%d connection(s) made", n)
	}
}

// TestEveryRoleRunsThePreflight: every command of the binary — each role, each operator tool,
// each subcommand, found by walking the command tree — runs the strict preflight first: with a
// rejected configuration it exits 2 with the aggregated message, and never reaches Redis. A
// command added to the tree without an entry here fails the test.
func TestEveryRoleRunsThePreflight(t *testing.T) {
	t.Parallel()
	tr := newTrap(t)
	flow := repoFlow(t, "hello.json")
	args := map[string][]string{
		"worker": nil, "console": nil, "filter": nil, "schedule": nil, "delay": nil, "dev": nil, "doctor": nil,
		"status": nil, "reap": nil, "reindex": nil, "dlq list": nil, "dlq show": {"1-0"}, "dlq replay": {"1-0"},
		"drain-list": {"--list-key", "plaita:old:queue"}, "ctl status": {"w-1"}, "ctl stop": {"--graceful", "w-1"},
		"probe": {"http://127.0.0.1:1/readyz"}, "migrate up": nil, "migrate down": {"--to", "0"}, "migrate version": nil, "migrate copy": {"--to", "sqlite:///copy.db"},
		"run": {flow}, "start": {flow}, "bench": {"e2e", "--n", "1"},
		"flow publish": {flow}, "flow list": nil, "flow show": {"hello"}, "flow graph": {flow},
		"execution list": nil, "execution show": {"ex_1"}, "execution cancel": {"ex_1"},
		"execution resume": {"ex_1", "--type", "continue"}, "execution delete": {"ex_1"},
		"approval list": nil, "approval approve": {"ex_1"}, "approval reject": {"ex_1"},
		"event publish": {"payment", "--data", "{}"}, "event list": nil,
		"schedule add": {"nightly", "--cron", "0 2 * * *", "--flow", "hello"}, "schedule list": nil, "schedule show": {"nightly"},
		"schedule enable": {"nightly"}, "schedule disable": {"nightly"}, "schedule run": {"nightly"}, "schedule fires": {"nightly"}, "schedule delete": {"nightly"},
		"credentials create": {"api"}, "credentials set": {"api"}, "credentials list": nil, "credentials show": {"api"},
		"credentials delete": {"api"}, "credentials rotate-key": nil,
	}
	noConfig := map[string]bool{"version": true, "roles": true, "credentials new-key": true} // they read no configuration
	// PLAITA_LOG_LEVEL is read by every role; bench sets its own level, and reads PLAITA_DLQ_MAX_LEN.
	env := map[string]string{"PLAITA_LOG_LEVEL": "loud", "PLAITA_DLQ_MAX_LEN": "0",
		"PLAITA_REDIS_URL": tr.url(), "PLAITA_CONSOLE_REDIS_URL": tr.url()}
	seen := map[string]bool{}
	var walk func(prefix string, cmds []*cli.Command)
	walk = func(prefix string, cmds []*cli.Command) {
		for _, c := range cmds {
			if c.Name == "help" {
				continue
			}
			name := strings.TrimSpace(prefix + " " + c.Name)
			if len(c.Commands) > 0 {
				walk(name, c.Commands)
			}
			a, listed := args[name]
			switch {
			case noConfig[name]:
				continue
			case !listed && len(c.Commands) > 0:
				continue // a group: its subcommands are the commands
			case !listed:
				t.Errorf("%q is not in this test's table: give it the arguments it needs", name)
				continue
			}
			seen[name] = true
			r := run(t, env, append(strings.Fields(name), a...)...)
			// doctor prints its report, the rejection included, on stdout.
			if r.code != 2 || !strings.Contains(r.stderr+r.stdout, "configuration rejected") {
				t.Errorf("%s with a rejected configuration: exit %d, want 2 from the preflight\n%s", name, r.code, r.stderr)
			}
		}
	}
	walk("", cliapp.App(io.Discard, io.Discard).Commands)
	for name := range args {
		if !seen[name] {
			t.Errorf("%q is in the table but not in the command tree", name)
		}
	}
	if n := tr.connections(); n != 0 {
		t.Errorf("%d connection(s) reached Redis before a preflight passed", n)
	}
}
