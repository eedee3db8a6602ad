package engine

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

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

// loopFlow counts VARS.i up to n through a condition and a set node: 2n+1 steps, n+1 of them
// conditions, the shape of the loops the console summarises.
func loopFlow(n int) string {
	return fmt.Sprintf(`{"id":"loop","start":"more","vars":{"i":0},"max_steps":%d,"nodes":[
		{"id":"more","type":"condition","params":{"expr":"VARS.i < %d && INPUT.kind != 'stop'"},"branches":{"true":"inc","false":"done"}},
		{"id":"inc","type":"set","params":{"vars":{"i":"{{ VARS.i + 1 }}"}},"next":"more"},
		{"id":"done","type":"end","params":{"output":"{{ VARS.i }}"}}]}`, 2*n+10, n)
}

// BenchmarkConditionLoop runs a 100-pass loop (a condition and a set node a pass) on the memory
// store: ns/op is one whole execution of 201 steps, 101 of them conditions.
func BenchmarkConditionLoop(b *testing.B) {
	flow, err := Parse([]byte(loopFlow(100)), NewRegistry(), DefaultExprLimits)
	if err != nil {
		b.Fatal(err)
	}
	ex := NewExecutor(store.NewMemory())
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		st, err := ex.Start(ctx, flow, StartRequest{Input: map[string]any{"kind": "go"}})
		if err != nil || st.Output != float64(100) {
			b.Fatalf("%v %v", st.Output, err)
		}
	}
}

// BenchmarkConditionStep is one condition node's run alone (evaluation and its reason), without
// the executor's save: the cost the reason adds shows here undiluted.
func BenchmarkConditionStep(b *testing.B) {
	flow, err := Parse([]byte(loopFlow(100)), NewRegistry(), DefaultExprLimits)
	if err != nil {
		b.Fatal(err)
	}
	node, _ := flow.Node("more")
	st, err := NewState(flow, StartRequest{Input: map[string]any{"kind": "go"}}, time.Now())
	if err != nil {
		b.Fatal(err)
	}
	st.Vars()["i"] = float64(42)
	b.ReportAllocs()
	for b.Loop() {
		c := &Call{Node: node, Execution: st, limits: DefaultExprLimits}
		c.mkEnv = func() map[string]any { return exprEnv(st, flow, node.ID, nil) }
		out, err := node.runner.Run(context.Background(), c)
		if err != nil || out.Next != "inc" {
			b.Fatalf("%+v %v", out, err)
		}
	}
}
