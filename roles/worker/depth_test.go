package worker

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/rs/zerolog"

	"plaita/internal/health"
	"plaita/queue"
	"plaita/roles/settings"
	"plaita/test/redistest"
)

// scrape serves set with one collector on 127.0.0.1 and returns the /metrics body of each call.
func scrape(t *testing.T, set *metrics.Set, c health.Collector) func() string {
	t.Helper()
	s := health.New("127.0.0.1", 9, set, nil, zerolog.Nop())
	s.AddCollector(c)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Serve(ln); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Stop(context.Background()) })
	return func() string {
		resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + s.Addr() + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
}

type fakeDepth struct {
	d   queue.Depth
	err error
}

func (f *fakeDepth) Depth(context.Context) (queue.Depth, error) { return f.d, f.err }

func TestQueueDepthCollector(t *testing.T) {
	t.Parallel()
	set := metrics.NewSet()
	depth := &fakeDepth{d: queue.Depth{StreamLength: 7, Pending: 2, DLQLength: 1}}
	get := scrape(t, set, QueueDepthCollector(depth, `plaita:flow:queue`, set, zerolog.Nop()))
	body := get()
	for _, want := range []string{
		`plaita_queue_stream_length{queue="plaita:flow:queue"} 7`,
		`plaita_queue_pending{queue="plaita:flow:queue"} 2`,
		`plaita_queue_dlq_length{queue="plaita:flow:queue"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, body)
		}
	}
	// A failing depth read keeps the last values and is counted.
	depth.err = errors.New("redis down")
	body = get()
	for _, want := range []string{
		`plaita_queue_stream_length{queue="plaita:flow:queue"} 7`,
		`plaita_queue_depth_read_failed_total{queue="plaita:flow:queue"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q after a failed read", want)
		}
	}
}

// A real queue's depth through the collector.
func TestQueueDepthCollectorFromRedis(t *testing.T) {
	t.Parallel()
	c := redistest.Client(t)
	root := redistest.Root(t, c)
	stream := root + ":flow:queue"
	cfg := cfgWith(t, map[string]string{"PLAITA_QUEUE_NAME": stream, "PLAITA_CONSUMER_NAME": "w1"})
	set := metrics.NewSet()
	q, err := queue.New(queue.Redis(c), settings.Queue(cfg), set, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	ctx := dctx(t)
	if err := q.EnsureGroup(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Do(ctx, c.B().Xadd().Key(stream).Id("*").FieldValue().FieldValue("payload", "{}").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	body := scrape(t, set, QueueDepthCollector(q, q.Stream(), set, zerolog.Nop()))()
	label := `{queue="` + stream + `"}`
	for _, want := range []string{"plaita_queue_stream_length" + label + " 1", "plaita_queue_pending" + label + " 0",
		"plaita_queue_dlq_length" + label + " 0", "plaita_queue_acked_total" + label + " 0"} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, body)
		}
	}
}

func TestInstanceInfo(t *testing.T) {
	cfg := cfgWith(t, map[string]string{
		"PLAITA_INSTANCE_ID": "w-cfg", "PLAITA_QUEUE_NAME": "q1", "PLAITA_WORKER_CONCURRENCY": "3",
	})
	info := InstanceInfo(cfg)
	g := cfg.Generations()
	if info.InstanceID != "w-cfg" || info.Role != "worker" || info.Queue != "q1" || info.ConsumerName != "w-cfg" ||
		info.DLQKey == "" || info.ConsumerGroup == "" || info.Capacity != 3 || info.Generations.Family != g.Family ||
		info.Generations.Budget != g.Budget || info.PID == 0 || info.StartedAt.IsZero() {
		t.Fatalf("info %+v", info)
	}
}
