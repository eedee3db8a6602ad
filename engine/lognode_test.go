package engine

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

// The log node logs through the executor's logger, naming the execution and the node, at its
// level.
func TestLogNodeLogs(t *testing.T) {
	h := newHarness(t)
	var buf bytes.Buffer
	h.ex.Log = zerolog.New(&buf).Level(zerolog.InfoLevel)
	f := h.flow(`{"id":"lg","start":"a","nodes":[
		{"id":"a","type":"log","params":{"message":"hello {{ INPUT.who }}","level":"warn"},"next":"b"},
		{"id":"b","type":"log","params":{"message":"quiet","level":"debug"},"next":"e"},
		{"id":"e","type":"end"}]}`)
	st := h.start(f, map[string]any{"who": "ops"})
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("want one line (debug is below the level), got %q", buf.String())
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"level": "warn", "event": "flow.log", "message": "hello ops", "execution_id": st.ExecutionID,
		"flow_id": "lg", "node": "a"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v (line %s)", k, got[k], v, lines[0])
		}
	}
}
