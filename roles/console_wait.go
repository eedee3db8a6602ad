package roles

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
	"github.com/rs/zerolog"

	"plaita/config"
	"plaita/internal/health"
	"plaita/internal/service"
	"plaita/store/sqlite"
	"plaita/web"
)

// A console whose database has served with Redis does not run local mode when Redis is
// unreachable at its start (unless PLAITA_CONSOLE_LOCAL_FALLBACK says so): a console that came
// up in local mode during a Redis blip answered starts in its own process, and once it was
// restarted on Redis those executions were in no list the cluster shows — with workers, the
// system split without a word. A console on a PostgreSQL database never runs local mode (its
// embedded backend is SQLite's; the replicas beside it would each run their own). Either
// waits for Redis instead: not ready on both ports, its API answering 503 (web.Waiting),
// trying Redis with a bounded backoff; once Redis answers it makes the normal start on it.

// Backoff of the tries while the console waits for Redis: the first a second after the failed
// connect, doubling up to ten seconds between tries.
const (
	redisWaitFirst = time.Second
	redisWaitMax   = 10 * time.Second
)

// waitForRedis serves "not ready" — /readyz 503 with the reason on the console's port (a
// web.Waiting on addr) and on the metrics port (metricsSrv, with ready's reason) — says once
// in the log why, and tries Redis until it answers: it returns the client and the waiting
// server, still serving, for the HTTP server to take the port over. A stop (ctx ended) while
// it waits stops what it started and returns no client and no error.
func waitForRedis(ctx context.Context, db *sqlite.DB, why string, url, addr string, ready *health.Readiness,
	metricsSrv *health.Server, cause error, log zerolog.Logger) (rueidis.Client, *web.Waiting, error) {
	masked := config.MaskURL(url)
	// The reason is public (/readyz, /health, every refused request): it names the variable, not
	// the host; the log line below has the address.
	ready.SetNotReady("waiting for Redis (PLAITA_CONSOLE_REDIS_URL): " + why)
	waiting := web.NewWaiting(db.Ping, ready, buildVersion(), log)
	wait := &redisWait{url: url, connect: RedisClient, first: redisWaitFirst, max: redisWaitMax, got: make(chan rueidis.Client, 1)}
	bg := context.Background()
	stopAll := func() {
		wait.Stop(bg)
		select {
		case c := <-wait.got: // it connected as the stop came
			c.Close()
		default:
		}
		waiting.Stop(bg)
		metricsSrv.Stop(bg)
	}
	if err := metricsSrv.Start(ctx); err != nil {
		return nil, nil, fmt.Errorf("console: metrics server: %w", err)
	}
	if err := waiting.Service(addr).Start(ctx); err != nil {
		stopAll()
		return nil, nil, fmt.Errorf("console: %w", err)
	}
	if err := wait.Start(ctx); err != nil {
		stopAll()
		return nil, nil, fmt.Errorf("console: redis wait: %w", err)
	}
	log.Warn().Str("event", "console.waiting_for_redis").Str("redis_url", masked).Str("variable", "PLAITA_CONSOLE_REDIS_URL").
		Str("addr", waiting.Addr()).AnErr("cause", cause).
		Msg("WAITING FOR REDIS: " + why + "; the console is not ready and its API answers 503 until Redis answers, then it starts on it")
	started := time.Now()
	select {
	case <-ctx.Done():
		stopAll()
		return nil, nil, nil
	case c := <-wait.got:
		wait.Stop(bg)
		ready.SetNotReady("starting")
		log.Info().Str("event", "console.redis_answered").Str("redis_url", masked).Int64("tries", wait.tries.Load()).
			Dur("waited", time.Since(started)).Msg("Redis answers: the console starts on it")
		return c, waiting, nil
	}
}

// redisWait tries Redis with a backoff (first, doubling up to max) until a connect succeeds,
// and hands the client over on got (buffered: the one client it makes).
type redisWait struct {
	svc     service.Base
	url     string
	connect func(url string) (rueidis.Client, error)
	first   time.Duration
	max     time.Duration
	got     chan rueidis.Client
	tries   atomic.Int64
}

func (w *redisWait) Start(ctx context.Context) error { return w.svc.Run(ctx, w.run) }

func (w *redisWait) Stop(ctx context.Context) { w.svc.Stop(ctx) }

func (w *redisWait) run(ctx context.Context) {
	delay := w.first
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		if c, ok := w.try(ctx); ok {
			w.got <- c
			return
		}
		delay = min(2*delay, w.max)
	}
}

// try connects once. A connect cannot be cancelled: a stop during one returns at once, and the
// client it makes late is closed.
func (w *redisWait) try(ctx context.Context) (rueidis.Client, bool) {
	w.tries.Add(1)
	type result struct {
		c   rueidis.Client
		err error
	}
	done := make(chan result, 1)
	go func() {
		c, err := w.connect(w.url)
		done <- result{c, err}
	}()
	select {
	case r := <-done:
		return r.c, r.err == nil
	case <-ctx.Done():
		go func() {
			if r := <-done; r.err == nil {
				r.c.Close()
			}
		}()
		return nil, false
	}
}

// takeOver starts the console's HTTP server on the address the waiting server holds: the
// waiting server stops first (its port closes, its requests in flight finish) and the API
// listens on the same address at once — the only moment the port does not answer.
type takeOver struct {
	waiting *web.Waiting
	srv     *web.Server
	http    service.Service
}

func (t *takeOver) Start(ctx context.Context) error {
	addr := t.waiting.Addr()
	t.waiting.Stop(ctx)
	t.http = t.srv.Service(addr)
	return t.http.Start(ctx)
}

func (t *takeOver) Stop(ctx context.Context) {
	if t.http != nil {
		t.http.Stop(ctx)
	}
	t.waiting.Stop(ctx)
}

// alreadyRunning is a service the console started before its role's services (the metrics
// server, while it waited for Redis): starting it again is a no-op, stopping it stops it.
type alreadyRunning struct{ service.Service }

func (alreadyRunning) Start(context.Context) error { return nil }
