package nodes

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"plaita/engine"
	"plaita/engine/nodes/code"
	"plaita/engine/nodes/external"
	"plaita/engine/nodes/httpnode"
	"plaita/engine/nodes/sandbox"
	"plaita/engine/state"
	"plaita/store"
)

// defaults are a worker's options when nothing is set, with a jail root of the test's own.
func defaults(t *testing.T) Options {
	t.Helper()
	return Options{HTTP: httpnode.DefaultOptions(), Code: code.DefaultOptions(), WorkspaceRoot: t.TempDir(),
		Sandbox: sandbox.Options{HostEnv: map[string]string{"PATH": os.Getenv("PATH")}}}
}

func register(t *testing.T, opts Options) (*engine.Registry, string, error) {
	t.Helper()
	var logs strings.Builder
	reg := engine.NewRegistry()
	err := Register(reg, opts, zerolog.New(&logs))
	return reg, logs.String(), err
}

const codeFlow = `{"id":"c","start":"a","nodes":[{"id":"a","type":"code","params":{"code":"result = 1"},"next":"e"},{"id":"e","type":"end"}]}`

func TestRegisterAddsTheIONodes(t *testing.T) {
	opts := defaults(t)
	root := opts.WorkspaceRoot
	reg, logs, err := register(t, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, typ := range []string{"http", "writefile", "code", "set", "approval"} {
		found := false
		for _, x := range reg.Types() {
			found = found || x == typ
		}
		if !found {
			t.Errorf("node type %s not registered: %v", typ, reg.Types())
		}
	}
	if !strings.Contains(logs, `"event":"writefile.jail"`) || !strings.Contains(logs, root) {
		t.Errorf("the effective jail root is not logged: %s", logs)
	}
	if _, err := engine.Parse([]byte(codeFlow), reg, engine.DefaultExprLimits); err != nil {
		t.Errorf("code flow: %v", err)
	}
}

func TestDisableCodeNodeRemovesTheType(t *testing.T) {
	opts := defaults(t)
	opts.DisableCode = true
	reg, logs, err := register(t, opts)
	if err != nil {
		t.Fatal(err)
	}
	_, err = engine.Parse([]byte(codeFlow), reg, engine.DefaultExprLimits)
	if !errors.Is(err, engine.ErrInvalidFlow) || !strings.Contains(err.Error(), `unknown node type "code"`) {
		t.Errorf("a code flow with the code node disabled: %v", err)
	}
	if !strings.Contains(logs, "code_node.disabled") {
		t.Errorf("not logged: %s", logs)
	}
}

func TestUnrestrictedWritesWarn(t *testing.T) {
	opts := defaults(t)
	opts.WorkspaceRoot, opts.AllowUnrestricted = "", true
	_, logs, err := register(t, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs, `"level":"warn","event":"writefile.unrestricted"`) {
		t.Errorf("unrestricted writes must warn: %s", logs)
	}
}

func TestExternalNodesResolveFromNodePath(t *testing.T) {
	dir, err := filepath.Abs("../../testdata/external")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "plaita-node-uppercase")); err != nil {
		t.Fatal(err)
	}
	flow, err := os.ReadFile(filepath.Join(dir, "uppercase-flow.json"))
	if err != nil {
		t.Fatal(err)
	}
	opts := defaults(t)
	opts.External = external.Options{Paths: []string{dir}}
	reg, _, err := register(t, opts)
	if err != nil {
		t.Fatal(err)
	}
	f, err := engine.Parse(flow, reg, engine.DefaultExprLimits)
	if err != nil {
		t.Fatalf("external node flow: %v", err)
	}
	// The executable runs with the sandbox's host environment.
	st, err := engine.NewExecutor(store.NewMemory()).Start(context.Background(), f, engine.StartRequest{Input: map[string]any{"name": "ada"}})
	if err != nil || st.Status != state.Completed {
		t.Fatalf("external node run: %v %+v", err, st)
	}
	reg, _, _ = register(t, defaults(t))
	if _, err := engine.Parse(flow, reg, engine.DefaultExprLimits); err == nil {
		t.Error("without PLAITA_NODE_PATH the external type must be unknown")
	}
}

