package callctx

import (
	"context"
	"testing"
	"time"
)

func TestBoundedKeepsTheCallersDeadline(t *testing.T) {
	parent, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	ctx, done := Bounded(parent, time.Second)
	defer done()
	if dl, _ := ctx.Deadline(); dl != mustDeadline(t, parent) {
		t.Errorf("deadline %v, want the caller's %v", dl, mustDeadline(t, parent))
	}
	bare, done2 := Bounded(context.Background(), time.Minute)
	defer done2()
	if dl, ok := bare.Deadline(); !ok || time.Until(dl) > time.Minute {
		t.Errorf("a bare context is bounded by %v (ok %v), want a minute", time.Until(dl), ok)
	}
}

func TestDetachedOutlivesTheCallersCancellation(t *testing.T) {
	type key struct{}
	parent, cancel := context.WithCancel(context.WithValue(context.Background(), key{}, "v"))
	ctx, done := Detached(parent, time.Minute)
	defer done()
	cancel()
	if ctx.Err() != nil || ctx.Value(key{}) != "v" {
		t.Fatalf("detached: err %v, value %v", ctx.Err(), ctx.Value(key{}))
	}
	if dl, ok := ctx.Deadline(); !ok || time.Until(dl) > time.Minute {
		t.Errorf("detached deadline %v (ok %v), want within a minute", dl, ok)
	}
}

func mustDeadline(t *testing.T, ctx context.Context) time.Time {
	t.Helper()
	dl, ok := ctx.Deadline()
	if !ok {
		t.Fatal("no deadline")
	}
	return dl
}

func TestWithinIsTheSoonerOfTheTwo(t *testing.T) {
	parent, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	ctx, done := Within(parent, time.Second)
	defer done()
	if dl, _ := ctx.Deadline(); time.Until(dl) > time.Second {
		t.Errorf("a caller's longer deadline was kept: %v left", time.Until(dl))
	}
	short, cancel2 := context.WithTimeout(context.Background(), time.Second)
	defer cancel2()
	ctx2, done2 := Within(short, time.Hour)
	defer done2()
	if dl, _ := ctx2.Deadline(); dl != mustDeadline(t, short) {
		t.Errorf("deadline %v, want the caller's sooner %v", dl, mustDeadline(t, short))
	}
}
