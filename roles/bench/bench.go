package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/redis/rueidis"
	"github.com/rs/zerolog"

	"plaita/config"
	"plaita/engine"
	"plaita/internal/service"
	"plaita/queue"
	"plaita/roles"
	"plaita/roles/settings"
	"plaita/store"
	"plaita/store/keys"
)

// Result is one scenario's figures (the --json output).
type Result struct {
	Scenario          string  `json:"scenario"`
	N                 int     `json:"n"`
	Concurrency       int     `json:"concurrency"`
	Steps             int     `json:"steps_per_execution,omitempty"`
	Seconds           float64 `json:"seconds"`
	PerSecond         float64 `json:"executions_per_second,omitempty"`
	StepsPerSecond    float64 `json:"steps_per_second,omitempty"`
	EnqueuedPerSecond float64 `json:"enqueued_per_second,omitempty"`
	P50Millis         float64 `json:"p50_ms,omitempty"`
	P99Millis         float64 `json:"p99_ms,omitempty"`
	RedisCalls        int64   `json:"redis_calls"`
	CallsPerExecution float64 `json:"calls_per_execution,omitempty"`
	CallsPerStep      float64 `json:"calls_per_step,omitempty"`
	CallsPerEnqueue   float64 `json:"calls_per_enqueue,omitempty"`
	// suspend: event → resumed, completed execution.
	RoundTripsPerSecond float64 `json:"round_trips_per_second,omitempty"`
	CallsPerRoundTrip   float64 `json:"calls_per_round_trip,omitempty"`
	WaitsPerEventType   int     `json:"waits_per_event_type,omitempty"`
	// suspend: the filter alone, with Waits executions waiting on EventTypes types: Redis calls
	// and CPU (this process) per event, less what its publish costs (PublishCallsPerEvent), for
	// an event that wakes a wait and for one no wait takes.
	Waits                            int     `json:"waits,omitempty"`
	EventTypes                       int     `json:"event_types,omitempty"`
	PublishCallsPerEvent             float64 `json:"publish_calls_per_event,omitempty"`
	FilterCallsPerEvent              float64 `json:"filter_calls_per_event,omitempty"`
	FilterCPUMicrosPerEvent          float64 `json:"filter_cpu_us_per_event,omitempty"`
	FilterCallsPerUnmatchedEvent     float64 `json:"filter_calls_per_unmatched_event,omitempty"`
	FilterCPUMicrosPerUnmatchedEvent float64 `json:"filter_cpu_us_per_unmatched_event,omitempty"`
	// CallsPerNode is RedisCalls by primary (host:port): on a cluster, how the load spreads.
	CallsPerNode    map[string]int64 `json:"calls_per_node"`
	Redis           string           `json:"redis"`
	RedisPrivate    bool             `json:"redis_private"`
	RedisCluster    bool             `json:"redis_cluster"`
	RedisPrimaries  int              `json:"redis_primaries"`
	EventsPublished bool             `json:"events_published"`
	MaxRSSKiB       int64            `json:"max_rss_kib,omitempty"`
	// CPU per execution over the timed window: this process (the worker; the bench's own
	// polling is negligible) and the Redis primaries (INFO cpu: meaningful on a server the
	// bench has to itself, such as the private one).
	WorkerCPUMicros float64 `json:"worker_cpu_us_per_execution,omitempty"`
	RedisCPUMicros  float64 `json:"redis_cpu_us_per_execution,omitempty"`
}

// Scenarios are what Run measures.
var Scenarios = []string{"e2e", "steps", "enqueue", "suspend"}

// Options are one run's arguments.
type Options struct {
	Scenario    string // one of Scenarios
	N           int    // executions (enqueue: starts; suspend: events that wake a wait)
	Concurrency int    // worker consumers (enqueue: producers)
	// Waits and Types are suspend's: executions waiting while the events are delivered (0: N)
	// and the event types they wait on (0: 1, as real workloads wait on one type).
	Waits, Types int
	Redis        string // a Redis or Redis Cluster node URL; "": a private redis-server
	CPUProfile   string // write a CPU profile of the measured run here ("": none)
	// Force runs against a database that holds keys already (the bench writes executions, a
	// flow and a queue of its own beside them); without it such a database is refused.
	Force bool
	// Flags override the worker's configuration as a role's flags do (--log-level …).
	Flags map[string]string
	// NewLogger builds the run's logger at the configured level.
	NewLogger func(zerolog.Level) zerolog.Logger
}

