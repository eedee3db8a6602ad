package sandbox

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"plaita/test/testutil"
)

// host is what a worker passes: its own PATH, so that /bin/sh finds its tools.
var host = Options{HostEnv: map[string]string{"PATH": os.Getenv("PATH")}}

func TestCancelKillsGroup(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pid")
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		testutil.ReadPid(t, pidFile)
		cancel()
	}()
	start := time.Now()
	res, err := host.Run(ctx, Command{Path: "/bin/sh", Args: []string{"-c", `sleep 300 & echo $! > "$1"; wait`, "sh", pidFile}, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Cancelled || res.Err() == nil || !strings.Contains(res.Err().Error(), "cancelled") {
		t.Fatalf("want cancelled, got %+v", res)
	}
	if time.Since(start) > 10*time.Second {
		t.Fatalf("took %s", time.Since(start))
	}
	testutil.WaitGone(t, testutil.ReadPid(t, pidFile))
}

func TestExitKillsLeftovers(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pid")
	res, err := host.Run(context.Background(), Command{Path: "/bin/sh",
		Args: []string{"-c", `sleep 300 >/dev/null 2>&1 & echo $! > "$1"; echo done`, "sh", pidFile}, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if res.Err() != nil || strings.TrimSpace(string(res.Stdout)) != "done" {
		t.Fatalf("got %+v", res)
	}
	testutil.WaitGone(t, testutil.ReadPid(t, pidFile))
}

func TestStdoutBoundAndStderrTail(t *testing.T) {
	res, err := host.Run(context.Background(), Command{Path: "/bin/sh",
		Args:    []string{"-c", `i=0; while [ $i -lt 300 ]; do echo "err line $i" >&2; i=$((i+1)); done; yes`},
		Timeout: 20 * time.Second, MaxStdout: 1000, StderrTail: 100})
	if err != nil {
		t.Fatal(err)
	}
	if !res.StdoutOverflow || len(res.Stdout) != 1000 || res.TimedOut {
		t.Fatalf("want overflow at 1000 bytes, got overflow=%v len=%d timedout=%v", res.StdoutOverflow, len(res.Stdout), res.TimedOut)
	}
	if len(res.Stderr) > 100 || !res.StderrCut || !strings.HasSuffix(res.Stderr, "err line 299\n") {
		t.Fatalf("stderr tail %q (cut %v)", res.Stderr, res.StderrCut)
	}
	if msg := res.Err().Error(); !strings.Contains(msg, "more than 1000 bytes") || !strings.Contains(msg, "err line 299") {
		t.Fatalf("message %q", msg)
	}
}

func TestEnvAndWorkingDir(t *testing.T) {
	// The host environment holds secrets too: only the allow-listed names reach the program.
	o := Options{HostEnv: map[string]string{"PATH": os.Getenv("PATH"), "TZ": "Europe/Paris", "LC_ALL": "C",
		"PLAITA_REDIS_URL": "redis://secret", "MY_API_KEY": "k", "HOME": "/home/worker"}}
	res, err := o.Run(context.Background(), Command{Path: "/bin/sh", Args: []string{"-c", `env; echo "cwd=$(pwd)"`}, Timeout: 10 * time.Second})
	if err != nil || res.Err() != nil {
		t.Fatal(err, res.Err())
	}
	var home, cwd string
	seen := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(res.Stdout)), "\n") {
		k, v, _ := strings.Cut(line, "=")
		switch k {
		case "PATH", "LANG", "LC_ALL", "TZ":
			seen[k] = v
		case "PWD", "SHLVL", "_":
		case "HOME":
			home = v
		case "cwd":
			cwd = v
		default:
			t.Errorf("unexpected variable %s", line)
		}
	}
	if want := map[string]string{"PATH": os.Getenv("PATH"), "LANG": "C.UTF-8", "LC_ALL": "C", "TZ": "Europe/Paris"}; !reflect.DeepEqual(seen, want) {
		t.Errorf("passed %v, want %v", seen, want)
	}
	if home == "" || home != cwd || !strings.Contains(home, "plaita-sandbox-") {
		t.Fatalf("HOME %q, cwd %q", home, cwd)
	}
	if _, err := os.Stat(home); !os.IsNotExist(err) {
		t.Fatalf("working directory %s not removed: %v", home, err)
	}
}

func TestBaseEnvDefaults(t *testing.T) {
	// Nothing from the host: a standard PATH and LANG, no LC_ALL or TZ.
	got := Options{}.BaseEnv("/tmp/h")
	want := []string{"PATH=" + defaultPath, "HOME=/tmp/h", "LANG=C.UTF-8"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("empty host: %q, want %q", got, want)
	}
	// A TZ that is set but empty is passed on (it means UTC); an empty PATH or LANG is not a value.
	got = Options{HostEnv: map[string]string{"PATH": "", "LANG": "", "TZ": "", "LANG_EXTRA": "x"}}.BaseEnv("/h")
	want = []string{"PATH=" + defaultPath, "HOME=/h", "LANG=C.UTF-8", "TZ="}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("empty values: %q, want %q", got, want)
	}
	for _, kv := range (Options{HostEnv: map[string]string{"PATH": "/p", "LANG": "de_DE.UTF-8", "LC_ALL": "C", "TZ": "UTC"}}).BaseEnv("/h") {
		name, _, _ := strings.Cut(kv, "=")
		if name != "HOME" && !slices.Contains(HostVariables(), name) {
			t.Errorf("BaseEnv passes %s, which HostVariables does not list", name)
		}
	}
}

func TestMemoryLimitSoftAndHard(t *testing.T) {
	res, err := host.Run(context.Background(), Command{Path: "/bin/sh", Args: []string{"-c", `ulimit -S -v; ulimit -H -v`}, MemoryMB: 64, Timeout: 10 * time.Second})
	if err != nil || res.Err() != nil {
		t.Fatal(err, res.Err())
	}
	if got := strings.Fields(string(res.Stdout)); len(got) != 2 || got[0] != "65536" || got[1] != "65536" {
		t.Fatalf("limits %q", got)
	}
}

func TestMissingExecutable(t *testing.T) {
	if _, err := host.Run(context.Background(), Command{Path: "/nonexistent/prog"}); err == nil {
		t.Fatal("want an error")
	}
}

func TestTailWriter(t *testing.T) {
	w := &tailWriter{max: 5}
	w.Write([]byte("abc"))
	w.Write([]byte("defg"))
	if s, cut := w.String(); s != "cdefg" || !cut {
		t.Fatalf("%q %v", s, cut)
	}
	w = &tailWriter{max: 5}
	w.Write([]byte("abcdefgh"))
	if s, cut := w.String(); s != "defgh" || !cut {
		t.Fatalf("%q %v", s, cut)
	}
}
