package ui_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"plaita/engine/state"
	"plaita/store/sqlite"
	"plaita/test/webtest"
)

// BenchmarkUIExecutionListPage: GET /ui/executions (a page of 50, the session's own API call
// in process, rendered) over a tenant with PLAITA_BENCH_EXECUTIONS (default 20,000) executions,
// a tenth of them suspended with a due time (the list's next wake column); p50/p99 beside
// ns/op, measured over loopback HTTP (an upper bound of the server's time).
func BenchmarkUIExecutionListPage(b *testing.B) {
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
				st := &state.Execution{ExecutionID: fmt.Sprintf("ex_uibench%07d", i), TenantID: "default", FlowID: "ask", FlowVersion: "1",
					Status: state.Completed, CurrentNode: "done", Context: map[string]any{"n": i}, StartTime: at, LastUpdate: at, EndTime: &at}
				if i%10 == 0 {
					due := now.Add(time.Hour)
					st.Status, st.EndTime, st.CurrentNode = state.Suspended, nil, "wait"
					st.Suspend = &state.Suspend{Kind: state.SuspendDelay, Node: "wait", Since: at, Due: &due}
				}
				if err := ts.Save(context.Background(), st); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	u, err := f.DB.CreateUser(context.Background(), sqlite.NewUser{Login: "bench", Password: "password-bench"})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := f.DB.SetMembership(context.Background(), u.ID, "default", sqlite.RoleViewer); err != nil {
		b.Fatal(err)
	}
	c := f.Client(nil)
	c.Login(b, "bench", "password-bench")
	var lat webtest.Latencies
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		res, err := c.HC.Get(f.URL + "/ui/executions?limit=50")
		if err != nil {
			b.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		lat.Add(time.Since(t0))
		if res.StatusCode != http.StatusOK || (i == 0 && strings.Count(string(body), "<tr data-status=") != 50) {
			b.Fatalf("page: %d %.500s", res.StatusCode, body)
		}
	}
	lat.Report(b)
	b.ReportMetric(float64(n), "executions")
}
