package cli

import (
	"cmp"
	"context"
	"io"

	"github.com/redis/rueidis"
	"github.com/rs/zerolog"
	"github.com/urfave/cli/v3"

	"plaita/config"
	"plaita/control"
	"plaita/engine"
	"plaita/engine/state"
	"plaita/model"
	"plaita/roles"
)

// conn is a command over the shared Redis: its configuration, its --tenant and, once dialled,
// the control plane every operation goes through (package control: the console uses the same).
type conn struct {
	cfg     *config.Config
	log     zerolog.Logger
	tenant  string
	program string // how the commands printed invoke plaita
	c       rueidis.Client
	plane   *control.Plane
	// stopTracing flushes the command's spans (a no-op while tracing is off).
	stopTracing func()
}

// connect runs the preflight of role and connects to PLAITA_REDIS_URL for the --tenant.
func connect(cmd *cli.Command, name string, role config.Role, stderr io.Writer) (*conn, error) {
	k, err := prepare(cmd, name, role, stderr)
	if err != nil {
		return nil, err
	}
	return k, k.dial(name)
}

// prepare is connect's first half: the preflight and the --tenant, no connection yet. A command
// that reads documents reads them in between, bounded by the configuration, so that bad input
// is refused without touching Redis.
func prepare(cmd *cli.Command, name string, role config.Role, stderr io.Writer) (*conn, error) {
	cfg, log, err := preflightAs(cmd, role, "cli", zerolog.DebugLevel, stderr)
	if err != nil {
		return nil, err
	}
	tenant := cmd.String("tenant")
	if err := control.ValidTenant(tenant); err != nil {
		return nil, cliUsage(name, "--tenant %q: %v", tenant, err)
	}
	return &conn{cfg: cfg, log: log, tenant: cmp.Or(tenant, control.DefaultTenant), program: optionsOf(cmd).programName()}, nil
}

// dial is connect's second half: the client and the control plane over it.
func (k *conn) dial(name string) error {
	c, err := roles.RedisClient(config.RedisURL.In(k.cfg))
	if err != nil {
		return cliFail(name, "%v", err)
	}
	plane, err := newPlane(k.cfg, c, k.log, k.program)
	if err != nil {
		c.Close()
		return cliFail(name, "%v", err)
	}
	stop, err := roles.StartCLITracing(context.Background(), k.cfg, k.log)
	if err != nil {
		c.Close()
		return cliFail(name, "%v", err)
	}
	k.c, k.plane, k.stopTracing = c, plane, stop
	return nil
}

func (k *conn) close() {
	if k.stopTracing != nil {
		k.stopTracing()
	}
	if k.c != nil {
		k.c.Close()
	}
}

// newPlane builds the control plane the way the console does (roles.NewPlane), enqueuing on
// PLAITA_QUEUE_NAME, with hints that name this program.
func newPlane(cfg *config.Config, c rueidis.Client, log zerolog.Logger, program string) (*control.Plane, error) {
	return roles.NewPlane(cfg, roles.RedisBackend(c), log, roles.PlaneOptions{Program: program, NodeLog: nodeSetupLog(log)})
}

// stateBound is the bound of a document that becomes part of an execution state (a start's
// input, a resume's data).
func stateBound(cfg *config.Config) docBound {
	n := config.ExecutionStateMaxBytes.In(cfg)
	if n < 1 {
		n = state.DefaultMaxStateBytes
	}
	return docBound{Max: n, What: "PLAITA_EXECUTION_STATE_MAX_BYTES"}
}

// flowBound is the bound of a flow definition file.
var flowBound = docBound{Max: engine.MaxFlowBytes, What: "the flow definition bound"}

// eventBound is the bound of an event's data.
var eventBound = docBound{Max: control.MaxEventDataBytes, What: "the event data bound"}

// refused is an error of a control operation as the command's exit: an Invalid refusal is bad
// usage (2), any other refusal or failure is a failure (1). A refusal's unblock hint follows its
// message.
func refused(name string, err error) error {
	r := control.AsRefusal(err)
	if r == nil {
		return cliFail(name, "%v", err)
	}
	msg := err.Error() // the refusal's message, with what the caller wrapped it in
	if r.Unblock != "" {
		msg += "; " + r.Unblock
	}
	if model.ClassOf(r) == model.Invalid {
		return cliUsage(name, "%s", msg)
	}
	return cliFail(name, "%s", msg)
}
