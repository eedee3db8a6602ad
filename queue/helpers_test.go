package queue

import (
	"bytes"
	"context"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/redis/rueidis"
	"github.com/rs/zerolog"

	"plaita/config"
	"plaita/engine"
	"plaita/test/redistest"
	"plaita/test/testutil"
)

// minIdle is PLAITA_CLAIM_MIN_IDLE_MS in these tests.
const minIdle = 50 * time.Millisecond

// logBuf collects log lines from several goroutines.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// bundle is one test's Redis root, queue and what it writes to.
type bundle struct {
	c    rueidis.Client
	root string
	env  *testutil.Env
	q    *Queue
	set  *metrics.Set
	logs *logBuf
}

// setup connects to the shared test Redis, takes a private key root and builds a queue on
// <root>:flow:queue with a 50 ms claim idle time; extra overrides the environment.
func setup(t *testing.T, extra map[string]string) *bundle {
	t.Helper()
	c := redistest.Client(t)
	root := redistest.Root(t, c)
	m := map[string]string{
		"PLAITA_QUEUE_NAME":        root + ":flow:queue",
		"PLAITA_CLAIM_MIN_IDLE_MS": "50",
		"PLAITA_CONSUMER_NAME":     "w1",
	}
	maps.Copy(m, extra)
	b := &bundle{c: c, root: root, env: testutil.NewEnv(m)}
	b.q, b.set, b.logs = b.newQueue(t, nil)
	ctx := testCtx(t)
	if err := b.q.EnsureGroup(ctx); err != nil {
		t.Fatal(err)
	}
	return b
}

// newQueue builds another queue on the same root with the bundle's environment plus extra
// (another worker, possibly of another config generation).
func (b *bundle) newQueue(t *testing.T, extra map[string]string) (*Queue, *metrics.Set, *logBuf) {
	t.Helper()
	m := b.env.Snapshot()
	maps.Copy(m, extra)
	lookup := b.env.Lookup
	if extra != nil {
		lookup = (testutil.NewEnv(m)).Lookup
	}
	cfg, err := config.Load(config.RoleWorker, true, config.WithLookup(lookup))
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	set := metrics.NewSet()
	logs := &logBuf{}
	q, err := New(Redis(b.c), fromConfig(cfg), set, zerolog.New(logs))
	if err != nil {
		t.Fatal(err)
	}
	return q, set, logs
}

// fromConfig is the queue's settings for cfg, as roles/settings builds them (that package
// imports this one, so its test cannot be used here).
func fromConfig(cfg *config.Config) Settings {
	g := cfg.Generations()
	return Settings{
		Stream: config.QueueName.In(cfg), Group: config.ConsumerGroup.In(cfg), StartID: config.ConsumerGroupStartID.In(cfg),
		Consumer: config.ConsumerName.In(cfg), DLQ: config.DLQKey.In(cfg),
		ClaimMinIdle:  time.Duration(config.ClaimMinIdleMS.In(cfg)) * time.Millisecond,
		MaxDeliveries: config.MaxDeliveries.In(cfg), DLQMaxLen: config.DLQMaxLen.In(cfg),
		TaskMaxAge:  time.Duration(config.TaskMaxAgeSeconds.In(cfg)) * time.Second,
		Generations: Generations{Family: g.Family, Config: g.Config, Budget: g.Budget},
	}
}

// testCtx bounds every Redis call of a test: rueidis retries reads forever while the server
// is down.
func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func startEnv(flow string) Envelope {
	return Envelope{Kind: KindStart, FlowID: flow, FlowVersion: "1", ExecutionID: engine.NewExecutionID(),
		Input: []byte(`{"n":1}`)}
}

func (b *bundle) enqueue(t *testing.T, e Envelope) string {
	t.Helper()
	id, err := Enqueue(testCtx(t), Redis(b.c), b.q.Stream(), e)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// xadd writes a raw entry (bypassing Enqueue) with the given field/value pairs.
func (b *bundle) xadd(t *testing.T, id string, fv ...string) string {
	t.Helper()
	cmd := b.c.B().Xadd().Key(b.q.Stream()).Id(id).FieldValue()
	for i := 0; i+1 < len(fv); i += 2 {
		cmd = cmd.FieldValue(fv[i], fv[i+1])
	}
	out, err := b.c.Do(testCtx(t), cmd.Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (b *bundle) read(t *testing.T, q *Queue, consumer string, n int) []Delivery {
	t.Helper()
	ds, err := q.Read(testCtx(t), consumer, n, 0)
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

func (b *bundle) readOne(t *testing.T, q *Queue, consumer string) Delivery {
	t.Helper()
	ds := b.read(t, q, consumer, 1)
	if len(ds) != 1 {
		t.Fatalf("read %d deliveries, want 1", len(ds))
	}
	return ds[0]
}

// reclaimOne polls Reclaim until it hands out one delivery (after the claim idle time).
func (b *bundle) reclaimOne(t *testing.T, q *Queue, consumer string) Delivery {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		ds, err := q.Reclaim(testCtx(t), consumer, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) == 1 {
			return ds[0]
		}
		if len(ds) > 1 {
			t.Fatalf("reclaimed %d deliveries, want 1", len(ds))
		}
		if time.Now().After(deadline) {
			t.Fatal("nothing reclaimed")
		}
		time.Sleep(minIdle / 2)
	}
}

// pendingOf is one XPENDING row of an id ("" consumer when not pending).
func (b *bundle) pendingOf(t *testing.T, id string) (consumer string, count int64) {
	t.Helper()
	c := b.c
	rows, err := c.Do(testCtx(t), c.B().Xpending().Key(b.q.Stream()).Group(b.q.Group()).Start(id).End(id).Count(1).Build()).ToArray()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) == 0 {
		return "", 0
	}
	f, _ := rows[0].ToArray()
	consumer, _ = f[1].ToString()
	count, _ = f[3].AsInt64()
	return consumer, count
}

func (b *bundle) xlen(t *testing.T, key string) int64 {
	t.Helper()
	n, err := b.c.Do(testCtx(t), b.c.B().Xlen().Key(key).Build()).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func (b *bundle) dlq(t *testing.T) []DLQEntry {
	t.Helper()
	es, err := b.q.ListDLQ(testCtx(t), 100)
	if err != nil {
		t.Fatal(err)
	}
	return es
}

func promText(set *metrics.Set) string {
	var sb strings.Builder
	set.WritePrometheus(&sb)
	return sb.String()
}

// makeIdle ages every pending entry past the claim idle time (XCLAIM … IDLE to its own
// consumer, JUSTID: its delivery count is kept), so a reclaim needs no sleep.
func (b *bundle) makeIdle(t *testing.T) {
	t.Helper()
	c := b.c
	rows, err := c.Do(testCtx(t), c.B().Xpending().Key(b.q.Stream()).Group(b.q.Group()).Start("-").End("+").Count(10000).Build()).ToArray()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		f, _ := r.ToArray()
		id, _ := f[0].ToString()
		consumer, _ := f[1].ToString()
		if err := c.Do(testCtx(t), c.B().Xclaim().Key(b.q.Stream()).Group(b.q.Group()).Consumer(consumer).MinIdleTime("0").
			Id(id).Idle((10 * minIdle).Milliseconds()).Justid().Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
}
