package nodes

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"plaita/config"
	"plaita/engine"
)

func register(t *testing.T, env map[string]string) (*engine.Registry, string, error) {
	t.Helper()
	cfg, err := config.Load(config.RoleWorker, true, config.WithEnv(env))
	if err != nil {
		t.Fatal(err)
	}
	var logs strings.Builder
	reg := engine.NewRegistry()
	err = Register(reg, cfg, zerolog.New(&logs))
	return reg, logs.String(), err
}

const codeFlow = `{"id":"c","start":"a","nodes":[{"id":"a","type":"code","params":{"code":"result = 1"},"next":"e"},{"id":"e","type":"end"}]}`

func TestRegisterAddsTheIONodes(t *testing.T) {
	root := t.TempDir()
	reg, logs, err := register(t, map[string]string{"PLAITA_NODES_WORKSPACE_ROOT": root})
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
	reg, logs, err := register(t, map[string]string{"PLAITA_NODES_WORKSPACE_ROOT": t.TempDir(), "PLAITA_DISABLE_CODE_NODE": "1"})
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
	_, logs, err := register(t, map[string]string{"PLAITA_ALLOW_UNRESTRICTED_WRITES": "1"})
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
	reg, _, err := register(t, map[string]string{"PLAITA_NODES_WORKSPACE_ROOT": t.TempDir(), "PLAITA_NODE_PATH": dir})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := engine.Parse(flow, reg, engine.DefaultExprLimits); err != nil {
		t.Errorf("external node flow: %v", err)
	}
	reg, _, _ = register(t, map[string]string{"PLAITA_NODES_WORKSPACE_ROOT": t.TempDir()})
	if _, err := engine.Parse(flow, reg, engine.DefaultExprLimits); err == nil {
		t.Error("without PLAITA_NODE_PATH the external type must be unknown")
	}
}