// ErrUsage: the options themselves are wrong.
var ErrUsage = errors.New("bad usage")

// usageError is an ErrUsage that says what is wrong.
type usageError string

func (e usageError) Error() string        { return string(e) }
func (e usageError) Is(target error) bool { return target == ErrUsage }

// ConfigError is a configuration the worker's preflight rejects; its message lists every
// problem.
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

// Run measures one scenario: on a private redis-server (started and removed here) unless
// o.Redis names one, with a worker (and for suspend a filter) in this process.
func Run(ctx context.Context, o Options) (Result, error) {
	if !slices.Contains(Scenarios, o.Scenario) {
		return Result{}, usageError("name a scenario: e2e, steps, enqueue or suspend")
	}
	n, conc := o.N, o.Concurrency
	if n < 1 || conc < 1 {
		return Result{}, usageError("--n and --concurrency must be positive")
	}
	if o.Waits < 0 || o.Types < 0 || (o.Waits != 0 || o.Types != 0) && o.Scenario != "suspend" {
		return Result{}, usageError("--waits and --types are positive numbers of the suspend scenario")
	}
	url := o.Redis
	private := url == ""
	if private {
		srv, err := startPrivateRedis(ctx)
		if err != nil {
			return Result{}, fmt.Errorf("%v (pass --redis URL to use a running server)", err)
		}
		defer srv.stop()
		url = srv.url
	}
	b, err := newBench(o, url, conc)
	if err != nil {
		return Result{}, err
	}
	defer b.c.Close()
	if !private && !o.Force {
		n, err := store.KeyCount(ctx, b.c)
		if err != nil {
			return Result{}, err
		}
		if n > 0 {
			return Result{}, usageError(fmt.Sprintf("--redis %s: the database holds %d keys: the bench would write its executions and flows "+
				"beside them (they would show in `plaita execution list`); use an empty database, a private server (no --redis), or --force",
				config.MaskURL(url), n))
		}
	}
	if path := o.CPUProfile; path != "" {
		f, err := os.Create(path)
		if err != nil {
			return Result{}, fmt.Errorf("--cpuprofile: %w", err)
		}
		defer f.Close()
		// The profile covers the measured window only (the first one: suspend's round trips),
		// not the enqueue before it nor the latency reads after.
		b.target.profile = &cpuProfile{w: f}
		defer b.target.profile.stop()
	}
	var res Result
	switch o.Scenario {
	case "enqueue":
		res, err = b.enqueueOnly(ctx, n, conc)
	case "e2e":
		res, err = b.run(ctx, "e2e", benchFlow(1), n, 1)
	case "steps":
		res, err = b.run(ctx, "steps", benchFlow(20), n, 20)
	case "suspend":
		res, err = b.suspend(ctx, n, o.Waits, o.Types, conc)
	}
	if err != nil {
		return Result{}, fmt.Errorf("%s: %w", o.Scenario, err)
	}
	res.Concurrency, res.Redis, res.RedisPrivate = conc, url, private
	res.RedisCluster, res.RedisPrimaries = b.target.cluster, len(b.target.primaries)
	res.EventsPublished = config.ExecutionEventsPublish.In(b.cfg)
	res.MaxRSSKiB = maxRSS()
	return res, nil
}

// bench is one run's configuration and connection. Its queue is private to the run, so a
// shared Redis is safe (flows are published under their own id; executions stay, with TTLs).
type bench struct {
	cfg      *config.Config
	log      zerolog.Logger
	c        rueidis.Client
	producer *queue.Producer
	target   benchTarget
}

