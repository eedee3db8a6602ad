//go:build e2e

package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"plaita/test/redistest"
)

// What a newcomer trips over with plaita dev and `go run`, through the binary: dev on Redis ran
// one step at a time, the commands printed by a `go run` binary pointed into the build cache, a
// SIGTERM to `go run` left plaita serving, a taken port was reported in a stutter, a kept state
// did not say how to get the admin in again, and nothing said where writefile nodes write.

// startDevWith starts `plaita dev` with args and env on top of dev's usual test environment
// (a console port of its own, the admin key, JSON logs; no Redis unless env names one), in dir
// ("" a temporary directory), and waits until it serves and has printed where to go.
func startDevWith(t *testing.T, dir string, env map[string]string, args ...string) *devProc {
	t.Helper()
	port := redistest.FreePort(t)
	all := map[string]string{"PLAITA_CONSOLE_PORT": strconv.Itoa(port), "PLAITA_CONSOLE_HOST": "127.0.0.1",
		"PLAITA_CONSOLE_ADMIN_API_KEY": consoleAdminKey, "PLAITA_LOG_FORMAT": "json",
		"PLAITA_REDIS_URL": "redis://127.0.0.1:" + strconv.Itoa(redistest.FreePort(t)) + "/0"}
	maps.Copy(all, env)
	cmd := exec.Command(binary, append([]string{"dev"}, args...)...)
	cmd.Dir = dir
	if dir == "" {
		cmd.Dir = t.TempDir()
	}
	out := &syncBuffer{}
	cmd.Stdout = out
	d := &devProc{console: &console{p: spawnCmd(t, cmd, all), base: "http://127.0.0.1:" + strconv.Itoa(port)}, stdout: out}
	waitFor(t, "plaita dev to serve", 60*time.Second, func() bool {
		code, _ := d.call(t, http.MethodGet, "/readyz", nil)
		return code == http.StatusOK && strings.Contains(out.String(), "open http://")
	}, d.p)
	return d
}

// workerCapacity is the capacity the registry shows for dev's worker.
func workerCapacity(t *testing.T, d *devProc) float64 {
	t.Helper()
	var capacity float64
	waitFor(t, "the worker in the registry", 30*time.Second, func() bool {
		code, body := d.call(t, http.MethodGet, "/api/cluster/instances", nil)
		if code != http.StatusOK {
			return false
		}
		raw, _ := json.Marshal(body)
		var in struct {
			Instances []struct {
				Role     string  `json:"role"`
				Capacity float64 `json:"capacity"`
			} `json:"instances"`
		}
		_ = json.Unmarshal(raw, &in)
		for _, i := range in.Instances {
			if i.Role == "worker" {
				capacity = i.Capacity
				return true
			}
		}
		return false
	}, d.p)
	return capacity
}

// dev on Redis runs at least four steps at once, as local mode does: one process is every worker
// there is. A concurrency given explicitly is kept.
func TestNewcomerDevOnRedisRunsFourStepsAtOnce(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t)
	d := startDevWith(t, "", map[string]string{"PLAITA_REDIS_URL": srv.URL()})
	if m := devMode(t, d.p); m["mode"] != "redis" {
		t.Fatalf("the first dev line: %v", m)
	}
	if c := workerCapacity(t, d); c != 4 {
		t.Errorf("dev's worker has capacity %v, want 4\n%s", c, tail(d.p.stderr.String(), 30))
	}
	// The worker's start-up line says it too, and where its writefile nodes write.
	if lines := logLines(d.p.stderr.String(), "worker.started"); len(lines) != 1 || lines[0]["concurrency"] != float64(4) ||
		lines[0]["writefile_root"] == nil || lines[0]["writefile_root"] == "" {
		t.Errorf("worker.started: %v", lines)
	}
	d.p.stop(t)

	d = startDevWith(t, "", map[string]string{"PLAITA_REDIS_URL": srv.URL()}, "--concurrency", "2")
	if c := workerCapacity(t, d); c != 2 {
		t.Errorf("dev --concurrency 2: the worker has capacity %v, want 2", c)
	}
	d.p.stop(t)
}

