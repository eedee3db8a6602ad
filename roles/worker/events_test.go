package worker

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/redis/rueidis"
	"github.com/rs/zerolog"

	"plaita/engine/state"
	"plaita/store"
	"plaita/store/keys"
)

func TestObserverPublishesLiveEventsAndCountsMetrics(t *testing.T) {
	f := newDispatchFix(t, nil)
	f.publish(t, "simple", "1", simpleFlow)
	env := f.startEnv("simple")
	channel, err := keys.MustFor(f.root, "").ExecutionEvents(env.ExecutionID)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []LiveEvent
	subCtx, stopSub := context.WithCancel(context.Background())
	defer stopSub()
	go f.c.Receive(subCtx, f.c.B().Subscribe().Channel(channel).Build(), func(m rueidis.PubSubMessage) {
		var ev LiveEvent
		if json.Unmarshal([]byte(m.Message), &ev) == nil {
			mu.Lock()
			got = append(got, ev)
			mu.Unlock()
		}
	})
	// Wait until the subscription is live, so no event is published into the void.
	for deadline := time.Now().Add(5 * time.Second); ; {
		res, err := f.c.Do(dctx(t), f.c.B().PubsubNumsub().Channel(channel).Build()).ToArray()
		if err == nil && len(res) == 2 {
			if n, _ := res[1].AsInt64(); n == 1 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("subscription never became active")
		}
		time.Sleep(10 * time.Millisecond)
	}

	set := metrics.NewSet()
	obs := NewObserver(store.NewLiveEvents(store.OnRedis(f.c), f.root), SettingsFrom(f.cfg).EventsPublish, set, zerolog.Nop())
	obs.Start(context.Background()) // reads the watched executions: ours is
	defer obs.Stop(context.Background())
	if !obs.watched(env.ExecutionID) || obs.watched("ex_nobody") {
		t.Fatal("the observer does not know who is watched")
	}
	f.enqueue(t, env)
	f.start(t, func(d *Deps) { d.Observer = obs; d.Metrics = set })
	f.waitState(t, env.ExecutionID, statusIs(state.Completed))

	for deadline := time.Now().Add(5 * time.Second); ; {
		mu.Lock()
		n := len(got)
		last := LiveEvent{}
		if n > 0 {
			last = got[n-1]
		}
		mu.Unlock()
		if last.Event == "completed" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no completed event (got %d events)", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	mu.Lock()
	var started, steps int
	for _, ev := range got {
		if ev.ExecutionID != env.ExecutionID || ev.FlowID != "simple" {
			t.Errorf("event %+v", ev)
		}
		switch ev.Event {
		case "node_started":
			started++
		case "step":
			steps++
		}
	}
	mu.Unlock()
	if started == 0 || started != steps {
		t.Errorf("%d node_started and %d step events", started, steps)
	}
	// An execution nobody watches costs no PUBLISH: its steps are counted, nothing is sent.
	published := set.GetOrCreateCounter(`plaita_execution_events_published_total`).Get()
	other := f.startEnv("simple")
	f.enqueue(t, other)
	f.waitState(t, other.ExecutionID, statusIs(state.Completed))
	waitUntil(t, "the second execution counted", func() bool {
		return set.GetOrCreateCounter(`plaita_executions_total{status="completed"}`).Get() == 2
	})
	if n := set.GetOrCreateCounter(`plaita_execution_events_published_total`).Get(); n != published {
		t.Errorf("%d events published for an unwatched execution", n-published)
	}
	var b strings.Builder
	set.WritePrometheus(&b)
	for _, want := range []string{`plaita_executions_total{status="completed"} 2`, `plaita_step_duration_seconds_count`} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("metrics lack %s:\n%s", want, b.String())
		}
	}
}

func TestObserverPublishOffOnlyCounts(t *testing.T) {
	f := newDispatchFix(t, map[string]string{"PLAITA_EXECUTION_EVENTS_PUBLISH": "0"})
	set := metrics.NewSet()
	obs := NewObserver(store.NewLiveEvents(store.OnRedis(f.c), f.root), SettingsFrom(f.cfg).EventsPublish, set, zerolog.Nop())
	obs.Start(context.Background())
	f.publish(t, "simple", "1", simpleFlow)
	env := f.startEnv("simple")
	f.enqueue(t, env)
	f.start(t, func(d *Deps) { d.Observer = obs })
	f.waitState(t, env.ExecutionID, statusIs(state.Completed))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	obs.Stop(ctx)
	obs.Stop(ctx)
	var b strings.Builder
	set.WritePrometheus(&b)
	if !strings.Contains(b.String(), "plaita_execution_events_published_total 0") || !strings.Contains(b.String(), `plaita_executions_total{status="completed"} 1`) {
		t.Errorf("with publishing off: %s", b.String())
	}
}

// A subscriber of the tenant's status channel (the live executions list) hears each
// execution's status changes — started, completed — and none of its steps; the execution's own
// channel, unwatched, gets nothing.
func TestObserverPublishesStatusChangesToTheTenantChannel(t *testing.T) {
	f := newDispatchFix(t, nil)
	f.publish(t, "simple", "1", simpleFlow)
	channel := keys.MustFor(f.root, "").ExecutionStatus()
	var mu sync.Mutex
	var got []LiveEvent
	subCtx, stopSub := context.WithCancel(context.Background())
	defer stopSub()
	go f.c.Receive(subCtx, f.c.B().Subscribe().Channel(channel).Build(), func(m rueidis.PubSubMessage) {
		var ev LiveEvent
		if json.Unmarshal([]byte(m.Message), &ev) == nil {
			mu.Lock()
			got = append(got, ev)
			mu.Unlock()
		}
	})
	set := metrics.NewSet()
	obs := NewObserver(store.NewLiveEvents(store.OnRedis(f.c), f.root), true, set, zerolog.Nop())
	waitUntil(t, "the status channel's subscription seen", func() bool {
		obs.Refresh(dctx(t))
		return obs.statusWatched("default") && !obs.statusWatched("acme")
	})
	if err := obs.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer obs.Stop(context.Background())
	env := f.startEnv("simple")
	f.enqueue(t, env)
	f.start(t, func(d *Deps) { d.Observer = obs; d.Metrics = set })
	f.waitState(t, env.ExecutionID, statusIs(state.Completed))
	waitUntil(t, "the completed status change", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) > 0 && got[len(got)-1].Event == "completed"
	})
	mu.Lock()
	defer mu.Unlock()
	var events []string
	for _, ev := range got {
		if ev.ExecutionID != env.ExecutionID || ev.TenantID != "default" {
			t.Errorf("event %+v", ev)
		}
		events = append(events, ev.Event)
	}
	if strings.Join(events, ",") != "started,completed" {
		t.Errorf("status changes %v, want started,completed", events)
	}
	if n := set.GetOrCreateCounter(`plaita_execution_events_published_total`).Get(); n != 2 {
		t.Errorf("%d events published, want the 2 status changes only", n)
	}
}
