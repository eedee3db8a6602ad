package settings

import (
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"plaita/config"
	"plaita/engine/nodes"
	"plaita/engine/nodes/code"
	"plaita/engine/nodes/external"
	"plaita/engine/nodes/httpnode"
)

func loadWorker(t *testing.T, env map[string]string) *config.Config {
	t.Helper()
	cfg, err := config.Load(config.RoleWorker, true, config.WithEnv(env))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// The defaults live twice, in the registry and in the node packages; this keeps them equal.
func TestNodeOptionsDefaultsAreThePackagesDefaults(t *testing.T) {
	for _, role := range []config.Role{config.RoleWorker, config.RoleDev} {
		cfg, err := config.Load(role, true, config.WithEnv(map[string]string{}))
		if err != nil {
			t.Fatal(err)
		}
		got := Nodes(cfg)
		if got.HTTP != httpnode.DefaultOptions() {
			t.Errorf("%s: http %+v, httpnode.DefaultOptions() %+v", role, got.HTTP, httpnode.DefaultOptions())
		}
		if !reflect.DeepEqual(got.Code, code.DefaultOptions()) {
			t.Errorf("%s: code\n %+v\ncode.DefaultOptions()\n %+v", role, got.Code, code.DefaultOptions())
		}
		// The rest is off or empty when unset: no external paths, the jail root derived.
		if len(got.External.Paths) != 0 {
			t.Errorf("%s: external node paths %q", role, got.External.Paths)
		}
		got.HTTP, got.Code, got.Sandbox, got.External.Paths = httpnode.Options{}, code.Options{}, nodes.Options{}.Sandbox, nil
		if !reflect.DeepEqual(got, nodes.Options{}) {
			t.Errorf("%s: with nothing set: %+v", role, got)
		}
	}
}

// everySet sets every variable Nodes reads to a value other than its default.
var everySet = map[string]string{
	"PLAITA_HTTP_MAX_RESPONSE_BYTES":   "2048",
	"PLAITA_HTTP_DNS_TTL":              "1.5",
	"PLAITA_HTTP_CONNECTOR_LIMIT":      "7",
	"PLAITA_HTTP_COOKIES":              "yes",
	"PLAITA_HTTP_BLOCK_PRIVATE":        "1",
	"PLAITA_SANDBOX_ALLOWED_LANGUAGES": "python,js",
	"PLAITA_SANDBOX_ALLOWED_BACKENDS":  "docker,subprocess,restricted",
	"PLAITA_CODE_BACKEND":              "docker",
	"PLAITA_ALLOW_SUBPROCESS_FALLBACK": "1",
	"PLAITA_SANDBOX_TIMEOUT":           "7",
	"PLAITA_SANDBOX_MEMORY_MB":         "64",
	"PLAITA_SANDBOX_NODE_BIN":          "/opt/node/bin/node",
	"PLAITA_SANDBOX_DOCKER_IMAGE":      "reg/py:1",
	"PLAITA_SANDBOX_DOCKER_NODE_IMAGE": "reg/js:1",
	"PLAITA_SANDBOX_DOCKER_MEMORY_MB":  "0",
	"PLAITA_SANDBOX_DOCKER_CPUS":       "2",
	"PLAITA_SANDBOX_DOCKER_USER":       "1000:1000",
	"PLAITA_SANDBOX_DOCKER_TIMEOUT":    "9",
	"PLAITA_NODE_PATH":                 "/opt/plaita/nodes:/usr/local/lib/plaita",
	"PLAITA_DISABLE_CODE_NODE":         "1",
	"PLAITA_NODES_WORKSPACE_ROOT":      "/srv/work",
	"PLAITA_ALLOW_UNRESTRICTED_WRITES": "1",
	"PLAITA_PROJECT_ROOT":              "/srv/project",
}

func TestNodeOptionsMapsEveryVariable(t *testing.T) {
	got := Nodes(loadWorker(t, everySet))
	got.Sandbox = nodes.Options{}.Sandbox // the host's, see TestNodeOptionsSnapshotsTheHostVariables
	want := nodes.Options{
		HTTP: httpnode.Options{MaxResponseBytes: 2048, DNSTTL: 1500 * time.Millisecond, ConnectorLimit: 7, Cookies: true, BlockPrivate: true},
		Code: code.Options{
			AllowedLanguages:        []string{"python", "js"},
			AllowedBackends:         []string{"docker", "subprocess", "restricted"},
			DefaultBackend:          "docker",
			AllowSubprocessFallback: true,
			Timeout:                 7 * time.Second,
			MemoryMB:                64,
			NodeBin:                 "/opt/node/bin/node",
			DockerImage:             "reg/py:1",
			DockerNodeImage:         "reg/js:1",
			DockerMemoryMB:          0,
			DockerCPUs:              "2",
			DockerUser:              "1000:1000",
			DockerTimeout:           9 * time.Second,
		},
		External:          external.Options{Paths: []string{"/opt/plaita/nodes", "/usr/local/lib/plaita"}},
		DisableCode:       true,
		WorkspaceRoot:     "/srv/work",
		AllowUnrestricted: true,
		ProjectRoot:       "/srv/project",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Nodes\n got %+v\nwant %+v", got, want)
	}

	// Every field moved away from its default: a field Nodes does not fill (or this test
	// does not set) stays equal to it and is named here.
	def := Nodes(loadWorker(t, map[string]string{}))
	for _, path := range sameLeaves(reflect.ValueOf(got), reflect.ValueOf(def), "Options") {
		switch path {
		case "Options.Sandbox.HostEnv", "Options.External.DefaultTimeout":
			// The host's environment, and a setting no variable controls.
		default:
			t.Errorf("%s is the same with every variable set as with none", path)
		}
	}
}

// sameLeaves lists the fields (by path) whose values are equal in a and b.
func sameLeaves(a, b reflect.Value, path string) []string {
	if a.Kind() != reflect.Struct {
		if reflect.DeepEqual(a.Interface(), b.Interface()) {
			return []string{path}
		}
		return nil
	}
	var out []string
	for i := range a.NumField() {
		out = append(out, sameLeaves(a.Field(i), b.Field(i), path+"."+a.Type().Field(i).Name)...)
	}
	return out
}

func TestNodeOptionsSnapshotsTheHostVariables(t *testing.T) {
	t.Setenv("TZ", "Asia/Tokyo")
	t.Setenv("DOCKER_HOST", "tcp://docker.internal:2376")
	t.Setenv("LC_ALL", "")
	t.Setenv("MY_API_TOKEN", "secret")
	got := Nodes(loadWorker(t, map[string]string{})).Sandbox.HostEnv
	for k, want := range map[string]string{"TZ": "Asia/Tokyo", "DOCKER_HOST": "tcp://docker.internal:2376", "LC_ALL": ""} {
		if v, ok := got[k]; !ok || v != want {
			t.Errorf("%s = %q (set %v), want %q", k, v, ok, want)
		}
	}
	for k := range got {
		if !slices.Contains(nodes.HostVariables(), k) || strings.HasPrefix(k, "PLAITA_") {
			t.Errorf("%s is in the snapshot but no node type takes it", k)
		}
	}
	if _, ok := got["MY_API_TOKEN"]; ok {
		t.Error("a variable no node type passes on was snapshot")
	}
}

func TestSecondsSaturates(t *testing.T) {
	for in, want := range map[float64]time.Duration{0: 0, 1.5: 1500 * time.Millisecond, 30: 30 * time.Second,
		9.3e9: math.MaxInt64, 1e300: math.MaxInt64} {
		if got := saturatingSeconds(in); got != want {
			t.Errorf("saturatingSeconds(%g) = %s, want %s", in, got, want)
		}
	}
}
