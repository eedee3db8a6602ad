package external

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"plaita/engine"
	"plaita/engine/nodes/sandbox"
	"plaita/engine/state"
	"plaita/store"
)

const exampleDir = "../../../testdata/external"

// host is the worker's environment as a worker passes it: its PATH, so that the scripts'
// /bin/sh finds its tools.
var host = sandbox.Options{HostEnv: map[string]string{"PATH": os.Getenv("PATH")}}

func registry(t *testing.T, dirs ...string) *engine.Registry {
	t.Helper()
	return registryWith(t, host, dirs...)
}

func registryWith(t *testing.T, sb sandbox.Options, dirs ...string) *engine.Registry {
	t.Helper()
	reg := engine.NewRegistry()
	reg.SetFallback(Resolver(Options{Paths: dirs}, sb, zerolog.Nop()))
	return reg
}

func flowWith(t *testing.T, typ string, params map[string]any) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{
		"id": "ext-test", "start": "x",
		"nodes": []any{
			map[string]any{"id": "x", "type": typ, "params": params, "next": "done"},
			map[string]any{"id": "done", "type": "end", "params": map[string]any{"output": "{{ NODE.x }}"}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func start(t *testing.T, reg *engine.Registry, data []byte, input any) *state.Execution {
	t.Helper()
	f, err := engine.Parse(data, reg, engine.DefaultExprLimits)
	if err != nil {
		t.Fatal(err)
	}
	st, err := engine.NewExecutor(store.NewMemory()).Start(context.Background(), f, engine.StartRequest{TenantID: "acme", Input: input})
	if err != nil {
		t.Fatal(err)
	}
	return st
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

func script(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, Prefix+name)
	if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestExampleFlow(t *testing.T) {
	// The documented wiring: the directories of PLAITA_NODE_PATH, the first without the type.
	abs, err := filepath.Abs(exampleDir)
	if err != nil {
		t.Fatal(err)
	}
	reg := registry(t, "/nonexistent", abs)
	data, err := os.ReadFile(filepath.Join(exampleDir, "uppercase-flow.json"))
	if err != nil {
		t.Fatal(err)
	}
	st := start(t, reg, data, map[string]any{"name": "ada"})
	if st.Status != state.Completed {
		t.Fatalf("status %s: %+v", st.Status, st.Error)
	}
	got, _ := json.Marshal(st.Output)
	if string(got) != `{"length":10,"shouted":"HELLO, ADA"}` {
		t.Fatalf("output %s", got)
	}
	node := st.Context[state.ContextNodes].(map[string]any)["shout"].(map[string]any)
	if node["node"] != "shout" || node["execution"] != st.ExecutionID || node["step"] != 1.0 {
		t.Fatalf("request fields: %v", node)
	}
}

func TestNonZeroExitAndErrors(t *testing.T) {
	reg := registry(t, exampleDir)
	st := start(t, reg, flowWith(t, "uppercase", map[string]any{"text": "x", "exit_code": 3}), nil)
	e := wantError(t, st, "external node uppercase", "exited with status 3", "uppercase: asked to exit with status 3")
	if e.Permanent {
		t.Error("a crash is retryable")
	}

	st = start(t, reg, flowWith(t, "uppercase", map[string]any{"text": 5}), nil)
	e = wantError(t, st, "external node uppercase: params.text must be a string, got int")
	if !e.Permanent {
		t.Error(`an error without "retryable": true is permanent`)
	}
}

func TestProtocol(t *testing.T) {
	dir := t.TempDir()
	script(t, dir, "echo", "#!/bin/sh\nexec cat\n") // answers with the request itself
	script(t, dir, "retry", "#!/bin/sh\necho '{\"error\": \"busy\", \"retryable\": true}'\n")
	script(t, dir, "garbage", "#!/bin/sh\necho 'not json'; echo oops >&2\n")
	script(t, dir, "two", "#!/bin/sh\necho '{\"output\": 1} {\"output\": 2}'\n")
	script(t, dir, "array", "#!/bin/sh\necho '[1]'\n")
	script(t, dir, "silent", "#!/bin/sh\nexit 0\n")
	reg := registry(t, dir)

	// The request: node with raw params, input rendered, execution.
	st := start(t, reg, flowWith(t, "echo", map[string]any{"greet": "hi {{ INPUT.who }}", "n": 2}), map[string]any{"who": "bo"})
	if st.Status != state.Completed {
		t.Fatalf("%+v", st.Error)
	}
	// The echoed request has no "output" field: the node's output is null; the request itself
	// is checked by a script that wraps it.
	script(t, dir, "wrap", "#!/bin/sh\nprintf '{\"output\": '; cat; printf '}'\n")
	st = start(t, reg, flowWith(t, "wrap", map[string]any{"greet": "hi {{ INPUT.who }}", "n": 2}), map[string]any{"who": "bo"})
	if st.Status != state.Completed {
		t.Fatalf("%+v", st.Error)
	}
	req, _ := json.Marshal(st.Output)
	want := `{"execution":{"flow_id":"ext-test","id":"` + st.ExecutionID + `","step":1,"tenant_id":"acme"},` +
		`"input":{"greet":"hi bo","n":2},"node":{"id":"x","params":{"greet":"hi {{ INPUT.who }}","n":2},"type":"wrap"}}`
	if string(req) != want {
		t.Fatalf("request\n got %s\nwant %s", req, want)
	}

	e := wantError(t, start(t, reg, flowWith(t, "retry", nil), nil), "external node retry: busy")
	if e.Permanent {
		t.Error("retryable: true is retryable")
	}
	e = wantError(t, start(t, reg, flowWith(t, "garbage", nil), nil), "broke the protocol", "not JSON", "oops")
	if !e.Permanent {
		t.Error("a protocol error is permanent")
	}
	wantError(t, start(t, reg, flowWith(t, "two", nil), nil), "more after its JSON object")
	wantError(t, start(t, reg, flowWith(t, "array", nil), nil), "not a JSON object")
	wantError(t, start(t, reg, flowWith(t, "silent", nil), nil), "stdout is empty")
}

func TestTimeoutAndEnvironment(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pid")
	script(t, dir, "sleepy", "#!/bin/sh\nsleep 300 &\necho $! > "+pidFile+"\nwait\n")
	script(t, dir, "env", "#!/bin/sh\nprintf '{\"output\": {\"vars\": \"%s\", \"cwd\": \"%s\"}}' \"$(env | cut -d= -f1 | tr '\\n' ' ')\" \"$(pwd)\"\n")
	reg := registry(t, dir)

	begin := time.Now()
	st := start(t, reg, flowWith(t, "sleepy", map[string]any{"timeout": 1}), nil)
	wantError(t, st, "timed out after 1s", "process group was killed")
	if time.Since(begin) > 15*time.Second {
		t.Fatalf("took %s", time.Since(begin))
	}
	b, _ := os.ReadFile(pidFile)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	gone := false
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline) && !gone; time.Sleep(20 * time.Millisecond) {
		if errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
			gone = true
		} else if s, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); err == nil && bytes.Contains(s, []byte(") Z ")) {
			gone = true
		}
	}
	if !gone {
		t.Fatalf("child %d survived the timeout", pid)
	}

	_, err = engine.Parse(flowWith(t, "sleepy", map[string]any{"timeout": "soon"}), reg, engine.DefaultExprLimits)
	if err == nil || !strings.Contains(err.Error(), "nodes[0].params.timeout") {
		t.Fatalf("got %v", err)
	}

	// Whatever else the worker's environment holds stays out.
	leaky := sandbox.Options{HostEnv: map[string]string{"PATH": os.Getenv("PATH"), "TZ": "UTC",
		"PLAITA_REDIS_URL": "redis://:secret@r/0", "MY_API_KEY": "k", "AWS_ACCESS_KEY_ID": "a"}}
	st = start(t, registryWith(t, leaky, dir), flowWith(t, "env", nil), nil)
	if st.Status != state.Completed {
		t.Fatalf("%+v", st.Error)
	}
	out := st.Output.(map[string]any)
	vars := strings.Fields(out["vars"].(string))
	for _, k := range vars {
		switch k {
		case "PATH", "HOME", "LANG", "LC_ALL", "TZ", "PWD", "SHLVL", "_", "OLDPWD":
		default:
			t.Errorf("variable %s reached the external node", k)
		}
	}
	if !slices.Contains(vars, "TZ") {
		t.Errorf("the host's TZ did not reach the external node: %v", vars)
	}
	if cwd := out["cwd"].(string); !strings.Contains(cwd, "plaita-sandbox-") {
		t.Errorf("cwd %s", cwd)
	}
}

func TestResolution(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "nodes")
	sub := filepath.Join(dir, "sub")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	script(t, dir, "ok", "#!/bin/sh\necho '{}'\n")
	script(t, sub, "nested", "#!/bin/sh\necho '{}'\n")
	script(t, root, "outside", "#!/bin/sh\necho '{}'\n")
	if err := os.WriteFile(filepath.Join(dir, Prefix+"noexec"), []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, Prefix+"adir"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(root, Prefix+"outside"), filepath.Join(dir, Prefix+"link")); err != nil {
		t.Fatal(err)
	}
	resolve := Resolver(Options{Paths: []string{"", filepath.Join(root, "missing"), dir}}, host, zerolog.Nop())

	for _, name := range []string{"ok", "link"} {
		if _, ok := resolve(name); !ok {
			t.Errorf("%q not resolved", name)
		}
	}
	for _, name := range []string{"", "../outside", "..", ".", "sub/nested", "x/../ok", "/ok", "OK", "o.k", "noexec", "adir",
		"nope", "ok ", "ok\x00", strings.Repeat("a", 65)} {
		if _, ok := resolve(name); ok {
			t.Errorf("%q resolved", name)
		}
	}

	// Through the registry: built-in types win, and an unknown type stays unknown.
	reg := registry(t, dir)
	for _, typ := range []string{"nope", "../outside", "sub/nested"} {
		_, err := engine.Parse(flowWith(t, typ, nil), reg, engine.DefaultExprLimits)
		if err == nil || !strings.Contains(err.Error(), "unknown node type") {
			t.Errorf("%s: got %v", typ, err)
		}
	}
	if _, err := engine.Parse(flowWith(t, "ok", map[string]any{"a": "{{ INPUT.x }}"}), reg, engine.DefaultExprLimits); err != nil {
		t.Error(err)
	}
	if _, err := engine.Parse(flowWith(t, "ok", map[string]any{"a": "{{ INPUT. }}"}), reg, engine.DefaultExprLimits); err == nil ||
		!strings.Contains(err.Error(), "nodes[0].params.a") {
		t.Errorf("template error: %v", err)
	}
	// No PLAITA_NODE_PATH: nothing resolves.
	if _, ok := Resolver(Options{}, host, zerolog.Nop())("ok"); ok {
		t.Error("resolved without a path")
	}
}

func TestDefaultTimeoutOption(t *testing.T) {
	dir := t.TempDir()
	script(t, dir, "slow", "#!/bin/sh\nexec sleep 300\n")
	for _, c := range []struct {
		set, want time.Duration
	}{{0, DefaultTimeout}, {-time.Second, DefaultTimeout}, {time.Second, time.Second}} {
		typ, ok := Resolver(Options{Paths: []string{dir}, DefaultTimeout: c.set}, host, zerolog.Nop())("slow")
		if !ok {
			t.Fatal("slow not resolved")
		}
		if got := typ.(*Type).timeout; got != c.want {
			t.Errorf("DefaultTimeout %s: a node without a timeout param gets %s, want %s", c.set, got, c.want)
		}
	}
	reg := engine.NewRegistry()
	reg.SetFallback(Resolver(Options{Paths: []string{dir}, DefaultTimeout: time.Second}, host, zerolog.Nop()))
	wantError(t, start(t, reg, flowWith(t, "slow", nil), nil), "timed out after 1s")
}
