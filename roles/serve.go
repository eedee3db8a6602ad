package roles

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/rs/zerolog"

	"plaita/config"
	"plaita/internal/callctx"
	"plaita/internal/health"
	"plaita/internal/presence"
	"plaita/internal/service"
	"plaita/store"
	"plaita/store/keys"
)

// roleProcess is the shape every Redis service role shares: a metrics server with its
// readiness, a registry presence, and the role's own services.
type roleProcess struct {
	name     string // the role: in errors and in the `<role>.status_write_failed` event
	ready    *health.Readiness
	server   service.Service    // the metrics server (health.Server)
	registry *presence.Registry // nil: the role has no registry presence (the console without Redis)
	// control is the control channels' store: with a registry presence, the instance listens on
	// its channel (`plaita ctl`, the console's drain route); nil: no channel.
	control  *store.Control
	services []service.Named // the role's own, in start order
	// selfReady: the role's services mark it ready themselves (the filter, once subscribed);
	// otherwise it is ready once every service has started.
	selfReady bool
	// drain, when set, runs first at shutdown, with the status draining (the filter's listener
	// finishes the notifications it queued), bounded by drainFor; the status then goes to
	// stopping. Without it the status goes to stopping at once.
	drain    func(context.Context)
	drainFor time.Duration
	stopFor  time.Duration // bounds stopping the services
	// addr is the address the role serves for its callers (the console's API); nil: its
	// metrics server's (roles.Hooks).
	addr func() string
	// started logs the role's start line once it is ready; title is how the stop line calls the
	// role ("schedule role"; "": its name).
	started func()
	title   string
}

// errStopRequested is why a role drains when a stop came on its control channel.
var errStopRequested = errors.New("stop requested on the control channel")

// serve runs the role until ctx ends (SIGTERM/SIGINT) or a stop comes on its control channel
// (`plaita ctl stop`: the same drain). Start order (service.Group): metrics server → registry
// (status running) → control channel → the role's services, then ready; started logs the
// role's start line. A service that fails to start stops the ones before it, in reverse.
// Shutdown: not ready at once and the status draining (with a drain) or stopping → the drain
// → status stopping → the services stop in reverse, the control channel (it answers during the
// drain), the registry deregistered, the metrics server last; then the stop line.
func (r roleProcess) serve(ctx context.Context, log zerolog.Logger) error {
	if err := r.run(ctx, log); err != nil {
		return err
	}
	log.Info().Str("event", r.name+".stopped").Msg(cmp.Or(r.title, r.name) + " stopped")
	return nil
}

func (r roleProcess) run(ctx context.Context, log zerolog.Logger) error {
	ctx, requestStop := context.WithCancelCause(ctx)
	defer requestStop(nil)
	startCtx, cancelStart := callctx.Within(ctx, callctx.Start)
	defer cancelStart()
	all := []service.Named{{Name: "metrics server", Service: r.server}}
	if r.registry != nil {
		all = append(all, service.Named{Name: "registry", Service: r.registry})
		if r.control != nil {
			ctl := presence.NewControl(r.control, r.registry, func() { requestStop(errStopRequested) }, log)
			all = append(all, service.Named{Name: "control channel", Service: ctl})
		}
	}
	all = append(all, r.services...)
	r.hearReady(ctx)
	var services service.Group
	if err := services.Start(startCtx, all...); err != nil {
		if ctx.Err() != nil {
			// SIGTERM (or a stop) came while the role was starting: the services that had
			// started are stopped again (Group.Start), and that is the stop asked for, not a
			// failure of the role.
			log.Info().Str("event", r.name+".stopped_while_starting").Str("service_error", err.Error()).
				Msg("stop requested before the role was ready: stopped")
			return nil
		}
		return fmt.Errorf("%s: %w", r.name, err)
	}
	if !r.selfReady {
		r.ready.SetReady()
	}
	if r.started != nil {
		r.started()
	}

	<-ctx.Done()
	if errors.Is(context.Cause(ctx), errStopRequested) {
		log.Info().Str("event", r.name+".stopping").Str("cause", "control channel").Msg("stop requested: draining as on SIGTERM")
	}
	bg := context.Background()
	status := func(s string) {
		if r.registry == nil {
			return
		}
		if err := r.registry.SetStatus(bg, s); err != nil {
			log.Warn().Err(err).Str("event", r.name+".status_write_failed").Msgf("could not mark the instance %s", s)
		}
	}
	if r.drain != nil {
		r.ready.SetNotReady("draining")
		status(presence.StatusDraining)
		drainCtx, cancel := context.WithTimeout(bg, r.drainFor)
		r.drain(drainCtx)
		cancel()
	} else {
		r.ready.SetNotReady("stopping")
	}
	status(presence.StatusStopping)
	stopCtx, cancelStop := context.WithTimeout(bg, r.stopFor)
	defer cancelStop()
	services.Stop(stopCtx)
	return nil
}

