//go:build e2e

package e2e

import (
	"context"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"plaita/test/redistest"
)

// plaita dev and a Redis it is given with --redis-url: it runs on it whatever keys it holds
// (and leaves them as they are); a --redis-url nothing answers at is an error, not local mode.

// spawnDevArgs starts `plaita dev` with args and no Redis in its environment, without waiting.
func spawnDevArgs(t *testing.T, args ...string) *devProc {
	t.Helper()
	port := redistest.FreePort(t)
	env := map[string]string{"PLAITA_CONSOLE_PORT": strconv.Itoa(port), "PLAITA_CONSOLE_HOST": "127.0.0.1",
		"PLAITA_CONSOLE_ADMIN_API_KEY": consoleAdminKey, "PLAITA_LOG_FORMAT": "json"}
	cmd := exec.Command(binary, append([]string{"dev"}, args...)...)
	cmd.Dir = t.TempDir()
	out := &syncBuffer{}
	cmd.Stdout = out
	return &devProc{console: &console{p: spawnCmd(t, cmd, env), base: "http://127.0.0.1:" + strconv.Itoa(port)}, stdout: out}
}

func TestDevRunsOnTheRedisItIsGiven(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t)
	rc := srv.Client(t)
	ctx := context.Background()
	if err := rc.Do(ctx, rc.B().Set().Key("session:42").Value("alice").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	d := spawnDevArgs(t, "--redis-url", srv.URL())
	waitFor(t, "plaita dev to serve", 60*time.Second, func() bool {
		code, _ := d.call(t, http.MethodGet, "/readyz", nil)
		return code == http.StatusOK && strings.Contains(d.stdout.String(), "open http://")
	}, d.p)
	if m := devMode(t, d.p); m["mode"] != "redis" || m["redis_told"] != true {
		t.Fatalf("the first dev line: %v", m)
	}
	if code, body := d.call(t, http.MethodGet, "/health", nil); code != http.StatusOK || body["mode"] != "redis" {
		t.Fatalf("health: %d %v", code, body)
	}
	// It runs on that Redis: the roles registered there, the demo published there.
	if n, err := rc.Do(ctx, rc.B().Exists().Key("plaita:flow_list", "plaita:registry:instances").Build()).AsInt64(); err != nil || n != 2 {
		t.Fatalf("plaita's keys in the Redis it was given: %d %v", n, err)
	}
	if v, err := rc.Do(ctx, rc.B().Get().Key("session:42").Build()).ToString(); err != nil || v != "alice" {
		t.Fatalf("the key that was there: %q %v", v, err)
	}
	d.p.stop(t)

	// Given a Redis nothing answers at, dev says so and stops.
	nowhere := "redis://127.0.0.1:" + strconv.Itoa(redistest.FreePort(t)) + "/0"
	d = spawnDevArgs(t, "--redis-url", nowhere)
	if !d.p.wait(30 * time.Second) {
		t.Fatalf("dev with a --redis-url nothing answers at still runs\n%s", tail(d.p.stderr.String(), 20))
	}
	d.p.ended = true
	if d.p.err == nil || !strings.Contains(d.p.stderr.String(), "without --redis-url for local mode") {
		t.Fatalf("exit %v\n%s", d.p.err, tail(d.p.stderr.String(), 20))
	}
}
