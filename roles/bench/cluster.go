package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"plaita/store"
)

// benchTarget is what the bench counts commands on: the one server, or every primary of a
// Redis Cluster. Replicas are left out: a replica counts the writes it replays from its
// primary in its own INFO commandstats, so adding them would count a write twice.
type benchTarget struct {
	cluster   bool
	primaries []string // host:port, sorted
	nodes     map[string]rueidis.Client
	profile   *cpuProfile // --cpuprofile: started by the first window, stopped when it closes
}

// cpuProfile is a CPU profile written to w while the first measured window is open.
type cpuProfile struct {
	w       io.Writer
	started bool
	done    bool
}

func (p *cpuProfile) start() error {
	if p == nil || p.started {
		return nil
	}
	p.started = true
	if err := pprof.StartCPUProfile(p.w); err != nil {
		return fmt.Errorf("--cpuprofile: %w", err)
	}
	return nil
}

func (p *cpuProfile) stop() {
	if p != nil && p.started && !p.done {
		p.done = true
		pprof.StopCPUProfile()
	}
}

// discoverTarget finds the primaries behind c. A cluster is asked for its topology with
// CLUSTER NODES (every Redis version that has a cluster answers it), once, before any
// reading, so the question is not counted.
func discoverTarget(ctx context.Context, c rueidis.Client) (benchTarget, error) {
	nodes := c.Nodes()
	addrs := slices.Sorted(maps.Keys(nodes))
	if c.Mode() != rueidis.ClientModeCluster {
		return benchTarget{primaries: addrs, nodes: nodes}, nil
	}
	var errs []error
	for _, addr := range addrs {
		node := nodes[addr]
		text, err := store.ClusterNodes(ctx, node)
		if err != nil {
			errs = append(errs, fmt.Errorf("CLUSTER NODES on %s: %w", addr, err))
			continue
		}
		primaries, err := clusterPrimaries(text, addr)
		if err != nil {
			return benchTarget{}, fmt.Errorf("CLUSTER NODES on %s: %w", addr, err)
		}
		for _, p := range primaries {
			if nodes[p] == nil {
				return benchTarget{}, fmt.Errorf("primary %s (from CLUSTER NODES on %s) is not among the client's nodes %v", p, addr, addrs)
			}
		}
		return benchTarget{cluster: true, primaries: primaries, nodes: nodes}, nil
	}
	return benchTarget{}, errors.Join(errs...)
}

// clusterPrimaries reads the reply of CLUSTER NODES: the addresses (host:port, sorted) of
// the primaries that serve at least one slot. A node that does not know its own address yet
// (":port@cport") is on the host that was asked.
//
//	<id> <ip:port@cport[,hostname]> <flags> <primary> <ping> <pong> <epoch> <link> <slot> …
func clusterPrimaries(text, asked string) ([]string, error) {
	askedHost, _, _ := net.SplitHostPort(asked)
	var out []string
	for line := range strings.SplitSeq(strings.TrimSpace(text), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			return nil, fmt.Errorf("unexpected line %q", line)
		}
		flags := strings.Split(f[2], ",")
		if !slices.Contains(flags, "master") || slices.Contains(flags, "noaddr") || len(f) == 8 {
			continue // a replica, a node without address, a primary without slots
		}
		addr, _, _ := strings.Cut(f[1], "@")
		addr, _, _ = strings.Cut(addr, ",")
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, fmt.Errorf("address of %q: %w", line, err)
		}
		if host == "" {
			host = askedHost
		}
		out = append(out, net.JoinHostPort(host, port))
	}
	if len(out) == 0 {
		return nil, errors.New("no primary serves a slot")
	}
	slices.Sort(out)
	return out, nil
}

// calls reads every primary's command count (INFO commandstats, calls inside scripts
// included).
func (t benchTarget) calls(ctx context.Context) (map[string]int64, error) {
	out := make(map[string]int64, len(t.primaries))
	for _, addr := range t.primaries {
		n, err := store.CommandCalls(ctx, t.nodes[addr])
		if err != nil {
			return nil, err
		}
		out[addr] = n
	}
	return out, nil
}

// callsBetween is what every primary executed between two readings, without the first
// reading's own INFO, and their sum.
func callsBetween(before, after map[string]int64) (perNode map[string]int64, total int64) {
	perNode = make(map[string]int64, len(after))
	for addr, n := range after {
		d := n - before[addr] - 1
		perNode[addr] = d
		total += d
	}
	return perNode, total
}

// callsByNode is the per-primary split for the table: "host:port n (p%), …", by address.
func callsByNode(perNode map[string]int64, total int64) string {
	parts := make([]string, 0, len(perNode))
	for _, addr := range slices.Sorted(maps.Keys(perNode)) {
		share := 0.0
		if total > 0 {
			share = 100 * float64(perNode[addr]) / float64(total)
		}
		parts = append(parts, fmt.Sprintf("%s %d (%.0f%%)", addr, perNode[addr], share))
	}
	return strings.Join(parts, ", ")
}

// cpu is the CPU time every primary has used (INFO cpu: used_cpu_user + used_cpu_sys). Only a
// server the bench has to itself makes it the workload's cost.
func (t benchTarget) cpu(ctx context.Context) (time.Duration, error) {
	var total time.Duration
	for _, addr := range t.primaries {
		d, err := store.UsedCPU(ctx, t.nodes[addr])
		if err != nil {
			return 0, fmt.Errorf("%s: %w", addr, err)
		}
		total += d
	}
	return total, nil
}

// window is a scenario's timed window: from open to close, the Redis calls of every primary,
// the CPU of this process and of the primaries, and the time.
type window struct {
	t        benchTarget
	began    time.Time
	calls    map[string]int64
	cpu      time.Duration
	redisCPU time.Duration
}

// measured is what a window saw.
type measured struct {
	elapsed  time.Duration
	calls    int64            // over every primary, without the readings' own INFO
	perNode  map[string]int64 // calls by primary
	cpu      time.Duration    // this process
	redisCPU time.Duration    // the primaries
}

// open reads the counters and starts the clock; the readings' own commands are not counted.
func (t benchTarget) open(ctx context.Context) (*window, error) {
	calls, err := t.calls(ctx)
	if err != nil {
		return nil, err
	}
	redisCPU, err := t.cpu(ctx)
	if err != nil {
		return nil, err
	}
	if err := t.profile.start(); err != nil {
		return nil, err
	}
	return &window{t: t, calls: calls, redisCPU: redisCPU, cpu: processCPU(), began: time.Now()}, nil
}

// close stops the clock and reads the counters again.
func (w *window) close(ctx context.Context) (measured, error) {
	m := measured{elapsed: time.Since(w.began), cpu: processCPU() - w.cpu}
	w.t.profile.stop()
	after, err := w.t.calls(ctx)
	if err != nil {
		return measured{}, err
	}
	redisCPU, err := w.t.cpu(ctx)
	if err != nil {
		return measured{}, err
	}
	m.perNode, m.calls = callsBetween(w.calls, after)
	m.redisCPU = redisCPU - w.redisCPU
	return m, nil
}

// perSecond is n over the window's time.
func (m measured) perSecond(n int) float64 { return float64(n) / m.elapsed.Seconds() }

// cpuMicros are the process's and the primaries' CPU per unit of n, in µs.
func (m measured) cpuMicros(n int) (process, redis float64) {
	return float64(m.cpu.Nanoseconds()) / 1e3 / float64(n), float64(m.redisCPU.Nanoseconds()) / 1e3 / float64(n)
}
