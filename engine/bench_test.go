package engine

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"plaita/store"
)

// BenchmarkLinearSetFlow runs a 100-node linear flow of set nodes on the memory store, which
// serializes the whole state at every step exactly like the Redis backend. ns/op is one whole
// execution (100 steps); steps/s is reported separately.
func BenchmarkLinearSetFlow(b *testing.B) {
	var nodes []string
	for i := range 100 {
		next := fmt.Sprintf(`"next":"n%d"`, i+1)
		if i == 99 {
			next = `"next":"end"`
		}
		nodes = append(nodes, fmt.Sprintf(`{"id":"n%d","type":"set","params":{"vars":{"v%d":"{{ VARS.seed + %d }}"}},%s}`, i, i, i, next))
	}
	nodes = append(nodes, `{"id":"end","type":"end","params":{"output":"{{ VARS.v99 }}"}}`)
	src := `{"id":"linear","start":"n0","vars":{"seed":1},"nodes":[` + strings.Join(nodes, ",") + `]}`
	flow, err := Parse([]byte(src), NewRegistry(), DefaultExprLimits)
	if err != nil {
		b.Fatal(err)
	}
	ex := NewExecutor(store.NewMemory())
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		st, err := ex.Start(ctx, flow, StartRequest{})
		if err != nil || st.Output != float64(100) {
			b.Fatalf("%v %v", st.Output, err)
		}
	}
	b.ReportMetric(float64(b.N*101)/b.Elapsed().Seconds(), "steps/s")
}
