package delay

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/redis/rueidis"
	"github.com/rs/zerolog"

	"plaita/engine/state"
	"plaita/queue"
	"plaita/test/redistest"
)

// logBuf collects log lines written from several goroutines.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// events returns the log lines whose event is ev.
func (l *logBuf) events(ev string) []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(l.b.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["event"] == ev {
			out = append(out, m)
		}
	}
	return out
}

type fix struct {
	c      rueidis.Client
	q      *queue.Delay
	stream string
	set    *metrics.Set
	logs   *logBuf
}

func newFix(t testing.TB, c rueidis.Client, root string) *fix {
	t.Helper()
	q, err := queue.NewDelay(queue.RedisDelays(c), root+":delay:queue")
	if err != nil {
		t.Fatal(err)
	}
	return &fix{c: c, q: q, stream: root + ":flow:queue", set: metrics.NewSet(), logs: &logBuf{}}
}

func (f *fix) mover(s Settings) *Mover {
	s.Move.Stream = f.stream
	return NewMover(f.q, s, f.set, zerolog.New(f.logs))
}

func tctx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func entry(id string, due time.Time) queue.DelayEntry {
	return queue.DelayEntry{ExecutionID: id, TenantID: "default", FlowID: "f", FlowVersion: "1",
		ResumeType: state.ResumeContinue, Node: "wait", Due: due}
}

func (f *fix) xlen(t testing.TB) int64 {
	t.Helper()
	n, err := f.c.Do(tctx(t), f.c.B().Xlen().Key(f.stream).Build()).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func (f *fix) metric(name string) string {
	var b bytes.Buffer
	f.set.WritePrometheus(&b)
	for _, line := range strings.Split(b.String(), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return v
		}
	}
	return ""
}