// A binary `go run` built in a build cache the environment names (GOCACHE) prints its commands
// as `go run .`, not as the cache path, which is gone (or another build) by the time they run.
// The binary is put where `go run` puts it, $GOCACHE/xx/<hash>-d/plaita: building it with `go
// run` under an empty GOCACHE would compile every dependency (minutes on two cores).
func TestNewcomerGoRunBinaryInAGOCACHEPrintsGoRun(t *testing.T) {
	t.Parallel()
	gocache := t.TempDir()
	hash := strings.Repeat("5e", 32)
	exe := filepath.Join(gocache, hash[:2], hash+"-d", "plaita")
	if err := os.MkdirAll(filepath.Dir(exe), 0o755); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(binary)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(exe, data, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "run", repoFlow(t, "expense-approval.json"), "--state-dir", t.TempDir(), "--quiet")
	cmd.Env = processEnv(t, map[string]string{"GOCACHE": gocache})
	cmd.Dir = t.TempDir()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`(?m)^    (.*) run .* --resume .* --type approval`).FindStringSubmatch(string(out))
	if m == nil || m[1] != "go run ." {
		t.Fatalf("the approval command starts with %q, want go run .\n%s", m, out)
	}
}

// goEnv is the go command's environment for a `go run` of the clone in a test: the test's own
// caches (the build cache TestMain filled), no network, no toolchain switch.
func goEnv(t *testing.T) map[string]string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOCACHE", "GOMODCACHE", "GOPATH").Output()
	if err != nil {
		t.Skipf("no go command: %v", err)
	}
	v := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(v) != 3 {
		t.Fatalf("go env: %q", out)
	}
	return map[string]string{"GOCACHE": v[0], "GOMODCACHE": v[1], "GOPATH": v[2], "GOFLAGS": "-mod=mod", "GOPROXY": "off",
		"GOTOOLCHAIN": "local", "CGO_ENABLED": "0"}
}

// childOf is the pid of a process whose parent is ppid and whose command is name, 0 when none.
func childOf(ppid int, name string) int {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		// pid (comm) state ppid …: comm may hold spaces, so split after its closing parenthesis.
		s := string(stat)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open {
			continue
		}
		f := strings.Fields(s[end+1:])
		if len(f) > 1 && s[open+1:end] == name && f[1] == strconv.Itoa(ppid) {
			return pid
		}
	}
	return 0
}

// processGone reports whether the process pid has exited (it no longer exists, or is a zombie
// nobody reaped yet).
func processGone(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	s := string(stat)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) == 0 || f[0] == "Z" || f[0] == "X"
}

// SIGTERM to `go run` — what an IDE or a supervisor sends — ends the plaita it started: the go
// command dies of it without passing it on, and plaita asked Linux for SIGTERM when its parent
// dies, so it drains as usual and frees its port. This builds plaita with `go run` from the
// clone, on the build cache TestMain filled: the go command links it (tens of seconds after a
// change of the tree, under a second after that).
func TestNewcomerSIGTERMToGoRunStopsPlaita(t *testing.T) {
	t.Parallel()
	env := goEnv(t)
	port := redistest.FreePort(t)
	maps.Copy(env, map[string]string{"PLAITA_CONSOLE_PORT": strconv.Itoa(port), "PLAITA_CONSOLE_HOST": "127.0.0.1",
		"PLAITA_LOG_FORMAT": "json", "PLAITA_REDIS_URL": "redis://127.0.0.1:" + strconv.Itoa(redistest.FreePort(t)) + "/0"})
	// Files, not pipes: the go command's Wait must not wait for the plaita it leaves behind, and
	// a plaita whose pipe was closed would die of SIGPIPE — not of what this test is about.
	dir := t.TempDir()
	stdout, err := os.Create(filepath.Join(dir, "stdout"))
	if err != nil {
		t.Fatal(err)
	}
	defer stdout.Close()
	stderr, err := os.Create(filepath.Join(dir, "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer stderr.Close()
	read := func(f *os.File) string { b, _ := os.ReadFile(f.Name()); return string(b) }
	cmd := exec.Command("go", "run", ".", "dev", "--state-dir", filepath.Join(dir, "state"))
	cmd.Dir = repoRoot
	cmd.Env = processEnv(t, env)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	goExited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(goExited) }()
	child := 0
	t.Cleanup(func() {
		// Both are this test's processes: the go command, and the plaita it started.
		_ = cmd.Process.Kill()
		<-goExited
		if child != 0 && !processGone(child) {
			_ = syscall.Kill(child, syscall.SIGKILL)
		}
	})
	for deadline := time.Now().Add(5 * time.Minute); !strings.Contains(read(stdout), "open http://"); time.Sleep(100 * time.Millisecond) {
		select {
		case <-goExited:
			t.Fatalf("go run exited before plaita served\n%s\n%s", read(stdout), tail(read(stderr), 30))
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("go run . dev did not serve\n%s", tail(read(stderr), 30))
		}
	}
	if child = childOf(cmd.Process.Pid, "plaita"); child == 0 {
		t.Fatalf("no plaita process under go run (pid %d)", cmd.Process.Pid)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-goExited:
	case <-time.After(30 * time.Second):
		t.Fatal("go run did not exit on SIGTERM")
	}
	for deadline := time.Now().Add(30 * time.Second); !processGone(child); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("plaita (pid %d) still runs after its go run ended\n%s", child, tail(read(stderr), 20))
		}
	}
	// It drained, as on a SIGTERM of its own, and its port is free for the next start.
	if logs := read(stderr); len(logLines(logs, "console.stopped")) != 1 {
		t.Fatalf("plaita did not drain and stop:\n%s", tail(logs, 20))
	}
	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		t.Fatalf("the console's port after plaita ended: %v", err)
	}
	ln.Close()
}