// onRedis is what a service role (worker, filter, schedule, delay) builds its parts from: its
// backend (Redis for the cluster; the console's database in local mode), the process's metrics
// set, and the readiness its metrics server (/metrics, /healthz, /readyz on
// PLAITA_METRICS_HOST:PLAITA_METRICS_PORT) reports.
type onRedis struct {
	cfg    *config.Config
	log    zerolog.Logger
	b      Backend
	set    *metrics.Set
	ready  *health.Readiness
	server *health.Server
}

func newOnRedis(cfg *config.Config, b Backend, set *metrics.Set, log zerolog.Logger) onRedis {
	ready := health.NewReadiness()
	return onRedis{cfg: cfg, log: log, b: b, set: set, ready: ready,
		server: health.New(config.MetricsHost.In(cfg), config.MetricsPort.In(cfg), set, ready, log)}
}

// presence is the role's record in the registry, as info describes the instance.
func (o onRedis) presence(info presence.InstanceInfo) *presence.Registry {
	return presence.New(store.NewRegistry(o.b.Ephemeral, keys.DefaultRoot), info, o.log, o.set)
}

// runOnRedis is the run of every service role on PLAITA_REDIS_URL: connect (the client is
// closed when the role ends), build the role's parts (build returns its registry presence,
// services, drain and start line), then serve them with one lifecycle (roleProcess.serve),
// listening on the instance's control channel. Errors are prefixed with the role's name.
func runOnRedis(ctx context.Context, cfg *config.Config, log zerolog.Logger, build func(ctx context.Context, o onRedis) (roleProcess, error)) error {
	name := string(cfg.Role())
	c, err := RedisClient(config.RedisURL.In(cfg))
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	defer c.Close()
	o := newOnRedis(cfg, RedisBackend(c), metrics.NewSet(), log)
	r, err := build(ctx, o)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	r.name, r.ready, r.server, r.control = name, o.ready, o.server, store.NewControl(store.OnRedis(c), keys.DefaultRoot)
	return r.serve(ctx, log)
}

// hearReady tells the hooks of ctx (a role run in process by a test) when the role is ready.
func (r roleProcess) hearReady(ctx context.Context) {
	h := hooksOf(ctx)
	if h.Ready == nil {
		return
	}
	go func() {
		select {
		case <-r.ready.BecameReady():
		case <-ctx.Done():
			return
		}
		addr := ""
		switch s := r.server.(type) {
		case *health.Server:
			addr = s.Addr()
		case alreadyRunning:
			if hs, ok := s.Service.(*health.Server); ok {
				addr = hs.Addr()
			}
		}
		if r.addr != nil {
			addr = r.addr()
		}
		h.Ready(ReadyRole{Role: r.name, Addr: addr})
	}()
}

// roleInstance is what a role's process says about itself in the registry (`plaita execution
// show` counts these records to say whether anything will wake a suspended execution): queue
// is the task stream it reads or writes.
func roleInstance(cfg *config.Config, role config.Role, queue string, started time.Time) presence.InstanceInfo {
	host, _ := os.Hostname()
	g := cfg.Generations()
	return presence.InstanceInfo{
		InstanceID: config.InstanceID.In(cfg), Role: string(role), Host: host, PID: os.Getpid(), Queue: queue,
		Generations: presence.Generations{Family: g.Family, Config: g.Config, Budget: g.Budget},
		StartedAt:   started.UTC(), MetricsAddr: metricsAddr(cfg, host),
	}
}

// metricsAddr is where the role's metrics server listens, as another host reaches it: the
// host name stands in for a wildcard address; "" when PLAITA_METRICS_PORT is off.
func metricsAddr(cfg *config.Config, hostname string) string {
	port := config.MetricsPort.In(cfg)
	if port <= 0 {
		return ""
	}
	h := config.MetricsHost.In(cfg)
	if ip := net.ParseIP(h); h == "" || ip != nil && ip.IsUnspecified() {
		h = hostname
	}
	return net.JoinHostPort(h, strconv.Itoa(port))
}
