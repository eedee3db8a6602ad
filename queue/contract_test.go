package queue_test

import (
	"context"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/redis/rueidis"
	"github.com/rs/zerolog"

	"plaita/queue"
	"plaita/queue/queuetest"
	"plaita/test/redistest"
)

// The task queue's contract on Redis: a stream, its group and dead-letter stream under a key
// root of the test's own on the shared test server.
func TestContractRedis(t *testing.T) {
	queuetest.Contract(t, queuetest.Backend{Name: "redis", Open: func(t *testing.T) queuetest.Stream {
		c := redistest.Client(t)
		return redisStream(t, c, redistest.Root(t, c))
	}})
}

// The delay queue's contract on Redis: its keys and the task stream under one key root.
func TestDelayContractRedis(t *testing.T) {
	queuetest.DelayContract(t, queuetest.DelayBackend{Name: "redis", Open: func(t *testing.T) (*queue.Delay, queuetest.Stream) {
		c := redistest.Client(t)
		root := redistest.Root(t, c)
		d, err := queue.NewDelay(c, root+":delay:queue")
		if err != nil {
			t.Fatal(err)
		}
		return d, redisStream(t, c, root)
	}})
}

// redisStream is a task stream with its group and dead-letter stream under root.
func redisStream(t *testing.T, c rueidis.Client, root string) queuetest.Stream {
	s := queue.Settings{Stream: root + ":flow:queue", Group: "workers", StartID: "0", DLQ: root + ":flow:queue:dlq",
		ClaimMinIdle: queuetest.MinIdle, MaxDeliveries: queuetest.MaxDeliveries, DLQMaxLen: 1000, TaskMaxAge: time.Hour}
	return queuetest.Stream{
		Queue: func(t *testing.T, consumer string) *queue.Queue {
			s := s
			s.Consumer = consumer
			q, err := queue.New(c, s, metrics.NewSet(), zerolog.Nop())
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := q.EnsureGroup(ctx); err != nil {
				t.Fatal(err)
			}
			return q
		},
		Enqueue: func(ctx context.Context, env queue.Envelope) (string, error) {
			return queue.Enqueue(ctx, c, s.Stream, env)
		},
	}
}
