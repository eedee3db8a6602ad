package worker

import (
	"testing"
	"time"

	"plaita/engine/state"
)

// While runs are short the reader reads ahead (2n taken for n runners); a delivery read ahead
// that then waits behind a long run keeps its pending entry fresh, so a sibling's reclaim pass
// never takes it, and it runs once, here.
func TestDispatchReadAheadIsNotReclaimed(t *testing.T) {
	f := newDispatchFix(t, map[string]string{"PLAITA_CLAIM_MIN_IDLE_MS": "300", "PLAITA_MAX_DELIVERIES": "1"})
	f.reg.Register("test_sleep", sleepType{d: 1500 * time.Millisecond})
	f.publish(t, "simple", "1", simpleFlow)
	f.publish(t, "slow", "1", slowFlow)
	p := f.start(t, func(d *Deps) { d.Settings = withIdentity(SettingsFrom(f.cfg), "inst-w1", 1) })
	// Short runs first: the average run time falls under ReadAheadMaxRun.
	var warm []string
	for range 40 {
		env := f.startEnv("simple")
		f.enqueue(t, env)
		warm = append(warm, env.ExecutionID)
	}
	for _, id := range warm {
		f.waitState(t, id, statusIs(state.Completed))
	}
	if !p.readAhead() {
		t.Fatalf("after 40 short runs the average run is %v: no read-ahead", time.Duration(p.runEWMA.Load()))
	}
	slow, next := f.startEnv("slow"), f.startEnv("simple")
	f.enqueue(t, slow)
	f.enqueue(t, next)
	// The slow run holds the only runner; the next start is taken (read ahead) meanwhile.
	waitUntil(t, "the next start read ahead while the slow one runs", func() bool {
		d := f.depth(t)
		return d.Pending == 2
	})
	// A sibling tries to reclaim, every 100 ms, as long as the slow run holds the runner (1.5 s:
	// five times the minimum idle time), and until the read-ahead start has been refreshed.
	sibling := "w2"
	attempts := 0
	for {
		ds, err := f.q.Reclaim(dctx(t), sibling, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) > 0 {
			t.Fatalf("a sibling reclaimed %d delivery(ies) held here (first %s)", len(ds), ds[0].ID)
		}
		attempts++
		if st, err := f.ts(t).Load(dctx(t), slow.ExecutionID); err == nil && st.Status == state.Completed {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if attempts < 5 {
		t.Fatalf("only %d reclaim attempts while the slow run held the runner", attempts)
	}
	st := f.waitState(t, next.ExecutionID, statusIs(state.Completed))
	if st.Status != state.Completed {
		t.Fatalf("next: %s", st.Status)
	}
	f.waitSettled(t)
	if d := f.depth(t); d.DLQLength != 0 {
		t.Errorf("dead letters: %d", d.DLQLength)
	}
}

// Long runs are read only for free runners: nothing waits taken while a sibling could run it.
func TestDispatchNoReadAheadForLongRuns(t *testing.T) {
	f := newDispatchFix(t, map[string]string{"PLAITA_CLAIM_MIN_IDLE_MS": "30000"})
	f.reg.Register("test_sleep", sleepType{d: 400 * time.Millisecond})
	f.publish(t, "slow", "1", slowFlow)
	p := f.start(t, func(d *Deps) { d.Settings = withIdentity(SettingsFrom(f.cfg), "inst-w1", 1) })
	var ids []string
	for range 4 {
		env := f.startEnv("slow")
		f.enqueue(t, env)
		ids = append(ids, env.ExecutionID)
	}
	// Every sample while the four run one after another: never more taken than the runner.
	for _, id := range ids {
		for {
			if n := p.taken.Load(); n > 1 {
				t.Fatalf("%d deliveries taken for one runner busy on long runs (average %v)", n, time.Duration(p.runEWMA.Load()))
			}
			st, err := f.ts(t).Load(dctx(t), id)
			if err == nil && st.Status == state.Completed {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if p.readAhead() {
		t.Fatalf("average run %v: reads ahead", time.Duration(p.runEWMA.Load()))
	}
}
