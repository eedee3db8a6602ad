//go:build e2e

package stack

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"plaita/engine"
	"plaita/engine/nodes/code"
	"plaita/engine/nodes/sandbox"
	"plaita/engine/state"
	"plaita/store"
)

// codeContainers lists the code node's containers (running or not): docker run --rm removes
// each when it ends, and a killed one is removed by name.
func codeContainers(t *testing.T) []string {
	t.Helper()
	return strings.Fields(docker(t, 30*time.Second, "ps", "-a", "-q", "--filter", "name=plaita-code-"))
}

// dockerType is the code node of a worker whose PLAITA_CODE_BACKEND is docker, with python and
// js allowed and every docker setting at its default (the images python:3.12-slim and
// node:20-alpine; deploy/local-docker.sh makes stand-ins where no registry is reachable).
func dockerType(t *testing.T) *code.Type {
	t.Helper()
	o := code.DefaultOptions()
	o.DefaultBackend, o.AllowedBackends = code.Docker, []string{code.Docker}
	o.AllowedLanguages = []string{code.Python, code.JS}
	typ, err := code.New(o, sandbox.Options{HostEnv: map[string]string{"PATH": os.Getenv("PATH"), "HOME": os.Getenv("HOME")}}, zerolog.Nop())
	if err != nil {
		t.Fatalf("the docker backend: %v", err)
	}
	return typ
}

