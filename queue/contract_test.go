package queue_test

import (
	"testing"

	"plaita/queue"
	"plaita/queue/queuetest"
	"plaita/test/redistest"
)

// The task queue's contract on Redis: a stream, its group and dead-letter stream under a key
// root of the test's own on the shared test server.
func TestContractRedis(t *testing.T) {
	queuetest.Contract(t, queuetest.Backend{Name: "redis", Open: func(t *testing.T) queuetest.Stream {
		c := redistest.Client(t)
		return queuetest.On(queue.Redis(c), redistest.Root(t, c))
	}})
}

// The delay queue's contract on Redis: its keys and the task stream under one key root.
func TestDelayContractRedis(t *testing.T) {
	queuetest.DelayContract(t, queuetest.DelayBackend{Name: "redis", Open: func(t *testing.T) (*queue.Delay, queuetest.Stream) {
		c := redistest.Client(t)
		root := redistest.Root(t, c)
		d, err := queue.NewDelay(queue.RedisDelays(c), root+":delay:queue")
		if err != nil {
			t.Fatal(err)
		}
		return d, queuetest.On(queue.Redis(c), root)
	}})
}