// One pass sends what is due, buries what cannot be sent, logs one line per entry with its
// fate, and counts it; the collector shows what is left.
func TestMoverRunOnceLogsAndCounts(t *testing.T) {
	t.Parallel()
	c := redistest.Client(t)
	f := newFix(t, c, redistest.Root(t, c))
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	for _, e := range []queue.DelayEntry{entry("ex_1", now.Add(-3*time.Second)), entry("ex_2", now), entry("ex_3", now.Add(time.Hour))} {
		if err := f.q.Schedule(tctx(t), e); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Do(tctx(t), c.B().Zadd().Key(f.q.ScheduledKey()).ScoreMember().ScoreMember(1, strings.Repeat("x", 2000)).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	m := f.mover(Settings{Now: func() time.Time { return now }})
	rep, err := m.RunOnce(tctx(t))
	if err != nil || len(rep.Fired) != 2 || len(rep.Dead) != 1 {
		t.Fatalf("pass %+v %v", rep, err)
	}
	fired := f.logs.events("delay.fired")
	if len(fired) != 2 || fired[0]["execution_id"] != "ex_1" || fired[0]["resume_type"] != "continue" || fired[0]["node"] != "wait" ||
		fired[0]["message_id"] == "" || fired[0]["late"] != 3000.0 {
		t.Errorf("fired lines %v", fired)
	}
	dead := f.logs.events("delay.dead")
	if len(dead) != 1 || dead[0]["reason"] != queue.DelayReasonMalformed || len(dead[0]["member"].(string)) > 520 || dead[0]["level"] != "error" {
		t.Errorf("dead lines %v", dead)
	}
	if f.metric("plaita_delay_fired_total") != "2" || f.metric("plaita_delay_dead_total") != "1" || f.xlen(t) != 2 {
		t.Errorf("counters fired=%s dead=%s, stream %d", f.metric("plaita_delay_fired_total"), f.metric("plaita_delay_dead_total"), f.xlen(t))
	}
	m.Collector()(tctx(t))
	if f.metric("plaita_delay_scheduled") != "1" || f.metric("plaita_delay_due") != "0" || f.metric("plaita_delay_dead_entries") != "1" {
		t.Errorf("gauges scheduled=%s due=%s dead=%s", f.metric("plaita_delay_scheduled"), f.metric("plaita_delay_due"), f.metric("plaita_delay_dead_entries"))
	}
}

// The running loop sends an entry once it is due, never before, and keeps going through a
// backlog bigger than a batch without waiting an interval per batch.
func TestMoverLoopSendsWhenDue(t *testing.T) {
	t.Parallel()
	c := redistest.Client(t)
	f := newFix(t, c, redistest.Root(t, c))
	for i := range 25 {
		if err := f.q.Schedule(tctx(t), entry(fmt.Sprintf("ex_old_%d", i), time.Now().Add(-time.Hour))); err != nil {
			t.Fatal(err)
		}
	}
	m := f.mover(Settings{Interval: time.Hour, Move: queue.MoveOptions{Batch: 10}}) // no second tick: one tick drains the backlog
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Stop(context.Background()) })
	waitFor(t, "the backlog sent", func() bool { return f.xlen(t) == 25 })
	m.Stop(context.Background())
	m.Stop(context.Background()) // safe twice

	// Scheduled once the first mover has stopped, so that only the second one can send it, when
	// it is due (a slow machine must not let the backlog's tick take it along).
	if err := f.q.Schedule(tctx(t), entry("ex_soon", time.Now().Add(300*time.Millisecond))); err != nil {
		t.Fatal(err)
	}
	m2 := f.mover(Settings{Interval: 20 * time.Millisecond})
	if err := m2.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m2.Stop(context.Background()) })
	// The pass logs an entry once its move returned: wait for the line, not only the stream.
	var last map[string]any
	waitFor(t, "the due entry sent and logged", func() bool {
		fired := f.logs.events("delay.fired")
		if len(fired) == 0 {
			return false
		}
		last = fired[len(fired)-1]
		return last["execution_id"] == "ex_soon"
	})
	if n := f.xlen(t); n != 26 {
		t.Fatalf("%d tasks on the stream, want the 25 of the backlog and the due entry", n)
	}
	// The queue's resolution is the millisecond (the entry's score): an entry is sent once the
	// clock reaches its due millisecond, which may be up to a millisecond before a due time
	// within it — never earlier.
	if late := last["late"].(float64); late <= -1 {
		t.Fatalf("sent %v ms before its due time", -late)
	}
	if err := m2.Start(context.Background()); err == nil {
		t.Error("a second Start was accepted")
	}
}

// A queue that cannot be read is logged once per outage, counted per pass, and the recovery
// is logged; passes send again once Redis is back.
func TestMoverPassFailureLoggedOncePerOutage(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t)
	c := srv.Client(t)
	f := newFix(t, c, "plaita")
	m := f.mover(Settings{PassTimeout: 300 * time.Millisecond})
	srv.Kill()
	for range 2 {
		if _, err := m.RunOnce(tctx(t)); err == nil {
			t.Fatal("a pass against a stopped Redis succeeded")
		}
	}
	if n := len(f.logs.events("delay.pass_failed")); n != 1 || f.metric("plaita_delay_pass_failures_total") != "2" {
		t.Fatalf("%d failure lines, %s counted", n, f.metric("plaita_delay_pass_failures_total"))
	}
	srv.Start()
	waitFor(t, "a pass after the restart", func() bool { _, err := m.RunOnce(tctx(t)); return err == nil })
	if err := f.q.Schedule(tctx(t), entry("ex_1", time.Now())); err != nil {
		t.Fatal(err)
	}
	if _, err := m.RunOnce(tctx(t)); err != nil {
		t.Fatal(err)
	}
	if len(f.logs.events("delay.pass_recovered")) != 1 || f.xlen(t) != 1 {
		t.Fatalf("recovery not logged or entry not sent (stream %d)", f.xlen(t))
	}
}

func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached in 15 s", what)
		}
	}
}
