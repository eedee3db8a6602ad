package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"plaita/control"
	"plaita/engine/state"
	"plaita/store"
	"plaita/store/sqlite"
)

// Benchmarks of the API over real HTTP (docs/console.md, "Performance"): starts through POST
// /api/executions with 16 concurrent clients, a page of the executions list, a login with the
// production argon2id parameters. Each reports the p99 of its requests beside ns/op.

// latencies collects request durations for a p99.
type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
}

func (l *latencies) report(b *testing.B) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.d) == 0 {
		return
	}
	slices.Sort(l.d)
	p := func(q float64) float64 {
		return float64(l.d[min(len(l.d)-1, int(q*float64(len(l.d))))].Microseconds()) / 1000
	}
	b.ReportMetric(p(0.50), "p50-ms")
	b.ReportMetric(p(0.99), "p99-ms")
}

// BenchmarkStartExecution: POST /api/executions from 16 concurrent clients (an editor's API key,
// keep-alive connections), each start checked against the tenant's quota, dispatched by
// capacity in shadow mode (the console's default: the decision recorded in the ledger) among
// four registered workers, and enqueued on Redis.
func BenchmarkStartExecution(b *testing.B) {
	f := newFixture(b, withDispatch(true))
	for i := range 4 {
		f.registerInstance(b, store.InstanceRecord{InstanceID: fmt.Sprint("w", i), Role: "worker", Status: "running",
			Queue: f.root + ":flow:queue", Capacity: 8, ActiveTasks: i})
	}
	key := f.apiKey(b, "default", sqlite.RoleEditor)
	ed := f.key(key)
	ed.want(b, http.StatusCreated, http.MethodPost, "/api/flows", map[string]any{"definition": json.RawMessage(approvalFlow)})
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	hc := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	body := `{"flow_id":"ask","input":{"order":42}}`
	var lat latencies
	b.SetParallelism(max(1, 16/max(1, testingProcs())))
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req, _ := http.NewRequest(http.MethodPost, f.url+"/api/executions", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+key)
			t0 := time.Now()
			res, err := hc.Do(req)
			if err != nil {
				b.Error(err)
				return
			}
			res.Body.Close()
			lat.add(time.Since(t0))
			if res.StatusCode != http.StatusCreated {
				b.Errorf("start: %d", res.StatusCode)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "starts/s")
	lat.report(b)
}

// testingProcs is GOMAXPROCS as the benchmark runs it (RunParallel starts parallelism ×
// GOMAXPROCS goroutines).
func testingProcs() int { return runtime.GOMAXPROCS(0) }

// BenchmarkExecutionListPage: GET /api/executions?limit=50 over a tenant with
// PLAITA_BENCH_EXECUTIONS (default 20,000) executions in the index.
func BenchmarkExecutionListPage(b *testing.B) {
	f := newFixture(b)
	n := 20000
	if v, err := strconv.Atoi(os.Getenv("PLAITA_BENCH_EXECUTIONS")); err == nil && v > 0 {
		n = v
	}
	ts, err := f.redis.Tenant("")
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now().UTC()
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 8 {
				at := now.Add(-time.Duration(i) * time.Second)
				st := &state.Execution{ExecutionID: fmt.Sprintf("ex_bench%07d", i), TenantID: "default", FlowID: "ask", FlowVersion: "1",
					Status: state.Completed, CurrentNode: "done", Context: map[string]any{"n": i}, StartTime: at, LastUpdate: at, EndTime: &at}
				if err := ts.Save(context.Background(), st); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	viewer := f.key(f.apiKey(b, "default", sqlite.RoleViewer))
	var lat latencies
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		r := viewer.want(b, http.StatusOK, http.MethodGet, "/api/executions?limit=50", nil)
		lat.add(time.Since(t0))
		if i == 0 && len(r.body["items"].([]any)) != 50 {
			b.Fatalf("page: %s", r.raw)
		}
	}
	lat.report(b)
}

// BenchmarkLogin: POST /api/login with the production argon2id parameters
// (sqlite.DefaultPasswordParams), one client after another.
func BenchmarkLogin(b *testing.B) {
	f := newFixture(b, withSettings(func(s *Settings) { s.Login.Off = true })) // the login, not its throttle
	ctx := context.Background()
	db, err := sqlite.Open(ctx, "sqlite:///"+filepath.Join(b.TempDir(), "login.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	f.srv.api.d.Accounts = control.NewAccounts(db, nil, nil, control.AccountsSettings{})
	if _, err := db.CreateUser(ctx, sqlite.NewUser{Login: "bench", Password: "password-bench"}); err != nil {
		b.Fatal(err)
	}
	c := f.client(nil)
	var lat latencies
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		c.want(b, http.StatusOK, http.MethodPost, "/api/login", map[string]string{"login": "bench", "password": "password-bench"})
		lat.add(time.Since(t0))
	}
	lat.report(b)
}
