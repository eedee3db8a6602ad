// Command peers compares plaita with asynq on one Redis server, in interleaved rounds.
//
// The asynq side copies asynq's own BenchmarkEndToEndSimple: N tasks are enqueued first, then
// a server with a no-op handler is started and timed until all N are handled. The plaita side
// runs `plaita bench e2e` against the same server and reads its JSON. Both runs of a round see
// the same Redis, so their throughput ratio says more than either number alone.
//
// It lives in its own module so that the plaita binary never depends on asynq.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"time"
)

type options struct {
	redisURL    string // empty: start a private redis-server
	asynqDB     int
	n           int
	concurrency int
	rounds      int
	plaitaPath  string // empty: build the binary from the repository
	timeout     time.Duration
	json        bool
	noExtras    bool
}

func parseFlags(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("peers", flag.ContinueOnError)
	fs.StringVar(&o.redisURL, "redis", "", "use this Redis (its db for plaita, which must be empty) instead of a private redis-server")
	fs.IntVar(&o.asynqDB, "asynq-db", 1, "Redis db number for asynq (must differ from plaita's and, with --redis, be empty)")
	fs.IntVar(&o.n, "n", 100000, "tasks (asynq) and executions (plaita) per run")
	fs.IntVar(&o.concurrency, "concurrency", 10, "asynq server Concurrency and plaita --concurrency")
	fs.IntVar(&o.rounds, "rounds", 3, "interleaved rounds (asynq, then plaita, in each)")
	fs.StringVar(&o.plaitaPath, "plaita", "", "plaita binary (default: go build from the repository root)")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Minute, "give up on a single run after this long")
	fs.BoolVar(&o.json, "json", false, "print the summary as JSON instead of tables")
	fs.BoolVar(&o.noExtras, "no-extras", false, "skip plaita's figures after the rounds (calls per additional step and per woken wait, a worker process's peak memory)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if o.n < 1 || o.concurrency < 1 || o.rounds < 1 {
		return o, fmt.Errorf("--n, --concurrency and --rounds must be at least 1")
	}
	return o, nil
}

func main() {
	o, err := parseFlags(os.Args[1:])
	if err == flag.ErrHelp {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "peers:", err)
		os.Exit(2)
	}
	// Ctrl-C cancels the runs; the deferred clean-up still stops the private redis-server.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "peers:", err)
		stop()
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	tmp, err := os.MkdirTemp("", "plaita-peers-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	target, err := openTarget(ctx, o, tmp)
	if err != nil {
		return err
	}
	defer target.close()

	plaita := o.plaitaPath
	if plaita == "" {
		if plaita, err = buildPlaita(ctx, tmp); err != nil {
			return err
		}
	}
	if err := probePlaita(ctx, plaita); err != nil {
		return err
	}

	s := summary{N: o.n, Concurrency: o.concurrency, RedisVersion: target.version, PrivateRedis: target.private}
	for i := 1; i <= o.rounds; i++ {
		logf("round %d/%d: asynq", i, o.rounds)
		a, err := runAsynq(ctx, target, o)
		if err != nil {
			return fmt.Errorf("round %d, asynq: %w", i, err)
		}
		logf("round %d/%d: plaita", i, o.rounds)
		p, err := runPlaita(ctx, target, plaita, o)
		if err != nil {
			return fmt.Errorf("round %d, plaita: %w", i, err)
		}
		r := newRound(i, a, p)
		s.Rounds = append(s.Rounds, r)
		if !o.json {
			printRound(os.Stdout, r)
		}
	}
	s.finish()
	if !o.noExtras {
		x, err := measureExtras(ctx, target, plaita, tmp, o, s.MedianPlaitaCallsPerExec)
		if err != nil {
			return err
		}
		s.Extras = &x
	}
	if o.json {
		return printJSON(os.Stdout, s)
	}
	printSummary(os.Stdout, s)
	return nil
}

// logf reports progress on stderr, so that stdout holds only the tables or the JSON.
func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "peers: "+format+"\n", args...)
}