// dev on a port another process holds says so once — which port, that it is taken, and how to
// choose another — and exits 1.
func TestNewcomerDevOnATakenPortSaysHowToChooseAnother(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	addr := ln.Addr().String()
	_, port, _ := net.SplitHostPort(addr)
	r := run(t, map[string]string{"PLAITA_CONSOLE_PORT": port, "PLAITA_CONSOLE_HOST": "127.0.0.1", "PLAITA_LOG_FORMAT": "json",
		"PLAITA_REDIS_URL": "redis://127.0.0.1:" + strconv.Itoa(redistest.FreePort(t)) + "/0"}, "dev")
	if r.code != 1 {
		t.Fatalf("exit %d, want 1\n%s", r.code, r.stderr)
	}
	var said []string
	for _, line := range strings.Split(r.stderr, "\n") {
		if strings.HasPrefix(line, "plaita:") {
			said = append(said, line)
		}
	}
	if len(said) != 1 {
		t.Fatalf("%d plaita: lines, want 1:\n%s", len(said), r.stderr)
	}
	msg := said[0]
	mustContain(t, "dev's error", msg, addr, "taken", "plaita dev --port N", "PLAITA_CONSOLE_PORT")
	for _, stutter := range []string{"console: console", "http server", "console http"} {
		if strings.Contains(msg, stutter) {
			t.Errorf("dev's error says %q: %s", stutter, msg)
		}
	}
	if strings.Count(msg, "address already in use") > 1 || strings.Count(msg, addr) > 1 {
		t.Errorf("dev's error repeats itself: %s", msg)
	}
}

// devLogin logs in to dev's console with login and password and returns the status.
func devLogin(t *testing.T, d *devProc, user, password string) int {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"login": user, "password": password})
	res, err := http.Post(d.base+"/api/login", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode
}

// A restart on a kept state says that PLAITA_CONSOLE_ADMIN_PASSWORD does not reset the admin's
// password (it makes the admin of a state without users only), and how to set one; what it
// says is true: the variable does not log in, the printed call sets the password.
func TestNewcomerDevKeptStateSaysHowToResetTheAdmin(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	d := startDevWith(t, "", nil, "--state-dir", state)
	first := regexp.MustCompile(`log in as admin with the password (\S+)`).FindStringSubmatch(d.stdout.String())
	if first == nil {
		t.Fatalf("no password printed:\n%s", d.stdout)
	}
	d.p.stop(t)

	// Without the variable.
	d = startDevWith(t, "", nil, "--state-dir", state)
	out := d.stdout.String()
	mustContain(t, "dev's lines on a kept state", out, "PLAITA_CONSOLE_ADMIN_PASSWORD does not", "curl -X PATCH "+d.base+"/api/users/")
	d.p.stop(t)

	// With it: it is not the admin's password, and dev does not say it is.
	d = startDevWith(t, "", map[string]string{"PLAITA_CONSOLE_ADMIN_PASSWORD": "not-the-kept-one"}, "--state-dir", state)
	out = d.stdout.String()
	if strings.Contains(out, "log in as admin with PLAITA_CONSOLE_ADMIN_PASSWORD") {
		t.Errorf("dev says PLAITA_CONSOLE_ADMIN_PASSWORD logs in on a kept state:\n%s", out)
	}
	mustContain(t, "dev's lines on a kept state with PLAITA_CONSOLE_ADMIN_PASSWORD", out, "PLAITA_CONSOLE_ADMIN_PASSWORD is not", "curl -X PATCH ")
	if code := devLogin(t, d, "admin", "not-the-kept-one"); code == http.StatusOK {
		t.Fatalf("PLAITA_CONSOLE_ADMIN_PASSWORD logged in: dev's line is wrong")
	}
	// The printed command, run as printed, sets the password.
	m := regexp.MustCompile(`(?m)^    (curl -X PATCH (\S+) -H "X-Admin-API-Key: \$PLAITA_CONSOLE_ADMIN_API_KEY" .*)$`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no PATCH call printed:\n%s", out)
	}
	if _, err := exec.LookPath("curl"); err == nil {
		sh := exec.Command("bash", "-c", m[1]+` --silent --output /dev/null --write-out '%{http_code}'`)
		sh.Env = processEnv(t, map[string]string{"PLAITA_CONSOLE_ADMIN_API_KEY": consoleAdminKey, "NEW_PASSWORD": "a-fresh-password"})
		if b, err := sh.Output(); err != nil || string(b) != "200" {
			t.Fatalf("the printed command: %v %s", err, b)
		}
	} else { // the same call without curl
		req, _ := http.NewRequest(http.MethodPatch, m[2], strings.NewReader(`{"password": "a-fresh-password"}`))
		req.Header.Set("X-Admin-API-Key", consoleAdminKey)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("the printed PATCH: %d %s", res.StatusCode, b)
		}
	}
	if code := devLogin(t, d, "admin", "a-fresh-password"); code != http.StatusOK {
		t.Fatalf("login with the password set by the printed call: %d", code)
	}
	d.p.stop(t)
}

