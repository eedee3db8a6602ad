package store_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"plaita/engine/state"
)

// Benchmarks against the shared local Redis. The figure to read is ops/s (also ns/op).
//
//	go test ./store -run '^$' -bench . -benchtime 3s

func benchState(id string) *state.Execution {
	st := newState(id, state.Running)
	st.Context["$VARS"] = map[string]any{"order": map[string]any{"id": "o-1", "lines": []any{1.0, 2.0, 3.0}}}
	return st
}

// BenchmarkFencedSave: one worker saving its execution step after step through the lease.
func BenchmarkFencedSave(b *testing.B) {
	f := setup(b, nil)
	c := context.Background()
	l := f.acquire("bench", "w")
	s := l.Storage()
	st := benchState("bench")
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		st.StepCount = i
		if err := s.Save(c, st); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "saves/s")
}

// BenchmarkFencedSaveParallel: many workers, one execution and lease each.
func BenchmarkFencedSaveParallel(b *testing.B) {
	f := setup(b, nil)
	c := context.Background()
	var n atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		id := fmt.Sprintf("bench%d", n.Add(1))
		l := f.acquire(id, "w")
		s := l.Storage()
		st := benchState(id)
		for i := 0; pb.Next(); i++ {
			st.StepCount = i
			if err := s.Save(c, st); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "saves/s")
}

func BenchmarkLoad(b *testing.B) {
	f := setup(b, nil)
	c := context.Background()
	if err := f.ts.Save(c, benchState("bench")); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := f.ts.Load(c, "bench"); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "loads/s")
}

func BenchmarkLoadParallel(b *testing.B) {
	f := setup(b, nil)
	c := context.Background()
	for i := range 64 {
		if err := f.ts.Save(c, benchState(fmt.Sprintf("bench%d", i))); err != nil {
			b.Fatal(err)
		}
	}
	var n atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		id := fmt.Sprintf("bench%d", n.Add(1)%64)
		for pb.Next() {
			if _, err := f.ts.Load(c, id); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "loads/s")
}
