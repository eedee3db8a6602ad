package engine

import (
	"errors"
	"strings"
	"testing"
)

func TestFlowCachePreparesEachVersionOnce(t *testing.T) {
	c := NewFlowCache(NewRegistry(), DefaultExprLimits, 2)
	a := []byte(`{"id":"a","start":"e","nodes":[{"id":"e","type":"end"}]}`)
	aSpaced := []byte("{ \"start\": \"e\", \"id\": \"a\", \"nodes\": [{\"type\": \"end\", \"id\": \"e\"}] }")
	f1, err := c.Parse(a)
	if err != nil {
		t.Fatal(err)
	}
	f2, _ := c.Parse(aSpaced)
	if f1 != f2 {
		t.Error("the same definition was prepared twice")
	}
	c.Parse([]byte(strings.Replace(string(a), `"a"`, `"b"`, 1)))
	c.Parse([]byte(strings.Replace(string(a), `"a"`, `"c"`, 1)))
	if f3, _ := c.Parse(a); f3 == f1 {
		t.Error("the oldest flow was not evicted")
	}
	if _, err := c.Parse([]byte(`{"id":`)); !errors.Is(err, ErrInvalidFlow) || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("syntax error: %v", err)
	}
	if _, err := c.Parse([]byte(`{"id":"x","start":"nope","nodes":[{"id":"e","type":"end"}]}`)); !errors.Is(err, ErrInvalidFlow) {
		t.Errorf("invalid flow: %v", err)
	}
}
