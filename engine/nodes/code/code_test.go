package code

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"plaita/engine"
	"plaita/engine/nodes/sandbox"
	"plaita/engine/state"
	"plaita/store"
	"plaita/test/testutil"
)

// ---- helpers ----

var daemonUp = WithDockerProbe(func(context.Context) error { return nil })
var daemonDown = WithDockerProbe(func(context.Context) error { return errors.New("Cannot connect to the Docker daemon") })

// host is the worker's environment as a worker passes it: its PATH, so that interpreters
// installed through shims still find themselves.
var host = sandbox.Options{HostEnv: map[string]string{"PATH": os.Getenv("PATH")}}

// with is DefaultOptions changed by edit.
func with(edit func(o *Options)) Options {
	o := DefaultOptions()
	edit(&o)
	return o
}

// jsOn allows js and every backend.
func jsOn() Options {
	return with(func(o *Options) {
		o.AllowedLanguages = []string{Python, JS}
		o.AllowedBackends = []string{Docker, Subprocess, Restricted}
	})
}

// dockerDefault is a worker whose PLAITA_CODE_BACKEND is docker (and nothing else set).
func dockerDefault() Options {
	return with(func(o *Options) { o.DefaultBackend, o.AllowedBackends = Docker, []string{Docker} })
}

func newType(t *testing.T, o Options, opts ...Option) *Type {
	t.Helper()
	typ, err := New(o, host, zerolog.Nop(), append([]Option{daemonUp}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return typ
}

func flowJSON(t *testing.T, params map[string]any) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{
		"id": "code-test", "start": "c",
		"nodes": []any{
			map[string]any{"id": "c", "type": "code", "params": params, "next": "done"},
			map[string]any{"id": "done", "type": "end", "params": map[string]any{"output": "{{ NODE.c }}"}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func parse(t *testing.T, typ *Type, params map[string]any) (*engine.Flow, error) {
	t.Helper()
	reg := engine.NewRegistry()
	reg.Register("code", typ)
	return engine.Parse(flowJSON(t, params), reg, engine.DefaultExprLimits)
}

// run parses and runs a one-code-node flow and returns the final state.
func run(t *testing.T, typ *Type, params map[string]any, tenant string, input any) *state.Execution {
	t.Helper()
	f, err := parse(t, typ, params)
	if err != nil {
		t.Fatal(err)
	}
	st, err := engine.NewExecutor(store.NewMemory()).Start(context.Background(), f, engine.StartRequest{TenantID: tenant, Input: input})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func wantOutput(t *testing.T, st *state.Execution, want any) {
	t.Helper()
	if st.Status != state.Completed {
		t.Fatalf("status %s, error %+v", st.Status, st.Error)
	}
	got, _ := json.Marshal(st.Output)
	exp, _ := json.Marshal(want)
	if !bytes.Equal(got, exp) {
		t.Fatalf("output %s, want %s", got, exp)
	}
}

func wantError(t *testing.T, st *state.Execution, parts ...string) *state.ErrorInfo {
	t.Helper()
	if st.Status != state.Error || st.Error == nil {
		t.Fatalf("status %s, output %v: want an error", st.Status, st.Output)
	}
	t.Logf("error: %s", st.Error.Message)
	for _, p := range parts {
		if !strings.Contains(st.Error.Message, p) {
			t.Fatalf("error %q does not contain %q", st.Error.Message, p)
		}
	}
	return st.Error
}

func wantProblem(t *testing.T, err error, path string, parts ...string) {
	t.Helper()
	var ve *engine.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("want a validation error, got %v", err)
	}
	for _, p := range ve.Problems {
		if p.Path != path {
			continue
		}
		ok := true
		for _, part := range parts {
			ok = ok && strings.Contains(p.Message, part)
		}
		if ok {
			return
		}
	}
	t.Fatalf("no problem at %s containing %q in %v", path, parts, ve.Problems)
}

func haveNode(t *testing.T) bool {
	t.Helper()
	_, err := exec.LookPath("node")
	if err != nil {
		t.Logf("node is not installed: the js subprocess tests assert the missing-binary error instead")
	}
	return err == nil
}

// ---- subprocess: python ----

func TestPythonSubprocessResult(t *testing.T) {
	typ := newType(t, DefaultOptions())
	st := run(t, typ, map[string]any{
		"code":  "print('noise before the result')\nresult = {'sum': sum(INPUT['xs']), 'who': INPUT['who']}",
		"input": map[string]any{"xs": []any{1, 2, 3}, "who": "{{ INPUT.name }}"},
	}, "", map[string]any{"name": "ada"})
	wantOutput(t, st, map[string]any{"sum": 6, "who": "ada"})

	// Printing the JSON itself works the same way.
	st = run(t, typ, map[string]any{"code": "import json\nprint(json.dumps([INPUT, 'x']))", "input": 7}, "", nil)
	wantOutput(t, st, []any{7, "x"})

	// result = None is a JSON null result, not "no result".
	st = run(t, typ, map[string]any{"code": "result = None"}, "default", nil)
	wantOutput(t, st, nil)
}

func TestPythonErrors(t *testing.T) {
	typ := newType(t, DefaultOptions())
	st := run(t, typ, map[string]any{"code": "print('hello, not json')"}, "", nil)
	wantError(t, st, "last stdout line is not JSON", "hello, not json")

	st = run(t, typ, map[string]any{"code": "import sys\nsys.stderr.write('x' * 10000)\n1/0"}, "", nil)
	e := wantError(t, st, "exited with status 1", "ZeroDivisionError")
	if len(e.Message) > 5000 {
		t.Fatalf("stderr not bounded: %d bytes of message", len(e.Message))
	}

	st = run(t, typ, map[string]any{"code": "x = 1"}, "", nil)
	wantError(t, st, "printed nothing")

	st = run(t, typ, map[string]any{"code": "result = float('nan')"}, "", nil)
	wantError(t, st, "exited with status 1", "ValueError")
}

// ---- subprocess: js ----

func TestJSSubprocess(t *testing.T) {
	typ := newType(t, jsOn())
	params := map[string]any{"language": "js", "sandbox_backend": "subprocess",
		"code": "console.log('noise'); return {doubled: INPUT.n * 2, t: typeof require}", "input": map[string]any{"n": "{{ INPUT.n }}"}}
	st := run(t, typ, params, "", map[string]any{"n": 21})
	if !haveNode(t) {
		wantError(t, st, "node executable", "missing", "PLAITA_SANDBOX_NODE_BIN")
		return
	}
	wantOutput(t, st, map[string]any{"doubled": 42, "t": "function"})

	st = run(t, typ, map[string]any{"language": "js", "sandbox_backend": "subprocess",
		"code": "console.log(JSON.stringify({awaited: await Promise.resolve(INPUT)}))", "input": "x"}, "", nil)
	wantOutput(t, st, map[string]any{"awaited": "x"})

	st = run(t, typ, map[string]any{"language": "js", "sandbox_backend": "subprocess", "code": "throw new Error('boom')"}, "", nil)
	wantError(t, st, "exited with status 1", "boom")
}

func TestJSSubprocessMissingBinary(t *testing.T) {
	o := jsOn()
	o.NodeBin = "/nonexistent/bin/node"
	typ := newType(t, o)
	st := run(t, typ, map[string]any{"language": "js", "sandbox_backend": "subprocess", "code": "return 1"}, "", nil)
	e := wantError(t, st, `node executable "/nonexistent/bin/node" is missing (PLAITA_SANDBOX_NODE_BIN)`)
	if !e.Permanent {
		t.Fatal("a missing interpreter is permanent")
	}
}

// ---- subprocess limits ----

func TestTimeoutKillsProcessGroup(t *testing.T) {
	typ := newType(t, DefaultOptions())
	dir := t.TempDir()
	code := `import os, subprocess, time
child = subprocess.Popen(["sleep", "300"])
with open(os.path.join(INPUT["dir"], "pid"), "w") as f:
    f.write(str(child.pid))
time.sleep(300)
`
	// The timeout leaves the interpreter time to start its child and write the pid on a loaded
	// machine (the pid file is how the test finds the child it then waits to see gone).
	start := time.Now()
	st := run(t, typ, map[string]any{"code": code, "input": map[string]any{"dir": dir}, "timeout": 4}, "", nil)
	wantError(t, st, "timed out after 4s", "process group was killed")
	if d := time.Since(start); d > 15*time.Second {
		t.Fatalf("the node took %s", d)
	}
	testutil.WaitGone(t, testutil.ReadPid(t, filepath.Join(dir, "pid")))
}

func TestExitKillsBackgroundChildren(t *testing.T) {
	typ := newType(t, DefaultOptions())
	dir := t.TempDir()
	code := `import os, subprocess
child = subprocess.Popen(["sleep", "300"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
with open(os.path.join(INPUT["dir"], "pid"), "w") as f:
    f.write(str(child.pid))
result = "left a child behind"
`
	st := run(t, typ, map[string]any{"code": code, "input": map[string]any{"dir": dir}}, "", nil)
	wantOutput(t, st, "left a child behind")
	testutil.WaitGone(t, testutil.ReadPid(t, filepath.Join(dir, "pid")))
}

// launcherVars are set by the interpreter or its launcher (pyenv shims, bash, python's locale
// coercion), not inherited from the worker.
func launcherVar(k string) bool {
	switch k {
	case "PWD", "SHLVL", "_", "LC_CTYPE", "OLDPWD":
		return true
	}
	return strings.HasPrefix(k, "PYENV_") || strings.HasPrefix(k, "_PYENV_")
}

func checkEnv(t *testing.T, env map[string]any) {
	t.Helper()
	for k := range env {
		up := strings.ToUpper(k)
		for _, bad := range []string{"PLAITA_", "REDIS", "KEY", "SECRET", "TOKEN", "AWS_", "PASSWORD"} {
			if strings.Contains(up, bad) {
				t.Errorf("variable %s leaked into the sandbox", k)
			}
		}
		switch k {
		case "PATH", "HOME", "LANG", "LC_ALL", "TZ":
		default:
			if !launcherVar(k) {
				t.Errorf("variable %s is not on the allow-list", k)
			}
		}
	}
	home, _ := env["HOME"].(string)
	if home == "" || home == os.Getenv("HOME") || !strings.Contains(home, "plaita-sandbox-") {
		t.Errorf("HOME is %q, want the temporary working directory", home)
	}
}

func TestEnvironmentAllowList(t *testing.T) {
	// The worker's whole environment, secrets included: only the allow-list gets through.
	leaky := sandbox.Options{HostEnv: map[string]string{"PATH": os.Getenv("PATH"), "HOME": os.Getenv("HOME"), "TZ": "UTC",
		"PLAITA_REDIS_URL": "redis://:secret@redis:6379/0", "REDIS_PASSWORD": "secret", "MY_API_KEY": "key",
		"AWS_SECRET_ACCESS_KEY": "aws", "GITHUB_TOKEN": "tok"}}
	typ, err := New(jsOn(), leaky, zerolog.Nop(), daemonUp)
	if err != nil {
		t.Fatal(err)
	}
	st := run(t, typ, map[string]any{"code": "import os\nresult = {'env': dict(os.environ), 'cwd': os.getcwd()}"}, "", nil)
	if st.Status != state.Completed {
		t.Fatalf("%+v", st.Error)
	}
	out := st.Output.(map[string]any)
	env := out["env"].(map[string]any)
	checkEnv(t, env)
	if out["cwd"] != env["HOME"] {
		t.Errorf("cwd %v is not HOME %v", out["cwd"], env["HOME"])
	}
	if env["TZ"] != "UTC" {
		t.Errorf("TZ not passed: %v", env["TZ"])
	}
	if home, _ := env["HOME"].(string); home != "" {
		if _, err := os.Stat(home); !os.IsNotExist(err) {
			t.Errorf("the working directory %s was not removed", home)
		}
	}

	if !haveNode(t) {
		return
	}
	st = run(t, typ, map[string]any{"language": "js", "sandbox_backend": "subprocess", "code": "return process.env"}, "", nil)
	if st.Status != state.Completed {
		t.Fatalf("%+v", st.Error)
	}
	env = st.Output.(map[string]any)
	checkEnv(t, env)
	for k := range env {
		if launcherVar(k) {
			t.Errorf("node got %s", k)
		}
	}
}

func TestMemoryLimit(t *testing.T) {
	typ := newType(t, with(func(o *Options) { o.MemoryMB, o.AllowedLanguages = 64, []string{Python, JS} }))
	st := run(t, typ, map[string]any{"code": "import resource\nresult = resource.getrlimit(resource.RLIMIT_AS)"}, "", nil)
	wantOutput(t, st, []any{64 << 20, 64 << 20}) // soft and hard: the code cannot raise it

	st = run(t, typ, map[string]any{"code": "b = bytearray(500 * 1024 * 1024)\nresult = len(b)"}, "", nil)
	wantError(t, st, "exited with status 1", "MemoryError")

	if !haveNode(t) {
		return
	}
	st = run(t, typ, map[string]any{"language": "js", "sandbox_backend": "subprocess", "code": "return 'small'"}, "", nil)
	wantOutput(t, st, "small")
	st = run(t, typ, map[string]any{"language": "js", "sandbox_backend": "subprocess",
		"code": "const a = []; for (let i = 0; i < 500; i++) a.push(new Array(1 << 17).fill(i + 0.5)); return a.length"}, "", nil)
	wantError(t, st, "code node (js, subprocess)")
	st = run(t, typ, map[string]any{"language": "js", "sandbox_backend": "subprocess",
		"code": "const b = new Float64Array(500 * 1024 * 1024 / 8).fill(1); return b.length"}, "", nil)
	wantError(t, st, "code node (js, subprocess)")
}

func TestNonDefaultTenantRefusedBeforeSpawn(t *testing.T) {
	typ := newType(t, DefaultOptions())
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	params := map[string]any{"code": "open(INPUT, 'w').write('x')\nresult = 'ran'", "input": marker}
	st := run(t, typ, params, "acme", nil)
	e := wantError(t, st, `tenant "acme"`, "subprocess is not a tenant isolation boundary", "use sandbox_backend docker")
	if !e.Permanent {
		t.Error("the refusal is permanent")
	}
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Fatal("the code ran for a refused tenant")
	}
	for _, tenant := range []string{"", "default"} {
		wantOutput(t, run(t, typ, params, tenant, nil), "ran")
	}
}

// ---- docker ----

func TestDockerArgs(t *testing.T) {
	c := DockerConfig{Bin: "docker", Image: "python:3.12-slim", NodeImage: "node:20-alpine", MemoryMB: 128, CPUs: "0.5", PidsLimit: 64}
	want := []string{"run", "--rm", "-i", "--name", "plaita-code-x", "--network", "none", "--read-only", "--tmpfs", "/tmp",
		"--memory", "128m", "--cpus", "0.5", "--pids-limit", "64", "--security-opt", "no-new-privileges", "--cap-drop", "ALL",
		"python:3.12-slim", "python3", "-I", "-c", pythonWrapper}
	if got := DockerArgs(c, Python, "plaita-code-x"); !reflect.DeepEqual(got, want) {
		t.Fatalf("python args\n got %q\nwant %q", got, want)
	}
	c.User, c.MemoryMB = "65534:65534", 0
	want = []string{"run", "--rm", "-i", "--name", "n", "--network", "none", "--read-only", "--tmpfs", "/tmp",
		"--memory", "0m", "--cpus", "0.5", "--pids-limit", "64", "--user", "65534:65534", "--security-opt", "no-new-privileges", "--cap-drop", "ALL",
		"node:20-alpine", "node", "-e", jsWrapper}
	if got := DockerArgs(c, JS, "n"); !reflect.DeepEqual(got, want) {
		t.Fatalf("js args\n got %q\nwant %q", got, want)
	}
}

func TestDockerConfigFromOptions(t *testing.T) {
	typ := newType(t, with(func(o *Options) {
		o.DockerImage, o.DockerMemoryMB, o.DockerCPUs, o.DockerUser, o.DockerTimeout = "reg/py:1", 256, "1.5", "1000", 7*time.Second
	}))
	got := DockerArgs(typ.docker, Python, "n")
	want := []string{"run", "--rm", "-i", "--name", "n", "--network", "none", "--read-only", "--tmpfs", "/tmp",
		"--memory", "256m", "--cpus", "1.5", "--pids-limit", "64", "--user", "1000", "--security-opt", "no-new-privileges", "--cap-drop", "ALL",
		"reg/py:1", "python3", "-I", "-c", pythonWrapper}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q\nwant %q", got, want)
	}
	if typ.docker.Timeout != 7*time.Second {
		t.Fatalf("timeout %s", typ.docker.Timeout)
	}
}

// fakeDocker writes a docker client that records its calls in dir/log and its stdin in
// dir/stdin; `run` answers with answer (a shell snippet).
func fakeDocker(t *testing.T, answer string) (bin, dir string) {
	t.Helper()
	dir = t.TempDir()
	bin = filepath.Join(dir, "docker")
	script := "#!/bin/sh\nlog=" + dir + "/log\n" +
		`printf '%s\n' "$*" >> "$log.full"; printf '%s\n' "$*" | head -c 200 >> "$log"; echo >> "$log"
case "$1" in
run) cat > ` + dir + `/stdin; ` + answer + ` ;;
esac
`
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin, dir
}

func TestDockerRunThroughClient(t *testing.T) {
	bin, dir := fakeDocker(t, `echo '{"from": "container"}'`)
	typ := newType(t, dockerDefault(), WithDockerBinary(bin))
	secret := "print('code goes through stdin')"
	st := run(t, typ, map[string]any{"code": secret, "input": map[string]any{"k": "v"}}, "acme", nil)
	wantOutput(t, st, map[string]any{"from": "container"})
	stdin, _ := os.ReadFile(filepath.Join(dir, "stdin"))
	var req request
	if err := json.Unmarshal(stdin, &req); err != nil || req.Code != secret || !reflect.DeepEqual(req.Input, map[string]any{"k": "v"}) {
		t.Fatalf("stdin %s (%v)", stdin, err)
	}
	full, _ := os.ReadFile(filepath.Join(dir, "log.full"))
	if len(full) == 0 || strings.Contains(string(full), "code goes through stdin") {
		t.Fatalf("the code is on the command line (or no log): %q", full)
	}
	log, _ := os.ReadFile(filepath.Join(dir, "log"))
	if !strings.HasPrefix(string(log), "run --rm -i --name plaita-code-") {
		t.Fatalf("log %q", log)
	}
}

func TestDockerTimeoutKillsContainer(t *testing.T) {
	bin, dir := fakeDocker(t, `sleep 300`)
	typ := newType(t, dockerDefault(), WithDockerBinary(bin))
	st := run(t, typ, map[string]any{"code": "while True: pass", "timeout": 1}, "", nil)
	wantError(t, st, "code node (python, docker): timed out after 1s")
	log, _ := os.ReadFile(filepath.Join(dir, "log"))
	lines := strings.Split(strings.TrimSpace(string(log)), "\n")
	name := strings.Fields(lines[0])[4]
	if !strings.HasPrefix(name, "plaita-code-") || !strings.Contains(string(log), "\nkill "+name+"\n") {
		t.Fatalf("no docker kill of %s in %q", name, log)
	}
}

func TestDockerRegistrationFailsClosed(t *testing.T) {
	var logs bytes.Buffer
	log := zerolog.New(&logs)
	cases := []struct {
		name string
		o    Options
	}{
		{"no fallback", dockerDefault()},
		{"fallback but subprocess not allowed", with(func(o *Options) {
			o.DefaultBackend, o.AllowedBackends, o.AllowSubprocessFallback = Docker, []string{Docker}, true
		})},
		{"subprocess allowed but no fallback", with(func(o *Options) { o.DefaultBackend = Docker })},
	}
	for _, tc := range cases {
		logs.Reset()
		typ, err := New(tc.o, host, log, daemonDown)
		if typ != nil || !errors.Is(err, ErrBackendUnavailable) {
			t.Fatalf("%s: got %v, %v", tc.name, typ, err)
		}
		if !strings.Contains(logs.String(), `"event":"code_node.registration_refused"`) || !strings.Contains(logs.String(), `"level":"error"`) {
			t.Fatalf("%s: log %s", tc.name, logs.String())
		}
		if strings.Contains(logs.String(), "subprocess_fallback") {
			t.Fatalf("%s: fell back", tc.name)
		}
	}

	// Both switches: subprocess becomes the default, loudly.
	logs.Reset()
	typ, err := New(with(func(o *Options) { o.DefaultBackend, o.AllowSubprocessFallback = Docker, true }), host, log, daemonDown)
	if err != nil {
		t.Fatal(err)
	}
	if typ.DefaultBackend() != Subprocess || !typ.FellBack() {
		t.Fatalf("default %s", typ.DefaultBackend())
	}
	var warned bool
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var m map[string]any
		_ = json.Unmarshal([]byte(line), &m)
		if m["event"] == "code_node.subprocess_fallback" && m["level"] == "warn" {
			warned = true
		}
	}
	if !warned {
		t.Fatalf("no WARNING event=code_node.subprocess_fallback in %s", logs.String())
	}
	wantOutput(t, run(t, typ, map[string]any{"code": "result = 1"}, "", nil), 1)

	// A daemon that answers: docker stays the default.
	typ, err = New(dockerDefault(), host, zerolog.Nop(), daemonUp)
	if err != nil || typ.DefaultBackend() != Docker {
		t.Fatal(typ, err)
	}
	// The default subprocess backend is not probed at all.
	if _, err := New(DefaultOptions(), host, zerolog.Nop(), daemonDown); err != nil {
		t.Fatal(err)
	}
}

func TestDockerRealProbe(t *testing.T) {
	// A client that does not exist: the real probe fails closed.
	_, err := New(dockerDefault(), host, zerolog.Nop(), WithDockerBinary("/nonexistent/docker"))
	if !errors.Is(err, ErrBackendUnavailable) {
		t.Fatalf("got %v", err)
	}
	// This machine's docker, if its daemon is down (the usual case here): refused as well.
	if exec.Command("docker", "version", "--format", "{{.Server.Version}}").Run() == nil {
		t.Log("a docker daemon answers on this machine: the refusal is covered by the injected probes only")
		return
	}
	if _, err := New(dockerDefault(), host, zerolog.Nop()); !errors.Is(err, ErrBackendUnavailable) {
		t.Fatalf("got %v", err)
	}
	if _, err := exec.LookPath("docker"); err != nil {
		return
	}
	// docker is allow-listed by default, so a flow may name it; without a daemon the run fails.
	typ := newType(t, DefaultOptions())
	st := run(t, typ, map[string]any{"code": "result = 1", "sandbox_backend": "docker"}, "", nil)
	wantError(t, st, "code node (python, docker)")
}

// ---- validation ----

func TestValidationAllowLists(t *testing.T) {
	typ := newType(t, DefaultOptions()) // worker defaults: python only; docker ∪ subprocess
	_, err := parse(t, typ, map[string]any{"language": "js", "code": "return 1"})
	wantProblem(t, err, "nodes[0].params.language", `language "js" is not allowed by the operator`, "PLAITA_SANDBOX_ALLOWED_LANGUAGES")

	_, err = parse(t, typ, map[string]any{"sandbox_backend": "restricted", "code": "x"})
	wantProblem(t, err, "nodes[0].params.sandbox_backend", `sandbox_backend "restricted" is not allowed by the operator`, "PLAITA_SANDBOX_ALLOWED_BACKENDS")

	_, err = parse(t, typ, map[string]any{"sandbox_backend": "unsafe", "code": "x"})
	wantProblem(t, err, "nodes[0].params.sandbox_backend", `"unsafe": use docker, subprocess or restricted`)

	_, err = parse(t, typ, map[string]any{"language": "ruby", "code": "x"})
	wantProblem(t, err, "nodes[0].params.language", `"ruby": use python or js`)

	_, err = parse(t, typ, map[string]any{})
	wantProblem(t, err, "nodes[0].params.code", "is required")

	_, err = parse(t, typ, map[string]any{"code": "x", "timeout": 11})
	wantProblem(t, err, "nodes[0].params.timeout", "over the subprocess backend's limit", "PLAITA_SANDBOX_TIMEOUT")

	_, err = parse(t, typ, map[string]any{"code": "x", "timeout": 31, "sandbox_backend": "docker"})
	wantProblem(t, err, "nodes[0].params.timeout", "PLAITA_SANDBOX_DOCKER_TIMEOUT")

	_, err = parse(t, typ, map[string]any{"code": "x", "timeout": 0})
	wantProblem(t, err, "nodes[0].params.timeout", "more than 0")
	_, err = parse(t, typ, map[string]any{"code": "x", "timeout": "soon"})
	wantProblem(t, err, "nodes[0].params.timeout", "must be a number of seconds")
	if n := len(err.(*engine.ValidationError).Problems); n != 1 {
		t.Errorf("%d problems for one bad timeout: %v", n, err)
	}

	_, err = parse(t, typ, map[string]any{"code": "x", "input": "{{ INPUT. }}"})
	wantProblem(t, err, "nodes[0].params.input")

	_, err = parse(t, typ, map[string]any{"code": "x", "bogus": 1})
	wantProblem(t, err, "nodes[0].params.bogus")

	// python has no restricted implementation, explicit or by default.
	all := newType(t, jsOn())
	_, err = parse(t, all, map[string]any{"sandbox_backend": "restricted", "code": "x"})
	wantProblem(t, err, "nodes[0].params.sandbox_backend", "restricted backend has no python implementation")
	def := newType(t, with(func(o *Options) { o.DefaultBackend, o.AllowedBackends = Restricted, []string{Docker, Restricted} }))
	_, err = parse(t, def, map[string]any{"code": "x"})
	wantProblem(t, err, "nodes[0].params.language", "restricted (PLAITA_CODE_BACKEND) has no python implementation")

	// Allowed combinations pass.
	for _, p := range []map[string]any{
		{"code": "x"},
		{"code": "x", "sandbox_backend": "docker", "timeout": 30},
		{"code": "x", "language": "js", "sandbox_backend": "restricted", "timeout": 0.5},
		{"code": "x", "language": "js", "sandbox_backend": "subprocess"},
	} {
		if _, err := parse(t, all, p); err != nil {
			t.Errorf("%v: %v", p, err)
		}
	}
	// The effective default backend is always allowed.
	if _, err := parse(t, newType(t, with(func(o *Options) { o.AllowedBackends = []string{Docker} })), map[string]any{"code": "x", "sandbox_backend": "subprocess"}); err != nil {
		t.Error(err)
	}
}

// ---- restricted ----

func TestRestrictedJS(t *testing.T) {
	typ := newType(t, jsOn())
	js := func(code string, extra ...any) map[string]any {
		p := map[string]any{"language": "js", "sandbox_backend": "restricted", "code": code}
		for i := 0; i+1 < len(extra); i += 2 {
			p[extra[i].(string)] = extra[i+1]
		}
		return p
	}
	st := run(t, typ, js("return {sum: INPUT.xs.reduce((a, b) => a + b, 0), who: INPUT.who}",
		"input", map[string]any{"xs": []any{1, 2, 3}, "who": "{{ INPUT.name }}"}), "acme", map[string]any{"name": "ada"})
	wantOutput(t, st, map[string]any{"sum": 6, "who": "ada"})

	st = run(t, typ, js("console.log('noise'); console.log(JSON.stringify({last: true}))"), "", nil)
	wantOutput(t, st, map[string]any{"last": true})

	st = run(t, typ, js("return await Promise.resolve([1, null])"), "", nil)
	wantOutput(t, st, []any{1, nil})

	st = run(t, typ, js(`return [typeof require, typeof process, typeof setTimeout, typeof fetch, typeof Deno, typeof globalThis.require]`), "", nil)
	wantOutput(t, st, []any{"undefined", "undefined", "undefined", "undefined", "undefined", "undefined"})

	st = run(t, typ, js("console.error('about to fail'); throw new Error('boom')"), "", nil)
	wantError(t, st, "code node (js, restricted)", "boom", "about to fail")

	st = run(t, typ, js("return () => 1"), "", nil)
	wantError(t, st, "cannot be encoded as JSON")

	st = run(t, typ, js("return new Promise(() => {})"), "", nil)
	wantError(t, st, "never settled")

	start := time.Now()
	st = run(t, typ, js("for (;;) {}", "timeout", 0.5), "", nil)
	wantError(t, st, "code node (js, restricted): timed out after 500ms")
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the interrupt took %s", d)
	}

	st = run(t, typ, js("function f() { return f() + 1 } return f()"), "", nil)
	wantError(t, st, "code node (js, restricted): maximum call stack size (10000) exceeded")
	st = run(t, typ, js("function f(n) { if (n === 0) throw new Error('deep'); return f(n - 1) } return f(5000)"), "", nil)
	if e := wantError(t, st, "Error: deep"); len(e.Message) > 5000 {
		t.Fatalf("unbounded message: %d bytes", len(e.Message))
	}

	st = run(t, typ, js("for (;;) console.log('spam spam spam')", "timeout", 5), "", nil)
	wantError(t, st, "more than 1048576 bytes")
}

func TestRestrictedCancel(t *testing.T) {
	typ := newType(t, jsOn())
	f, err := parse(t, typ, map[string]any{"language": "js", "sandbox_backend": "restricted", "code": "for (;;) {}"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = engine.NewExecutor(store.NewMemory()).Start(ctx, f, engine.StartRequest{})
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 5*time.Second {
		t.Fatalf("got %v after %s", err, time.Since(start))
	}
}

func TestParseResult(t *testing.T) {
	for in, want := range map[string]any{"1\n2\n\n  \n": 2.0, "x\r\n{\"a\":1}\r\n": map[string]any{"a": 1.0}, "null": nil} {
		got, err := parseResult([]byte(in))
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%q: %v %v", in, got, err)
		}
	}
	if _, err := parseResult([]byte("\n \n")); err == nil {
		t.Error("empty output is an error")
	}
}

// ---- options ----

func TestZeroOptionsTakeTheDefaults(t *testing.T) {
	effective := func(typ *Type) []any {
		return []any{typ.languages, typ.backends, typ.defaultBackend, typ.subprocTimeout, typ.memoryMB, typ.nodeBin, typ.docker}
	}
	// DockerMemoryMB is the one field without a default for zero (see below).
	zero, def := newType(t, Options{DockerMemoryMB: DefaultDockerMemoryMB}), newType(t, DefaultOptions())
	if got, want := effective(zero), effective(def); !reflect.DeepEqual(got, want) {
		t.Errorf("Options{} runs with\n %v\nDefaultOptions() with\n %v", got, want)
	}
	if def.docker.Bin != "docker" || def.docker.PidsLimit != DefaultPidsLimit {
		t.Errorf("docker client %q, pids limit %d", def.docker.Bin, def.docker.PidsLimit)
	}
	// What has no default is taken as it is: docker's own reading of --memory 0, no RLIMIT_AS.
	typ := newType(t, Options{DockerMemoryMB: 0, MemoryMB: 0})
	if typ.docker.MemoryMB != 0 || typ.memoryMB != 0 {
		t.Errorf("docker memory %d, subprocess memory %d", typ.docker.MemoryMB, typ.memoryMB)
	}
}

func TestNewKeepsNoAliasOfTheOptions(t *testing.T) {
	o := jsOn()
	typ := newType(t, o)
	o.AllowedLanguages[1], o.AllowedBackends[2] = "ruby", "ssh"
	if !reflect.DeepEqual(typ.AllowedLanguages(), []string{Python, JS}) || !reflect.DeepEqual(typ.AllowedBackends(), []string{Docker, Subprocess, Restricted}) {
		t.Errorf("the allow-lists follow the caller's slices: %v %v", typ.AllowedLanguages(), typ.AllowedBackends())
	}
}

func TestHostVariablesCoverTheDockerClient(t *testing.T) {
	all := map[string]string{}
	for _, k := range HostVariables() {
		all[k] = "v-" + k
	}
	all["PLAITA_REDIS_URL"], all["AWS_SECRET_ACCESS_KEY"] = "redis://:s@r/0", "aws"
	typ, err := New(DefaultOptions(), sandbox.Options{HostEnv: all}, zerolog.Nop(), daemonUp)
	if err != nil {
		t.Fatal(err)
	}
	got := typ.dockerClientEnv()
	var names []string
	for _, kv := range got {
		k, v, _ := strings.Cut(kv, "=")
		names = append(names, k)
		if v != "v-"+k {
			t.Errorf("%s = %q, want the host's value", k, v)
		}
	}
	if want := dockerClientVariables(); !reflect.DeepEqual(names, want) {
		t.Errorf("docker client environment %v, want %v", names, want)
	}
	for _, k := range sandbox.HostVariables() {
		if !slices.Contains(HostVariables(), k) {
			t.Errorf("HostVariables misses the sandbox's %s", k)
		}
	}
}

func TestIsolationFailureIsPermanent(t *testing.T) {
	// A run the sandbox refused for want of isolation fails the same way on every retry.
	refused := fmt.Errorf("code node (python, subprocess): cannot start python3: %w",
		&sandbox.IsolationError{Step: "creating a user namespace", Fix: "run as non-root", Err: syscall.EPERM})
	if err := startFailure(refused); !engine.IsPermanent(err) || !errors.Is(err, sandbox.ErrIsolationUnavailable) {
		t.Errorf("isolation refused: %v (permanent %v)", err, engine.IsPermanent(err))
	}
	other := fmt.Errorf("code node (python, subprocess): cannot start python3: %w", syscall.EAGAIN)
	if err := startFailure(other); engine.IsPermanent(err) {
		t.Errorf("a failed fork is retryable: %v", err)
	}
}

// A run that a container limit ended is named after that limit (test/stack runs them for real).
func TestContainerLimitNamesTheLimit(t *testing.T) {
	d := DockerConfig{MemoryMB: 128, PidsLimit: 64}
	cases := []struct {
		name string
		res  sandbox.Result
		want error
	}{
		{"oom", sandbox.Result{ExitCode: 137}, ErrContainerMemory},
		{"python fork refused", sandbox.Result{ExitCode: 1, Stderr: "BlockingIOError: [Errno 11] Resource temporarily unavailable"}, ErrContainerProcesses},
		{"node spawn refused", sandbox.Result{ExitCode: 1, Stderr: "Error: spawn EAGAIN"}, ErrContainerProcesses},
		{"both: a python fork bomb", sandbox.Result{ExitCode: 137, Stderr: "BlockingIOError: [Errno 11] Resource temporarily unavailable"}, ErrContainerProcesses},
		{"timed out", sandbox.Result{ExitCode: 137, TimedOut: true}, nil},
		{"cancelled", sandbox.Result{ExitCode: 137, Cancelled: true}, nil},
		{"a plain failure", sandbox.Result{ExitCode: 1, Stderr: "NameError: name 'x' is not defined"}, nil},
		{"success", sandbox.Result{}, nil},
	}
	for _, tc := range cases {
		err := containerLimit(d, &tc.res)
		if (tc.want == nil) != (err == nil) || (tc.want != nil && !errors.Is(err, tc.want)) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if err := containerLimit(d, &sandbox.Result{ExitCode: 137}); !strings.Contains(err.Error(), "128 MiB (PLAITA_SANDBOX_DOCKER_MEMORY_MB)") {
		t.Errorf("the memory error does not say the limit: %v", err)
	}
	if err := containerLimit(d, &sandbox.Result{ExitCode: 137, Stderr: "EAGAIN"}); !errors.Is(err, ErrContainerMemory) || !errors.Is(err, ErrContainerProcesses) {
		t.Errorf("a run that met both limits names one: %v", err)
	}
}
