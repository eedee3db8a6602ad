package queue

import (
	"strings"
	"testing"
	"time"
)

// xackOnly acknowledges without deleting: the residue a process killed between XACK and XDEL
// leaves behind.
func (b *bundle) xackOnly(t *testing.T, ids ...string) {
	t.Helper()
	c := b.c
	if err := c.Do(testCtx(t), c.B().Xack().Key(b.q.Stream()).Group(b.q.Group()).Id(ids...).Build()).Error(); err != nil {
		t.Fatal(err)
	}
}

func TestSweepRemovesOnlyResidue(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	var read []string
	for range 3 {
		read = append(read, b.enqueue(t, startEnv("f")))
	}
	b.read(t, b.q, "w1", 3)
	b.xackOnly(t, read[0], read[2]) // residue; read[1] stays pending (in flight)
	backlog := []string{b.enqueue(t, startEnv("f")), b.enqueue(t, startEnv("f"))}

	n, err := b.q.SweepResidue(testCtx(t))
	if err != nil || n != 2 {
		t.Fatalf("swept %d, %v; want 2", n, err)
	}
	if l := b.xlen(t, b.q.Stream()); l != 3 {
		t.Fatalf("stream holds %d, want the pending entry and the backlog (3)", l)
	}
	if c, _ := b.pendingOf(t, read[1]); c != "w1" {
		t.Fatal("the in-flight entry was touched")
	}
	// The undelivered backlog is still there to read.
	ds := b.read(t, b.q, "w1", 10)
	if len(ds) != 2 || ds[0].ID != backlog[0] || ds[1].ID != backlog[1] {
		t.Fatalf("backlog after sweep: %v", ds)
	}
	if s := b.q.Stats(); s.ResidueSwept != 2 {
		t.Fatalf("residue_swept %d", s.ResidueSwept)
	}
	// Nothing left to sweep.
	if n, err := b.q.SweepResidue(testCtx(t)); err != nil || n != 0 {
		t.Fatalf("second sweep %d, %v", n, err)
	}
}

// A group that has not been handed an entry yet protects it, even when another group acked it.
func TestSweepRespectsEveryGroup(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	id := b.enqueue(t, startEnv("f"))
	q2, _, _ := b.newQueue(t, map[string]string{"PLAITA_CONSUMER_GROUP": "audit", "PLAITA_CONSUMER_GROUP_START_ID": "$"})
	if err := q2.EnsureGroup(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	id2 := b.enqueue(t, startEnv("f")) // after the audit group's start
	b.read(t, b.q, "w1", 10)
	b.xackOnly(t, id, id2)
	n, err := b.q.SweepResidue(testCtx(t))
	if err != nil || n != 1 {
		t.Fatalf("swept %d, %v; want 1 (the entry before the audit group's start)", n, err)
	}
	if ds := b.read(t, q2, "a1", 10); len(ds) != 1 || ds[0].ID != id2 {
		t.Fatalf("audit group lost its entry: %v", ds)
	}
}

// Residue converges in rounds of at most ResidueBatch.
func TestSweepRounds(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	const total = ResidueBatch + 44
	var ids []string
	for range total {
		ids = append(ids, b.enqueue(t, startEnv("f")))
	}
	for len(b.read(t, b.q, "w1", 100)) > 0 {
	}
	b.xackOnly(t, ids...)
	for i, want := range []int{ResidueBatch, total - ResidueBatch, 0} {
		n, err := b.q.SweepResidue(testCtx(t))
		if err != nil || n != want {
			t.Fatalf("round %d: swept %d, %v; want %d", i, n, err, want)
		}
	}
	if l := b.xlen(t, b.q.Stream()); l != 0 {
		t.Fatalf("%d entries left", l)
	}
	if s := b.q.Stats(); s.ResidueSwept != total {
		t.Fatalf("residue_swept %d", s.ResidueSwept)
	}
}

func TestSweepWithoutStream(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	q, _, _ := b.newQueue(t, map[string]string{"PLAITA_QUEUE_NAME": b.root + ":nothing"})
	if n, err := q.SweepResidue(testCtx(t)); err != nil || n != 0 {
		t.Fatalf("%d, %v", n, err)
	}
}

func TestSweeperSweepsAtStartAndStops(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	id := b.enqueue(t, startEnv("f"))
	b.read(t, b.q, "w1", 1)
	b.xackOnly(t, id)
	sw := b.q.Sweeper(time.Hour)
	if err := sw.Start(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	// The sweep at start has run when Start returns.
	if n := b.q.Stats().ResidueSwept; n != 1 {
		t.Fatalf("swept %d at start, want 1", n)
	}
	stopped := make(chan struct{})
	go func() { sw.Stop(testCtx(t)); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("the sweeper did not stop")
	}
	sw.Stop(testCtx(t)) // twice: fine
	if !strings.Contains(b.logs.String(), `"event":"queue.residue_swept"`) {
		t.Fatalf("no log line: %s", b.logs.String())
	}
}