func TestRegisterPassesTheOptionsOn(t *testing.T) {
	opts := defaults(t)
	opts.Code.AllowedLanguages = []string{code.Python, code.JS}
	opts.Code.Timeout = 3 * time.Second
	reg, _, err := register(t, opts)
	if err != nil {
		t.Fatal(err)
	}
	// The code node's limits are the options': a timeout over 3 s is refused at validation.
	slow := `{"id":"c","start":"a","nodes":[{"id":"a","type":"code","params":{"code":"result = 1","timeout":4},"next":"e"},{"id":"e","type":"end"}]}`
	if _, err := engine.Parse([]byte(slow), reg, engine.DefaultExprLimits); err == nil || !strings.Contains(err.Error(), "limit of 3s (PLAITA_SANDBOX_TIMEOUT)") {
		t.Errorf("a 4 s code node under a 3 s limit: %v", err)
	}
	js := `{"id":"c","start":"a","nodes":[{"id":"a","type":"code","params":{"language":"js","sandbox_backend":"restricted","code":"return 1"},"next":"e"},{"id":"e","type":"end"}]}`
	if _, err := engine.Parse([]byte(js), reg, engine.DefaultExprLimits); err == nil || !strings.Contains(err.Error(), "PLAITA_SANDBOX_ALLOWED_BACKENDS") {
		t.Errorf("restricted is not allow-listed: %v", err)
	}
	opts.Code.AllowedBackends = []string{code.Docker, code.Subprocess, code.Restricted}
	reg, _, err = register(t, opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := engine.Parse([]byte(js), reg, engine.DefaultExprLimits); err != nil {
		t.Errorf("js on restricted, both allowed: %v", err)
	}
}

func TestDockerDefaultWithoutDaemonRefusesToRegister(t *testing.T) {
	opts := defaults(t)
	opts.Code.DefaultBackend, opts.Code.AllowedBackends = code.Docker, []string{code.Docker}
	// A docker client that cannot reach any daemon, whatever this machine runs.
	opts.Sandbox.HostEnv["DOCKER_HOST"] = "unix://" + filepath.Join(t.TempDir(), "no-daemon.sock")
	_, _, err := register(t, opts)
	if !errors.Is(err, code.ErrBackendUnavailable) || !strings.HasPrefix(err.Error(), "code node: ") {
		t.Errorf("got %v, want the code node's ErrBackendUnavailable", err)
	}
}

func TestHostVariablesCoverEveryNodeType(t *testing.T) {
	for _, k := range append(code.HostVariables(), sandbox.HostVariables()...) {
		if !slices.Contains(HostVariables(), k) {
			t.Errorf("HostVariables misses %s", k)
		}
	}
	for _, k := range HostVariables() {
		if strings.HasPrefix(k, "PLAITA_") {
			t.Errorf("%s is configuration, not a host variable", k)
		}
	}
}

// The node packages take their settings as Options: they import no configuration and read no
// environment of their own.
func TestNodePackagesReadNoConfiguration(t *testing.T) {
	list := func(args ...string) []string {
		out, err := exec.Command("go", append([]string{"list"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("go list %s: %v: %s", args, err, out)
		}
		return strings.Fields(string(out))
	}
	banned := func(pkg string) bool {
		return pkg == "plaita/config" || strings.HasPrefix(pkg, "plaita/config/") || strings.HasPrefix(pkg, "plaita/roles")
	}
	// Imported by a node package itself or its tests (which build Options, never a config).
	for _, line := range list("-f", `{{.ImportPath}}:{{join .Imports ","}},{{join .TestImports ","}},{{join .XTestImports ","}}`, "plaita/engine/nodes/...") {
		pkg, imports, _ := strings.Cut(line, ":")
		for _, imp := range strings.Split(imports, ",") {
			if banned(imp) {
				t.Errorf("%s imports %s", pkg, imp)
			}
		}
	}
	// Or brought in through another dependency. What package engine depends on is engine's to
	// answer for; counted here is what the node packages bring in beyond it.
	viaEngine := list("-deps", "-f", "{{.ImportPath}}", "plaita/engine")
	for _, pkg := range list("-deps", "-f", "{{.ImportPath}}", "plaita/engine/nodes/...") {
		if banned(pkg) && !slices.Contains(viaEngine, pkg) {
			t.Errorf("engine/nodes depends on %s", pkg)
		}
	}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, call := range []string{"os.Getenv(", "os.LookupEnv(", "os.Environ(", "syscall.Getenv("} {
			if strings.Contains(string(src), call) {
				t.Errorf("%s calls %s", path, call)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
