package control

import (
	"context"
	"encoding/json"
	"testing"

	"plaita/queue"
	"plaita/test/redistest"
)

// TestStartRetriesAnEnqueueARestartBroke: the task stream on a private redis-server that is
// restarted (its data kept: append-only file) between starts. The producer's connection is
// the one Redis closed, so a start's XADD is the first command on it after the restart, and
// fails (EOF) when the client has not noticed the close yet — rueidis does not retry a write.
// The start sends the same envelope again on a new connection: every start answers, at least
// one of them after a retry, and each execution is exactly one entry of the stream.
func TestStartRetriesAnEnqueueARestartBroke(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t, "--appendonly", "yes", "--appendfsync", "always")
	pc := srv.Client(t)
	const stream = "plaita:flow:queue"
	f := newFixture(t, func(d *Deps) {
		d.Producer = queue.NewProducer(queue.Redis(pc), stream, queue.Generations{}, 1<<20, nil)
	})
	ctx := context.Background()
	if _, err := f.p.PublishFlow(ctx, "", []byte(askFlow), ""); err != nil {
		t.Fatal(err)
	}
	var ids []string
	retried := 0
	// Whether the client noticed the close before the XADD is a race of the kernel and its
	// reader: a restart breaks the next XADD about every other time. Go on until one did.
	for i := 0; i < 40 && (retried == 0 || len(ids) < 3); i++ {
		s, err := f.p.Start(ctx, StartRequest{FlowID: "ask", Input: json.RawMessage(`{"n":1}`)})
		if err != nil {
			t.Fatalf("start %d: %v", i, err)
		}
		ids = append(ids, s.ExecutionID)
		if s.EnqueueRetries > 0 {
			retried++
		}
		srv.Restart()
	}
	if retried == 0 {
		t.Fatalf("no start of %d needed a retry: the restart never broke an XADD", len(ids))
	}
	entries, err := pc.Do(ctx, pc.B().Xrange().Key(stream).Start("-").End("+").Build()).AsXRange()
	if err != nil {
		t.Fatal(err)
	}
	per := map[string]int{}
	for _, e := range entries {
		var env queue.Envelope
		if err := json.Unmarshal([]byte(e.FieldValues[queue.PayloadField]), &env); err != nil {
			t.Fatal(err)
		}
		per[env.ExecutionID]++
	}
	for _, id := range ids {
		if per[id] != 1 {
			t.Errorf("execution %s: %d stream entries, want 1", id, per[id])
		}
	}
	if len(entries) != len(ids) {
		t.Fatalf("%d entries for %d starts (%d retried)", len(entries), len(ids), retried)
	}
	t.Logf("%d starts, %d of them retried after the restart", len(ids), retried)
}
