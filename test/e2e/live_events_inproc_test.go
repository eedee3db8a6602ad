//go:build !e2e

package e2e

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"plaita/store/keys"
)

// A dashboard's two ways to follow every execution, against `plaita worker`: a pattern
// subscription of the execution channels (PSUBSCRIBE plaita:execution_events:*) and the tenant's
// status channel. Each hears the terminal event of every execution started after it subscribed.
func TestE2ELiveEventsReachPatternAndStatusSubscribers(t *testing.T) {
	t.Parallel()
	s := newStack(t, withEnv(cliEnv()))
	s.start("worker", nil)
	s.publish("quick", `{"id":"quick","start":"a","nodes":[{"id":"a","type":"log","params":{"message":"hi"},"next":"done"},{"id":"done","type":"end"}]}`)

	var mu sync.Mutex
	completed := map[string]map[string]bool{} // channel kind → execution ids
	listen := func(kind string, cmd rueidis.Completed) {
		completed[kind] = map[string]bool{}
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		c := s.srv.Client(t)
		go c.Receive(ctx, cmd, func(m rueidis.PubSubMessage) {
			var ev struct {
				ExecutionID string `json:"execution_id"`
				Event       string `json:"event"`
			}
			if json.Unmarshal([]byte(m.Message), &ev) == nil && ev.Event == "completed" {
				mu.Lock()
				completed[kind][ev.ExecutionID] = true
				mu.Unlock()
			}
		})
	}
	listen("pattern", s.c.B().Psubscribe().Pattern("plaita:execution_events:*").Build())
	listen("status", s.c.B().Subscribe().Channel(keys.MustFor("", "").ExecutionStatus()).Build())
	waitFor(t, "both subscriptions active", 10*time.Second, func() bool {
		n, _ := s.c.Do(s.ctx, s.c.B().PubsubNumpat().Build()).AsInt64()
		res, _ := s.c.Do(s.ctx, s.c.B().PubsubNumsub().Channel(keys.MustFor("", "").ExecutionStatus()).Build()).ToArray()
		subs := int64(0)
		if len(res) == 2 {
			subs, _ = res[1].AsInt64()
		}
		return n == 1 && subs == 1
	})
	// The worker re-reads who listens every second: a start heard on both proves it has. One
	// start is not enough (it may run before the re-read): another goes every 200 ms until one is.
	var probes []string
	var last time.Time
	waitFor(t, "the worker publishes to the new subscribers", 30*time.Second, func() bool {
		mu.Lock()
		for _, id := range probes {
			if completed["pattern"][id] && completed["status"][id] {
				mu.Unlock()
				return true
			}
		}
		mu.Unlock()
		if time.Since(last) > 200*time.Millisecond {
			probes, last = append(probes, s.enqueue("quick")), time.Now()
		}
		return false
	}, s.procs...)

	const n = 200
	ids := make([]string, n)
	for i := range ids {
		ids[i] = s.enqueue("quick")
	}
	waitFor(t, "every terminal event heard on both", 60*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, id := range ids {
			if !completed["pattern"][id] || !completed["status"][id] {
				return false
			}
		}
		return true
	}, s.procs...)
}
