package delay

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"plaita/queue"
	"plaita/test/redistest"
)

// BenchmarkDelayFired measures delay-queue entries sent per second: b.N due entries, moved by
// one or two movers (each pass a ZRANGE and one script) into the task stream, on a private
// redis-server. Scheduling them is not timed.
//
//	go test ./roles/delay -run '^$' -bench DelayFired -benchtime 20000x
func BenchmarkDelayFired(b *testing.B) {
	srv := redistest.StartServer(b)
	c := srv.Client(b)
	for _, bc := range []struct {
		batch, movers int
	}{{100, 1}, {500, 1}, {100, 2}} {
		b.Run(fmt.Sprintf("batch=%d/movers=%d", bc.batch, bc.movers), func(b *testing.B) {
			root := fmt.Sprintf("bench%d", time.Now().UnixNano())
			f := newFix(b, c, root)
			scheduleMany(b, c, f.q, b.N)
			ms := make([]*Mover, bc.movers)
			for i := range ms {
				ms[i] = f.mover(Settings{Move: queue.MoveOptions{Batch: bc.batch}})
			}
			var fired atomic.Int64
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for _, m := range ms {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for fired.Load() < int64(b.N) {
						rep, err := m.RunOnce(context.Background())
						if err != nil {
							b.Error(err)
							return
						}
						fired.Add(int64(len(rep.Fired)))
					}
				}()
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			if n := f.xlen(b); n != int64(b.N) {
				b.Fatalf("stream holds %d resumes, want %d", n, b.N)
			}
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "fired/s")
			redistest.DeleteRoot(b, c, root)
		})
	}
}

// scheduleMany adds n due entries, pipelined.
func scheduleMany(b *testing.B, c rueidis.Client, q *queue.Delay, n int) {
	b.Helper()
	past := time.Now().Add(-time.Minute)
	cmds := make(rueidis.Commands, 0, 1000)
	flush := func() {
		for _, r := range c.DoMulti(context.Background(), cmds...) {
			if err := r.Error(); err != nil {
				b.Fatal(err)
			}
		}
		cmds = cmds[:0]
	}
	for i := range n {
		e := entry(fmt.Sprintf("ex_%08d", i), past.Add(time.Duration(i)*time.Microsecond))
		m, err := memberOf(e)
		if err != nil {
			b.Fatal(err)
		}
		cmds = append(cmds, c.B().Zadd().Key(q.ScheduledKey()).ScoreMember().ScoreMember(float64(e.Due.UnixMilli()), m).Build())
		if len(cmds) == cap(cmds) {
			flush()
		}
	}
	flush()
}

// memberOf is the member queue.Delay.Schedule writes for e (docs/wakeups.md: its JSON, due in
// UTC).
func memberOf(e queue.DelayEntry) (string, error) {
	e.Due = e.Due.UTC()
	b, err := json.Marshal(e)
	return string(b), err
}
