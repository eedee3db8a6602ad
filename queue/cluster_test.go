package queue

import (
	"strings"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/rs/zerolog"

	"plaita/config"
	"plaita/test/redistest"
)

// The queue, its DLQ and the markers hash to different slots; no command may span them.
func TestClusterRoundTrip(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node Redis Cluster")
	}
	t.Parallel()
	c, _ := redistest.StartCluster(t, 3)
	cfg, err := config.Load(config.RoleWorker, true, config.WithEnv(map[string]string{
		"PLAITA_CLAIM_MIN_IDLE_MS": "50", "PLAITA_MAX_DELIVERIES": "1",
	}))
	if err != nil {
		t.Fatal(err)
	}
	q, err := New(Redis(c), fromConfig(cfg), metrics.NewSet(), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	// StartCluster waits for one node to say cluster_state:ok; the others may lag a moment.
	for deadline := time.Now().Add(10 * time.Second); ; {
		err := q.EnsureGroup(ctx)
		if err == nil {
			break
		}
		if time.Now().After(deadline) || !strings.Contains(err.Error(), "CLUSTERDOWN") {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := Enqueue(ctx, Redis(c), q.Stream(), startEnv("f")); err != nil {
		t.Fatal(err)
	}
	ds, err := q.Read(ctx, "a", 10, 100*time.Millisecond)
	if err != nil || len(ds) != 1 {
		t.Fatalf("read %v %v", ds, err)
	}
	// Age the entry past the claim idle time (XCLAIM … IDLE, JUSTID keeps its count).
	if err := c.Do(ctx, c.B().Xclaim().Key(q.Stream()).Group(q.Group()).Consumer("a").MinIdleTime("0").
		Id(ds[0].ID).Idle(10*minIdle.Milliseconds()).Justid().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	rs, err := q.Reclaim(ctx, "b", 10)
	if err != nil || len(rs) != 1 || q.Gate(rs[0]) != VerdictDeadLetterMaxDeliveries {
		t.Fatalf("reclaim %v %v", rs, err)
	}
	if err := q.Apply(ctx, rs[0], VerdictDeadLetterMaxDeliveries); err != nil {
		t.Fatal(err)
	}
	es, err := q.ListDLQ(ctx, 10)
	if err != nil || len(es) != 1 {
		t.Fatalf("dlq %v %v", es, err)
	}
	r, err := q.Replay(ctx, es[0].ID)
	if err != nil || r.Status != ReplayDone {
		t.Fatalf("replay %+v %v", r, err)
	}
	ds, err = q.Read(ctx, "a", 10, 100*time.Millisecond)
	if err != nil || len(ds) != 1 || ds[0].Envelope.SourceMessageID != rs[0].ID {
		t.Fatalf("replayed read %v %v", ds, err)
	}
	if err := q.Ack(ctx, ds[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := q.SweepResidue(ctx); err != nil {
		t.Fatal(err)
	}
	if d, err := q.Depth(ctx); err != nil || d.StreamLength != 0 || d.Pending != 0 || d.DLQLength != 1 {
		t.Fatalf("depth %+v %v", d, err)
	}
}
