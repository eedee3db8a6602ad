package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"plaita/engine/state"
	"plaita/store"
	"plaita/store/sqlite"
	"plaita/test/webtest"
	"plaita/web/api"
)

// Benchmarks of the API over real HTTP (docs/console.md, "Performance"): starts through POST
// /api/executions with 16 concurrent clients, a page of the executions list, a login with the
// production argon2id parameters. Each reports the p99 of its requests beside ns/op.

// BenchmarkStartExecution: POST /api/executions from 16 concurrent clients (an editor's API key,
// keep-alive connections), each start checked against the tenant's quota, dispatched by
// capacity in shadow mode (the console's default: the decision recorded in the ledger) among
// four registered workers, and enqueued on Redis.
func BenchmarkStartExecution(b *testing.B) {
	f := webtest.New(b, webtest.WithDispatch(true))
	for i := range 4 {
		f.RegisterInstance(b, store.InstanceRecord{InstanceID: fmt.Sprint("w", i), Role: "worker", Status: "running",
			Queue: f.Root + ":flow:queue", Capacity: 8, ActiveTasks: i})
	}
	key := f.APIKey(b, "default", sqlite.RoleEditor)
	ed := f.Key(key)
	ed.Want(b, http.StatusCreated, http.MethodPost, "/api/flows", map[string]any{"definition": json.RawMessage(webtest.ApprovalFlow)})
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	hc := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	body := `{"flow_id":"ask","input":{"order":42}}`
	var lat webtest.Latencies
	b.SetParallelism(max(1, 16/max(1, testingProcs())))
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req, _ := http.NewRequest(http.MethodPost, f.URL+"/api/executions", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+key)
			t0 := time.Now()
			res, err := hc.Do(req)
			if err != nil {
				b.Error(err)
				return
			}
			res.Body.Close()
			lat.Add(time.Since(t0))
			if res.StatusCode != http.StatusCreated {
				b.Errorf("start: %d", res.StatusCode)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "starts/s")
	lat.Report(b)
}

// testingProcs is GOMAXPROCS as the benchmark runs it (RunParallel starts parallelism ×
// GOMAXPROCS goroutines).
func testingProcs() int { return runtime.GOMAXPROCS(0) }

// BenchmarkExecutionListPage: GET /api/executions?limit=50 over a tenant with
// PLAITA_BENCH_EXECUTIONS (default 20,000) executions in the index.
func BenchmarkExecutionListPage(b *testing.B) {
	f := webtest.New(b)
	n := 20000
	if v, err := strconv.Atoi(os.Getenv("PLAITA_BENCH_EXECUTIONS")); err == nil && v > 0 {
		n = v
	}
	ts, err := f.Redis.Tenant("")
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
	viewer := f.Key(f.APIKey(b, "default", sqlite.RoleViewer))
	var lat webtest.Latencies
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		r := viewer.Want(b, http.StatusOK, http.MethodGet, "/api/executions?limit=50", nil)
		lat.Add(time.Since(t0))
		if i == 0 && len(r.Body["items"].([]any)) != 50 {
			b.Fatalf("page: %s", r.Raw)
		}
	}
	lat.Report(b)
}

// BenchmarkLogin: POST /api/login with the production argon2id parameters
// (sqlite.DefaultPasswordParams), one client after another.
func BenchmarkLogin(b *testing.B) {
	f := webtest.New(b, webtest.WithPasswords(sqlite.DefaultPasswordParams()),
		webtest.WithSettings(func(s *api.Settings) { s.Login.Off = true })) // the login, not its throttle
	if _, err := f.DB.CreateUser(context.Background(), sqlite.NewUser{Login: "bench", Password: "password-bench"}); err != nil {
		b.Fatal(err)
	}
	c := f.Client(nil)
	var lat webtest.Latencies
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		c.Want(b, http.StatusOK, http.MethodPost, "/api/login", map[string]string{"login": "bench", "password": "password-bench"})
		lat.Add(time.Since(t0))
	}
	lat.Report(b)
}
