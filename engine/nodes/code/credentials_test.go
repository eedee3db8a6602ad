package code

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"plaita/engine"
	"plaita/engine/state"
	"plaita/store"
)

// creds is a tenant's credentials by name (the node's side of the resolver).
type creds map[string]string

func (c creds) Resolve(_ context.Context, tenant, name string) ([]byte, error) {
	if tenant == "" {
		tenant = "default"
	}
	v, ok := c[tenant+"/"+name]
	if !ok {
		return nil, engine.Permanent(fmt.Errorf("credential %s not found in tenant %s", name, tenant))
	}
	return []byte(v), nil
}

func runWith(t *testing.T, typ *Type, params map[string]any, tenant string, c engine.CredentialResolver) *state.Execution {
	t.Helper()
	f, err := parse(t, typ, params)
	if err != nil {
		t.Fatal(err)
	}
	ex := engine.NewExecutor(store.NewMemory())
	ex.Credentials = c
	st, err := ex.Start(context.Background(), f, engine.StartRequest{TenantID: tenant})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

const secretValue = "sk_live_0123456789-ABCDEF"

// A credential reaches the code's environment (subprocess, default tenant); what the code
// prints of it — as it is, or in an error — is redacted from the result; it is on no command
// line and in no INPUT.
func TestCodeCredentialInTheEnvironmentRedacted(t *testing.T) {
	typ := newType(t, DefaultOptions())
	c := creds{"default/api": secretValue}
	st := runWith(t, typ, map[string]any{"sandbox_backend": "subprocess", "credentials": map[string]any{"API_TOKEN": "api"},
		"code": "import os, sys\nv = os.environ['API_TOKEN']\nresult = {'len': len(v), 'echo': v, 'argv': ' '.join(sys.argv)}"}, "", c)
	if st.Status != state.Completed {
		t.Fatalf("status %s: %+v", st.Status, st.Error)
	}
	out := st.Nodes()["c"].(map[string]any)
	if out["len"] != float64(len(secretValue)) || out["echo"] != "[credential api]" || strings.Contains(fmt.Sprint(out), "sk_live") {
		t.Fatalf("result %v", out)
	}
	// An error that quotes it is redacted too.
	st = runWith(t, typ, map[string]any{"sandbox_backend": "subprocess", "credentials": map[string]any{"API_TOKEN": "api"},
		"code": "import os, sys\nsys.stderr.write('token=' + os.environ['API_TOKEN'])\nsys.exit(3)"}, "", c)
	if st.Status != state.Error || strings.Contains(st.Error.Message, "sk_live") || !strings.Contains(st.Error.Message, "[credential api]") {
		t.Fatalf("error %+v", st.Error)
	}
	// Another tenant: refused before anything runs (subprocess is no tenant boundary).
	st = runWith(t, typ, map[string]any{"sandbox_backend": "subprocess", "credentials": map[string]any{"API_TOKEN": "api"},
		"code": "result = 1"}, "acme", creds{"acme/api": secretValue})
	if st.Status != state.Error || !strings.Contains(st.Error.Message, "subprocess is not a tenant isolation boundary") {
		t.Fatalf("another tenant on subprocess: %+v", st.Error)
	}
	// A credential the tenant lacks: permanent, named, no value.
	st = runWith(t, typ, map[string]any{"sandbox_backend": "subprocess", "credentials": map[string]any{"API_TOKEN": "nope"},
		"code": "result = 1"}, "", c)
	if st.Status != state.Error || !st.Error.Permanent || !strings.Contains(st.Error.Message, "credential nope for API_TOKEN") {
		t.Fatalf("a missing credential: %+v", st.Error)
	}
}

// The params are checked when the flow is parsed.
func TestCodeCredentialsRefused(t *testing.T) {
	typ := newType(t, jsOn())
	for name, params := range map[string]map[string]any{
		"restricted":   {"language": "js", "sandbox_backend": "restricted", "code": "return 1", "credentials": map[string]any{"A": "api"}},
		"lower case":   {"sandbox_backend": "subprocess", "code": "result = 1", "credentials": map[string]any{"token": "api"}},
		"reserved":     {"sandbox_backend": "subprocess", "code": "result = 1", "credentials": map[string]any{"PATH": "api"}},
		"interpreter":  {"sandbox_backend": "subprocess", "code": "result = 1", "credentials": map[string]any{"PYTHONPATH": "api"}},
		"bad name":     {"sandbox_backend": "subprocess", "code": "result = 1", "credentials": map[string]any{"A": "1x"}},
		"not a string": {"sandbox_backend": "subprocess", "code": "result = 1", "credentials": map[string]any{"A": 3}},
		"not object":   {"sandbox_backend": "subprocess", "code": "result = 1", "credentials": "api"},
	} {
		if _, err := parse(t, typ, params); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
}

// docker passes each credential with -e NAME: the value is never on its command line.
func TestDockerArgsPassCredentialsByName(t *testing.T) {
	args := DockerArgs(DockerConfig{Bin: "docker", Image: "python:3.12-slim", MemoryMB: 128, CPUs: "0.5", PidsLimit: 64}, Python, "n", "API_TOKEN")
	i := slices.Index(args, "API_TOKEN")
	if i < 1 || args[i-1] != "-e" || slices.Index(args, "python3") < i {
		t.Fatalf("args %v", args)
	}
}
