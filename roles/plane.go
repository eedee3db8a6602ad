package roles

import (
	"fmt"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/redis/rueidis"
	"github.com/rs/zerolog"

	"plaita/config"
	"plaita/control"
	"plaita/engine"
	"plaita/engine/nodes"
	"plaita/queue"
	"plaita/roles/settings"
	"plaita/store"
	"plaita/store/keys"
)

// PlaneOptions are what the front ends of the control plane build it with differently.
type PlaneOptions struct {
	// Stream is the task stream starts and resumes are enqueued on: PLAITA_QUEUE_NAME for the
	// CLI, PLAITA_CONSOLE_TASK_QUEUE for the console ("": PLAITA_QUEUE_NAME).
	Stream string
	// Program is how the command lines in hints invoke plaita ("": "plaita").
	Program string
	// NodeLog is the logger the node types are set up with (the CLI quietens it).
	NodeLog zerolog.Logger
	// Metrics is the set the queue registers its series on (nil: a set of its own).
	Metrics *metrics.Set
	// NodeConfig is the configuration the node types are set up from (nil: cfg): the console
	// passes the worker's view of its environment, so that it parses flows as a worker does.
	NodeConfig *config.Config
	// Dispatch turns capacity dispatch of starts on (the console): each start's decision goes
	// to the dispatch ledger, and the target is set unless PLAITA_CONSOLE_DISPATCH_SHADOW.
	Dispatch bool
}

// NewPlane builds the control plane from the configuration — the stores, the producer with
// this process's generations and the input bound, the node types of a worker — over one
// backend: the one constructor of the CLI's operator commands and the console (package control:
// both refuse the same things because they are the same operations). Capacity dispatch needs
// Redis (its ledger): it is off on another backend.
func NewPlane(cfg *config.Config, b Backend, log zerolog.Logger, o PlaneOptions) (*control.Plane, error) {
	delay, err := queue.NewDelay(b.Delay, settings.DelayQueue(cfg))
	if err != nil {
		return nil, err
	}
	set := o.Metrics
	if set == nil {
		set = metrics.NewSet()
	}
	q, err := queue.New(b.Queue, settings.Queue(cfg), set, log)
	if err != nil {
		return nil, err
	}
	nodeCfg := o.NodeConfig
	if nodeCfg == nil {
		nodeCfg = cfg
	}
	stream := o.Stream
	if stream == "" {
		stream = config.QueueName.In(cfg)
	}
	var dispatch control.DispatchSettings
	if o.Dispatch && b.Client != nil {
		if dispatch, err = dispatchSettings(cfg, b.Client); err != nil {
			return nil, err
		}
	}
	return control.New(control.Deps{
		Store:         b.Storage(settings.Store(cfg)),
		Flows:         store.NewFlows(b.Flows, keys.DefaultRoot).Reserve(config.QueueName.In(cfg), config.DLQKey.In(cfg)),
		Events:        b.events(settings.Events(cfg)),
		Schedules:     store.NewSchedules(b.Schedules, keys.DefaultRoot),
		Registry:      store.NewRegistry(b.Ephemeral, keys.DefaultRoot),
		Control:       store.NewControl(b.Ephemeral, keys.DefaultRoot),
		Delay:         delay,
		Producer:      queue.NewProducer(b.Queue, stream, settings.Generations(cfg), config.ExecutionStateMaxBytes.In(cfg), nil),
		Queue:         q,
		NodeTypes:     nodeTypesOnce(nodeCfg, o.NodeLog),
		Expr:          settings.Engine(nodeCfg).Expr,
		StateMaxBytes: config.ExecutionStateMaxBytes.In(cfg),
		TimelineMax:   config.ExecutionTimelineMax.In(cfg),
		Quota:         control.QuotaSettings{MaxRunning: settings.WorkerQuota(cfg).MaxRunning},
		Dispatch:      dispatch,
		Built:         func(role string) bool { return Built(config.Role(role)) },
		Program:       o.Program,
		Live:          store.NewLiveEvents(b.Ephemeral, keys.DefaultRoot),
	}), nil
}

// dispatchSettings are capacity dispatch's knobs: the ledger at PLAITA_DISPATCH_LEDGER_KEY,
// PLAITA_CAPACITY_STALE_SECONDS, PLAITA_CONSOLE_DISPATCH_SHADOW and PLAITA_DISPATCHER_ID.
func dispatchSettings(cfg *config.Config, c rueidis.Client) (control.DispatchSettings, error) {
	ledger, err := store.NewDispatchLedger(c, config.DispatchLedgerKey.In(cfg), store.DefaultDispatchLedgerLen)
	if err != nil {
		return control.DispatchSettings{}, fmt.Errorf("PLAITA_DISPATCH_LEDGER_KEY: %w", err)
	}
	return control.DispatchSettings{Ledger: ledger, Stale: time.Duration(config.CapacityStaleSeconds.In(cfg) * float64(time.Second)),
		Shadow: config.ConsoleDispatchShadow.In(cfg), Actor: config.DispatcherID.In(cfg)}, nil
}

// nodeTypesOnce sets the node types up at the first parse and keeps them: a long-running
// front end (the console) parses on every start, and setting up the code node probes its
// sandbox backend. A failure is not kept: the next parse tries again.
func nodeTypesOnce(cfg *config.Config, log zerolog.Logger) func() (*engine.Registry, error) {
	var mu sync.Mutex
	var reg *engine.Registry
	return func() (*engine.Registry, error) {
		mu.Lock()
		defer mu.Unlock()
		if reg != nil {
			return reg, nil
		}
		r := engine.NewRegistry()
		if err := nodes.Register(r, settings.Nodes(cfg), log); err != nil {
			return nil, err
		}
		reg = r
		return reg, nil
	}
}

// Built reports whether this build has the role.
func Built(role config.Role) bool {
	for _, s := range Table() {
		if s.Role == role {
			return s.Built
		}
	}
	return false
}
