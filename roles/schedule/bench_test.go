package schedule

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkSchedulerPass: b.N every-second schedules due at once, fired by one schedule process
// in as many passes as it takes (each schedule: read, tenant and flow checks, claim, enqueue,
// complete) against the shared test Redis. It reports schedules fired per second:
// `go test ./roles/schedule -run '^$' -bench Pass -benchtime 10000x`.
func BenchmarkSchedulerPass(b *testing.B) {
	bb := setup(b)
	bb.publish("", "report", "1", bb.base)
	for i := range b.N {
		bb.create(everySecond(fmt.Sprintf("s%06d", i), ""))
	}
	s := bb.scheduler("bench", nil, nil)
	bb.clock.set(bb.base.Add(1100 * time.Millisecond))
	b.ResetTimer()
	start := time.Now()
	fired := 0
	for fired < b.N { // a pass reads at most 20 pages of 500
		p := s.RunOnce(tctx(b))
		if p.Fired == 0 || p.Errors != 0 {
			b.Fatalf("pass %+v with %d of %d schedules fired", p, fired, b.N)
		}
		fired += p.Fired
	}
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "fired/s")
}