// writefileFlow writes a flow with one writefile node writing name, and returns its path.
func writefileFlow(t *testing.T, name string) string {
	return writeFile(t, "write.json", `{"id": "write", "start": "w", "nodes": [
	  {"id": "w", "type": "writefile", "params": {"path": "`+name+`", "content": "hello"}, "next": "done"},
	  {"id": "done", "type": "end"}]}`)
}

// runIn runs the binary in dir with exactly env (plus PATH and HOME).
func runIn(t *testing.T, dir string, env map[string]string, args ...string) result {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = processEnv(t, env)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	code := 0
	if err := cmd.Run(); err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatal(err)
		}
		code = ee.ExitCode()
	}
	return result{code, stdout.String(), stderr.String()}
}

// `plaita run` of a flow with a writefile node says where its files go: from inside a clone of
// plaita, that is the clone's parent (the jail steps out of the engine's own checkout), and the
// file is indeed there. A flow without one says nothing of files.
func TestNewcomerRunSaysWhereFilesGo(t *testing.T) {
	t.Parallel()
	parent := t.TempDir()
	clone := filepath.Join(parent, "plaita")
	if err := os.MkdirAll(clone, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(clone, "go.mod"), []byte("module plaita\n\ngo 1.26\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := runIn(t, clone, nil, "run", writefileFlow(t, "out.txt"), "--state-dir", t.TempDir(), "--quiet")
	if r.code != 0 {
		t.Fatalf("run: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	mustContain(t, "run's summary", r.stdout, "  files:     written under "+parent+" (the working directory "+clone+
		" is inside plaita's checkout", "PLAITA_NODES_WORKSPACE_ROOT")
	if b, err := os.ReadFile(filepath.Join(parent, "out.txt")); err != nil || string(b) != "hello" {
		t.Fatalf("the file, where the summary says: %q %v", b, err)
	}

	ws := t.TempDir()
	r = runIn(t, t.TempDir(), map[string]string{"PLAITA_NODES_WORKSPACE_ROOT": ws}, "run", writefileFlow(t, "out.txt"), "--state-dir", t.TempDir(), "--quiet")
	mustContain(t, "run's summary", r.stdout, "  files:     written under "+ws+" (PLAITA_NODES_WORKSPACE_ROOT)")

	r = runIn(t, t.TempDir(), nil, "run", repoFlow(t, "hello.json"), "--state-dir", t.TempDir(), "--quiet")
	if r.code != 0 || strings.Contains(r.stdout, "files:") {
		t.Fatalf("a flow without a writefile node: exit %d\n%s", r.code, r.stdout)
	}
}

// plaita dev says in its first lines where writefile nodes write, and the console running the
// roles in local mode logs it at its start.
func TestNewcomerDevSaysWhereFilesGo(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d := startDevWith(t, dir, nil)
	m := devMode(t, d.p)
	if m["writefile_root"] != dir {
		t.Errorf("dev.mode: writefile_root %v, want %s", m["writefile_root"], dir)
	}
	mustContain(t, "dev's lines", d.stdout.String(), "  files: writefile nodes write under "+dir+" (the working directory; PLAITA_NODES_WORKSPACE_ROOT sets another)")
	if lines := logLines(d.p.stderr.String(), "console.started"); len(lines) != 1 || lines[0]["writefile_root"] != dir {
		t.Errorf("console.started: %v", lines)
	}
	d.p.stop(t)
}