// runCode runs a flow of one code node with params and returns the final state.
func runCode(t *testing.T, typ *code.Type, params map[string]any, input any) *state.Execution {
	t.Helper()
	def, err := json.Marshal(map[string]any{
		"id": "docker-backend", "start": "c",
		"nodes": []any{
			map[string]any{"id": "c", "type": "code", "params": params, "next": "done"},
			map[string]any{"id": "done", "type": "end", "params": map[string]any{"output": "{{ NODE.c }}"}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	reg := engine.NewRegistry()
	reg.Register("code", typ)
	f, err := engine.Parse(def, reg, engine.DefaultExprLimits)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	st, err := engine.NewExecutor(store.NewMemory()).Start(context.Background(), f, engine.StartRequest{Input: input})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func output(t *testing.T, st *state.Execution) map[string]any {
	t.Helper()
	if st.Status != state.Completed {
		t.Fatalf("status %s, error %+v", st.Status, st.Error)
	}
	out, ok := st.Output.(map[string]any)
	if !ok {
		t.Fatalf("output %#v", st.Output)
	}
	return out
}

func nodeError(t *testing.T, st *state.Execution, parts ...string) string {
	t.Helper()
	if st.Status != state.Error || st.Error == nil {
		t.Fatalf("status %s, output %v: want the node to fail", st.Status, st.Output)
	}
	for _, p := range parts {
		if !strings.Contains(st.Error.Message, p) {
			t.Fatalf("error %q does not say %q", st.Error.Message, p)
		}
	}
	return st.Error.Message
}

// TestCodeNodeDockerBackend runs the code node's docker backend against the real daemon: each
// of its promises (docs/flows.md "What each code backend isolates") is a container's behaviour.
func TestCodeNodeDockerBackend(t *testing.T) {
	requireDocker(t)
	t.Parallel()
	for _, image := range []string{code.DefaultDockerImage, code.DefaultDockerNodeImage} {
		if _, err := dockerErr(30*time.Second, "image", "inspect", image); err != nil {
			t.Fatalf("no image %s: `bash deploy/local-docker.sh` makes a stand-in where no registry is reachable", image)
		}
	}
	typ := dockerType(t)
	before := codeContainers(t)
	if len(before) != 0 {
		t.Fatalf("code containers left by someone else: %v", before)
	}

	t.Run("python", func(t *testing.T) {
		st := runCode(t, typ, map[string]any{"language": "python", "input": "{{ INPUT }}",
			"code": "import sys\nresult = {'sum': INPUT['a'] + INPUT['b'], 'major': sys.version_info[0]}"}, map[string]any{"a": 2, "b": 40})
		if out := output(t, st); out["sum"] != float64(42) || out["major"] != float64(3) {
			t.Fatalf("output %v", out)
		}
	})
	t.Run("js", func(t *testing.T) {
		st := runCode(t, typ, map[string]any{"language": "js", "input": "{{ INPUT }}",
			"code": "return {sum: INPUT.a + INPUT.b, node: typeof process.versions.node}"}, map[string]any{"a": 2, "b": 40})
		if out := output(t, st); out["sum"] != float64(42) || out["node"] != "string" {
			t.Fatalf("output %v", out)
		}
	})
	t.Run("the network is refused", func(t *testing.T) {
		// An address outside (a public resolver), the host's bridge: no route to either, and no
		// interface but the loopback.
		st := runCode(t, typ, map[string]any{"language": "python", "code": `import os, socket
errors = {}
for host in ("1.1.1.1", "172.17.0.1"):
    try:
        socket.create_connection((host, 53), timeout=3).close()
        errors[host] = "connected"
    except OSError as e:
        errors[host] = e.strerror or str(e)
result = {"errors": errors, "interfaces": sorted(os.listdir("/sys/class/net"))}`}, nil)
		out := output(t, st)
		for host, e := range out["errors"].(map[string]any) {
			if !strings.Contains(e.(string), "unreachable") {
				t.Errorf("a connection to %s: %q, want the network unreachable", host, e)
			}
		}
		if got, _ := json.Marshal(out["interfaces"]); string(got) != `["lo"]` {
			t.Errorf("interfaces %s, want only lo", got)
		}
	})
	t.Run("the root filesystem is read-only", func(t *testing.T) {
		st := runCode(t, typ, map[string]any{"language": "python", "code": `import errno
res = {}
for path in ("/usr/local/bin/planted", "/etc/planted", "/planted"):
    try:
        open(path, "w").write("x")
        res[path] = "written"
    except OSError as e:
        res[path] = errno.errorcode.get(e.errno, str(e.errno))
open("/tmp/scratch", "w").write("tmp is a tmpfs")
res["/tmp"] = open("/tmp/scratch").read()
result = res`}, nil)
		out := output(t, st)
		for _, p := range []string{"/usr/local/bin/planted", "/etc/planted", "/planted"} {
			if out[p] != "EROFS" {
				t.Errorf("writing %s: %v, want EROFS", p, out[p])
			}
		}
		if out["/tmp"] != "tmp is a tmpfs" {
			t.Errorf("/tmp: %v", out["/tmp"])
		}
	})
	t.Run("a 1 GB allocation meets the memory limit", func(t *testing.T) {
		st := runCode(t, typ, map[string]any{"language": "python", "code": "b = bytearray(1 << 30)\nresult = len(b)"}, nil)
		msg := nodeError(t, st, "code node (python, docker): the container reached its memory limit of 128 MiB", "exit 137")
		t.Log(msg)
	})
	t.Run("a fork bomb meets the process limit", func(t *testing.T) {
		st := runCode(t, typ, map[string]any{"language": "python", "code": "import os\nwhile True:\n    os.fork()"}, nil)
		msg := nodeError(t, st, "code node (python, docker): the container reached its process limit of 64")
		t.Log(msg[:min(len(msg), 300)])
	})
	t.Run("js spawning without end meets the process limit", func(t *testing.T) {
		st := runCode(t, typ, map[string]any{"language": "js", "code": `const { spawn } = require("child_process");
for (;;) { const c = spawn("sleep", ["30"]); await new Promise((ok, fail) => { c.on("spawn", ok); c.on("error", fail); }); }`}, nil)
		msg := nodeError(t, st, "code node (js, docker): the container reached its process limit of 64")
		t.Log(msg[:min(len(msg), 300)])
	})
	t.Run("a timeout kills the container", func(t *testing.T) {
		start := time.Now()
		st := runCode(t, typ, map[string]any{"language": "python", "timeout": 3, "code": "import time\ntime.sleep(120)"}, nil)
		nodeError(t, st, "code node (python, docker): timed out after 3s")
		if took := time.Since(start); took > 60*time.Second {
			t.Fatalf("the node ended after %s", took)
		}
		// The client was killed at the deadline; the container is killed and removed by name.
		waitUntil(t, "the timed-out container to be gone", 30*time.Second, func() bool { return len(codeContainers(t)) == 0 })
	})
	t.Run("nothing of the worker inside", func(t *testing.T) { workerEnvironmentStaysOut(t) })

	waitUntil(t, "every code container to be removed", 30*time.Second, func() bool { return len(codeContainers(t)) == 0 })
}

// workerEnvironmentStaysOut runs python and js code nodes on the docker backend through the
// plaita binary (`plaita run`, the worker's configuration and environment snapshot): the
// container sees none of the process's variables and none of its files.
func workerEnvironmentStaysOut(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "plaita")
	if out, err := exec.Command("go", "build", "-o", bin, repo).CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	marker := filepath.Join(dir, "worker-file.txt")
	if err := os.WriteFile(marker, []byte("the worker's"), 0o600); err != nil {
		t.Fatal(err)
	}
	flow := filepath.Join(dir, "inside.json")
	def := `{"id":"inside","start":"py","nodes":[
	  {"id":"py","type":"code","params":{"language":"python","input":"{{ INPUT }}","code":"import os\nresult = {'env': dict(os.environ), 'files': {p: os.path.exists(p) for p in INPUT['paths']}, 'uid': os.getuid()}"},"next":"js"},
	  {"id":"js","type":"code","params":{"language":"js","input":"{{ INPUT }}","code":"const fs = require('fs'); return {env: process.env, files: Object.fromEntries(INPUT.paths.map(p => [p, fs.existsSync(p)]))}"},"next":"done"},
	  {"id":"done","type":"end","params":{"output":{"py":"{{ NODE.py }}","js":"{{ NODE.js }}"}}}]}`
	if err := os.WriteFile(flow, []byte(def), 0o600); err != nil {
		t.Fatal(err)
	}
	input, _ := json.Marshal(map[string]any{"paths": []string{marker, dir, repo, filepath.Join(repo, "go.mod"), "/var/run/docker.sock"}})
	const secret = "s3cret-of-the-worker"
	cmd := exec.Command(bin, "run", flow, "--input", string(input), "--json", "--state-dir", filepath.Join(dir, "state"), "--quiet")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"PLAITA_CODE_BACKEND=docker", "PLAITA_SANDBOX_ALLOWED_BACKENDS=docker", "PLAITA_SANDBOX_ALLOWED_LANGUAGES=python,js",
		"PLAITA_NODES_WORKSPACE_ROOT="+dir, "WORKER_TOKEN="+secret, "AWS_SECRET_ACCESS_KEY="+secret)
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("plaita run: %v\n%s\n%s", err, out, ee.Stderr)
		}
		t.Fatal(err)
	}
	var st struct {
		Status string `json:"status"`
		Output struct {
			Py, JS struct {
				Env   map[string]string `json:"env"`
				Files map[string]bool   `json:"files"`
				UID   *int              `json:"uid"`
			}
		} `json:"output"`
	}
	if err := json.Unmarshal(out, &st); err != nil || st.Status != "completed" {
		t.Fatalf("plaita run: %v, status %q:\n%s", err, st.Status, out)
	}
	for lang, seen := range map[string]struct {
		Env   map[string]string
		Files map[string]bool
	}{"python": {st.Output.Py.Env, st.Output.Py.Files}, "js": {st.Output.JS.Env, st.Output.JS.Files}} {
		if len(seen.Env) == 0 {
			t.Errorf("%s: no environment read: the check would prove nothing", lang)
		}
		for k, v := range seen.Env {
			if strings.HasPrefix(k, "PLAITA_") || strings.Contains(v, secret) || k == "WORKER_TOKEN" || k == "AWS_SECRET_ACCESS_KEY" {
				t.Errorf("%s: the container sees the worker's %s=%s", lang, k, v)
			}
		}
		if len(seen.Files) != 5 {
			t.Errorf("%s: files checked %v", lang, seen.Files)
		}
		for p, exists := range seen.Files {
			if exists {
				t.Errorf("%s: the container sees the worker's %s", lang, p)
			}
		}
	}
	t.Logf("python's environment inside: %v", st.Output.Py.Env)
}
