//go:build !e2e

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A start whose input is over PLAITA_EXECUTION_STATE_MAX_BYTES is refused at enqueue (exit 2,
// naming the variable) and nothing is written to the stream.
func TestCLIStartRefusesAnInputOverTheStateBound(t *testing.T) {
	t.Parallel()
	e := newStack(t, withTimeout(60*time.Second))
	dir := t.TempDir()
	flow := filepath.Join(dir, "f.json")
	if err := os.WriteFile(flow, []byte(shortFlow), 0o644); err != nil {
		t.Fatal(err)
	}
	input := filepath.Join(dir, "in.json")
	if err := os.WriteFile(input, []byte(`{"blob":"`+strings.Repeat("x", 5000)+`"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"PLAITA_REDIS_URL": e.srv.URL(), "PLAITA_EXECUTION_STATE_MAX_BYTES": "4096"}
	r := run(t, env, "start", flow, "--input", "@"+input)
	if r.code != 2 || !strings.Contains(r.stderr, "PLAITA_EXECUTION_STATE_MAX_BYTES") || !strings.Contains(r.stderr, "too large") {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
	if n := e.streamLen(); n != 0 {
		t.Fatalf("%d entries enqueued", n)
	}
	if r := run(t, env, "start", flow, "--input", `{"small":true}`); r.code != 0 {
		t.Fatalf("a small input: exit %d %s", r.code, r.stderr)
	}
}