func newBench(o Options, url string, conc int) (*bench, error) {
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	flags := maps.Clone(o.Flags)
	if flags == nil {
		flags = map[string]string{}
	}
	flags["PLAITA_REDIS_URL"] = url
	flags["PLAITA_QUEUE_NAME"] = "plaita:bench:" + run + ":queue"
	flags["PLAITA_CONSOLE_TASK_QUEUE"] = flags["PLAITA_QUEUE_NAME"]
	flags["PLAITA_WORKER_CONCURRENCY"] = strconv.Itoa(conc)
	flags["PLAITA_INSTANCE_ID"] = "bench-" + run
	if _, ok := flags["PLAITA_LOG_LEVEL"]; !ok {
		flags["PLAITA_LOG_LEVEL"] = "warn" // a line per task would measure the terminal
	}
	cfg, err := config.Load(config.RoleWorker, true, config.WithFlags(flags))
	if err != nil {
		return nil, &ConfigError{Err: err}
	}
	level, _ := zerolog.ParseLevel(config.LogLevel.In(cfg))
	log := zerolog.Nop()
	if o.NewLogger != nil {
		log = o.NewLogger(level).With().Str("role", "bench").Logger()
	}
	c, err := roles.RedisClient(url)
	if err != nil {
		return nil, err
	}
	target, err := discoverTarget(context.Background(), c)
	if err != nil {
		c.Close()
		return nil, err
	}
	producer := queue.NewProducer(queue.Redis(c), config.QueueName.In(cfg), settings.Generations(cfg), config.ExecutionStateMaxBytes.In(cfg), nil)
	return &bench{cfg: cfg, log: log, c: c, producer: producer, target: target}, nil
}

// benchFlow is a linear flow of n nodes: n−1 set nodes and an end.
func benchFlow(n int) []byte {
	id := "bench-" + strconv.Itoa(n)
	nodes := ""
	for i := 1; i < n; i++ {
		nodes += fmt.Sprintf(`{"id":"s%d","type":"set","params":{"vars":{"i":%d}},"next":"s%d"},`, i, i, i+1)
	}
	nodes += fmt.Sprintf(`{"id":"s%d","type":"end","params":{"output":"ok"}}`, n)
	return []byte(`{"id":"` + id + `","version":"1","start":"s1","nodes":[` + nodes + `]}`)
}

// run enqueues n starts of flow, runs them with an in-process worker and measures it.
func (b *bench) run(ctx context.Context, scenario string, def []byte, n, steps int) (Result, error) {
	f, err := engine.Parse(def, engine.NewRegistry(), settings.Engine(b.cfg).Expr)
	if err != nil {
		return Result{}, err
	}
	flows := store.NewFlows(store.RedisFlows(b.c), keys.DefaultRoot)
	if _, err := flows.Publish(ctx, "", f.ID, f.Version, def, time.Now(), func(stored []byte) (bool, error) {
		h, err := engine.FlowHash(stored)
		return h == f.Hash, err
	}); err != nil {
		return Result{}, fmt.Errorf("publish: %w", err)
	}
	set := metrics.NewSet()
	w, err := roles.NewInProcessWorker(b.cfg, b.c, set, b.log)
	if err != nil {
		return Result{}, err
	}
	if err := w.Queue.EnsureGroup(ctx); err != nil {
		return Result{}, err
	}
	ids, enqueued, err := b.enqueue(ctx, f.ID, n, 16)
	if err != nil {
		return Result{}, err
	}
	win, err := b.target.open(ctx)
	if err != nil {
		return Result{}, err
	}
	var services service.Group
	defer services.Stop(context.Background())
	if err := services.Start(ctx, w.Services...); err != nil {
		return Result{}, err
	}
	if err := waitAcked(ctx, w, n); err != nil {
		return Result{}, err
	}
	m, err := win.close(ctx)
	if err != nil {
		return Result{}, err
	}
	services.Stop(context.Background())
	p50, p99, err := b.latencies(ctx, ids, enqueued)
	if err != nil {
		return Result{}, err
	}
	r := Result{Scenario: scenario, N: n, Steps: steps, Seconds: m.elapsed.Seconds(),
		PerSecond: m.perSecond(n), StepsPerSecond: m.perSecond(n * steps),
		P50Millis: p50, P99Millis: p99, RedisCalls: m.calls, CallsPerNode: m.perNode, CallsPerExecution: float64(m.calls) / float64(n),
		CallsPerStep: float64(m.calls) / float64(n*steps)}
	r.WorkerCPUMicros, r.RedisCPUMicros = m.cpuMicros(n)
	return r, nil
}

// enqueue writes n starts of flowID with conc producers; it returns the ids and when each was
// enqueued.
func (b *bench) enqueue(ctx context.Context, flowID string, n, conc int) ([]string, []time.Time, error) {
	ids, at := make([]string, n), make([]time.Time, n)
	var wg sync.WaitGroup
	errs := make([]error, conc)
	for p := range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := p; i < n; i += conc {
				ids[i] = engine.NewExecutionID()
				env := queue.Envelope{Kind: queue.KindStart, FlowID: flowID, FlowVersion: "1", ExecutionID: ids[i]}
				at[i] = time.Now()
				if _, err := b.producer.Enqueue(ctx, env); err != nil {
					errs[p] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	return ids, at, errors.Join(errs...)
}

// enqueueOnly measures starts/s and calls per enqueue.
func (b *bench) enqueueOnly(ctx context.Context, n, conc int) (Result, error) {
	win, err := b.target.open(ctx)
	if err != nil {
		return Result{}, err
	}
	if _, _, err := b.enqueue(ctx, "bench-enqueue", n, conc); err != nil {
		return Result{}, err
	}
	m, err := win.close(ctx)
	if err != nil {
		return Result{}, err
	}
	return Result{Scenario: "enqueue", N: n, Seconds: m.elapsed.Seconds(), EnqueuedPerSecond: m.perSecond(n),
		RedisCalls: m.calls, CallsPerNode: m.perNode, CallsPerEnqueue: float64(m.calls) / float64(n)}, nil
}

// latencies are the p50 and p99 of from[i] (an enqueue, a publish) → the terminal state of
// ids[i] (its end_time), in ms.
func (b *bench) latencies(ctx context.Context, ids []string, from []time.Time) (p50, p99 float64, err error) {
	ts, err := store.NewRedis(b.c, settings.Store(b.cfg), keys.DefaultRoot).Tenant("")
	if err != nil {
		return 0, 0, err
	}
	ms := make([]float64, 0, len(ids))
	for i, id := range ids {
		st, err := ts.Load(ctx, id)
		if err != nil {
			return 0, 0, err
		}
		if st.EndTime == nil {
			return 0, 0, fmt.Errorf("execution %s is %s, not terminal", id, st.Status)
		}
		ms = append(ms, float64(st.EndTime.Sub(from[i]).Microseconds())/1000)
	}
	slices.Sort(ms)
	return ms[len(ms)/2], ms[min(len(ms)-1, len(ms)*99/100)], nil
}

// WriteText prints a result as the table `plaita bench` shows.
func WriteText(w io.Writer, r Result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "scenario\t%s\n", r.Scenario)
	fmt.Fprintf(tw, "executions\t%d (concurrency %d)\n", r.N, r.Concurrency)
	fmt.Fprintf(tw, "seconds\t%.3f\n", r.Seconds)
	switch r.Scenario {
	case "enqueue":
		fmt.Fprintf(tw, "starts/s\t%.0f\n", r.EnqueuedPerSecond)
		fmt.Fprintf(tw, "redis calls per enqueue\t%.2f\n", r.CallsPerEnqueue)
	case "suspend":
		fmt.Fprintf(tw, "waits\t%d on %d event type(s), %d per type (distinct correlation values)\n", r.Waits, r.EventTypes, r.WaitsPerEventType)
		fmt.Fprintf(tw, "round trips/s\t%.0f (event → resumed, completed execution)\n", r.RoundTripsPerSecond)
		fmt.Fprintf(tw, "latency p50 / p99\t%.1f ms / %.1f ms (publish → completed)\n", r.P50Millis, r.P99Millis)
		fmt.Fprintf(tw, "redis calls per round trip\t%.2f (publish, filter, resume)\n", r.CallsPerRoundTrip)
		fmt.Fprintf(tw, "cpu per round trip\tfilter + worker %.1f µs, redis %.1f µs\n", r.WorkerCPUMicros, r.RedisCPUMicros)
		fmt.Fprintf(tw, "filter redis calls per event\t%.2f waking a wait, %.2f waking none (besides the publish's %.2f)\n",
			r.FilterCallsPerEvent, r.FilterCallsPerUnmatchedEvent, r.PublishCallsPerEvent)
		fmt.Fprintf(tw, "filter cpu per event\t%.1f µs waking a wait, %.1f µs waking none\n", r.FilterCPUMicrosPerEvent, r.FilterCPUMicrosPerUnmatchedEvent)
	default:
		fmt.Fprintf(tw, "executions/s\t%.0f\n", r.PerSecond)
		fmt.Fprintf(tw, "steps/s\t%.0f\n", r.StepsPerSecond)
		fmt.Fprintf(tw, "latency p50 / p99\t%.1f ms / %.1f ms (enqueue → terminal)\n", r.P50Millis, r.P99Millis)
		fmt.Fprintf(tw, "redis calls per execution\t%.2f\n", r.CallsPerExecution)
		fmt.Fprintf(tw, "redis calls per step\t%.2f\n", r.CallsPerStep)
		fmt.Fprintf(tw, "cpu per execution\tworker %.1f µs, redis %.1f µs\n", r.WorkerCPUMicros, r.RedisCPUMicros)
	}
	target := "one server"
	if r.RedisCluster {
		target = fmt.Sprintf("Redis Cluster, %d primaries", r.RedisPrimaries)
	}
	fmt.Fprintf(tw, "redis\t%s (private %v, %s), live events published %v\n", r.Redis, r.RedisPrivate, target, r.EventsPublished)
	if r.RedisCluster {
		fmt.Fprintf(tw, "redis calls per node\t%s\n", callsByNode(r.CallsPerNode, r.RedisCalls))
	}
	fmt.Fprintf(tw, "max RSS\t%d MiB\n", r.MaxRSSKiB/1024)
	tw.Flush()
}

// privateRedis is a redis-server of this run.
type privateRedis struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
	dir  string
	url  string
}

// startPrivateRedis starts a redis-server on a free port. A port is free when it is picked,
// not when the server binds it: another process may take it between the two, and the server
// then exits at once — or, worse, the readiness check reaches the other process's server. A
// server that exited is tried again on another port.
func startPrivateRedis(ctx context.Context) (*privateRedis, error) {
	var err error
	for range 3 {
		var r *privateRedis
		if r, err = launchPrivateRedis(ctx); err == nil {
			return r, nil
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, err
}

func launchPrivateRedis(ctx context.Context) (*privateRedis, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, errors.New("redis-server is not installed")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	dir, err := os.MkdirTemp("", "plaita-bench-redis-")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir)
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start redis-server: %w", err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	r := &privateRedis{cmd: cmd, done: done, dir: dir, url: fmt.Sprintf("redis://127.0.0.1:%d/0", port)}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		select {
		case <-done:
			os.RemoveAll(dir)
			return nil, fmt.Errorf("the private redis-server on port %d exited before it answered", port)
		default:
		}
		if conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), 200*time.Millisecond); err == nil {
			conn.Close()
			// An answer from a server that is not ours (it lost the port): ours has exited.
			select {
			case <-done:
				os.RemoveAll(dir)
				return nil, fmt.Errorf("the private redis-server on port %d exited: the port was taken", port)
			case <-time.After(50 * time.Millisecond):
			}
			return r, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			r.stop()
			return nil, errors.New("the private redis-server did not answer")
		}
	}
}

func (r *privateRedis) stop() {
	r.cmd.Process.Kill()
	<-r.done
	os.RemoveAll(r.dir)
}
