package deploy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"
)

// The Kubernetes manifests of deploy/k8s: each document validated against the vendored
// standalone-strict schema of its kind (deploy/k8s/schemas, generated from the Kubernetes API's
// OpenAPI document; the ones kubeconform reads in .ci/run), then held to the rolling-drain
// rules (docs/operations.md "Kubernetes").

// object is one manifest document as JSON sees it.
type object = map[string]any

// manifests reads every document of deploy/k8s/*.yaml, with files overriding the repository's
// own (a test's broken copy).
func manifests(t *testing.T, override map[string]string) []object {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(repo, "deploy", "k8s", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests: %v", err)
	}
	var out []object
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if o, ok := override[filepath.Base(f)]; ok {
			src = []byte(o)
		}
		dec := yaml.NewDecoder(bytes.NewReader(src))
		for {
			var doc object
			err := dec.Decode(&doc)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if doc != nil {
				doc["#file"] = filepath.Base(f)
				out = append(out, doc)
			}
		}
	}
	return out
}

// schemaFile is kubeconform's name of a kind's schema: deployment-apps-v1.json, service-v1.json.
func schemaFile(o object) string {
	kind, _ := o["kind"].(string)
	av, _ := o["apiVersion"].(string)
	group, version, found := strings.Cut(av, "/")
	if !found {
		group, version = "", av
	}
	name := strings.ToLower(kind)
	if group != "" {
		name += "-" + strings.Split(group, ".")[0]
	}
	return name + "-" + version + ".json"
}

// validator checks documents against their kind's schema, each schema compiled once.
type validator struct {
	c     *jsonschema.Compiler
	cache map[string]*jsonschema.Schema
}

func newValidator() *validator {
	return &validator{c: jsonschema.NewCompiler(), cache: map[string]*jsonschema.Schema{}}
}

// validate checks o against its kind's schema.
func (v *validator) validate(o object) error {
	file := filepath.Join(repo, "deploy", "k8s", "schemas", schemaFile(o))
	sch, ok := v.cache[file]
	if !ok {
		var err error
		if sch, err = v.c.Compile(file); err != nil {
			return fmt.Errorf("no schema for %s %s: %w", o["apiVersion"], o["kind"], err)
		}
		v.cache[file] = sch
	}
	clean := object{}
	for k, v := range o {
		if k != "#file" {
			clean[k] = v
		}
	}
	b, err := json.Marshal(clean)
	if err != nil {
		return err
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return err
	}
	return sch.Validate(inst)
}

// at walks o along keys (a string indexes a map, an int a list); nil when absent.
func at(o any, keys ...any) any {
	for _, k := range keys {
		switch k := k.(type) {
		case string:
			m, ok := o.(object)
			if !ok {
				return nil
			}
			o = m[k]
		case int:
			l, ok := o.([]any)
			if !ok || k >= len(l) {
				return nil
			}
			o = l[k]
		}
	}
	return o
}

func str(o any, keys ...any) string {
	switch v := at(o, keys...).(type) {
	case string:
		return v
	case int:
		return strconv.Itoa(v)
	}
	return ""
}

func num(o any, keys ...any) (int, bool) {
	v, ok := at(o, keys...).(int)
	return v, ok
}

// k8sRules are the manifests' rules, each a problem when broken.
func k8sRules(docs []object) []string {
	var problems []string
	bad := func(format string, a ...any) { problems = append(problems, fmt.Sprintf(format, a...)) }
	byKind := map[string]map[string]object{}
	for _, d := range docs {
		kind, name := str(d, "kind"), str(d, "metadata", "name")
		if byKind[kind] == nil {
			byKind[kind] = map[string]object{}
		}
		byKind[kind][name] = d
	}
	cm := byKind["ConfigMap"]["plaita-env"]
	if cm == nil {
		return []string{"no ConfigMap plaita-env"}
	}
	metricsPort := str(cm, "data", "PLAITA_METRICS_PORT")
	drain, err := strconv.ParseFloat(str(cm, "data", "PLAITA_WORKER_DRAIN_TIMEOUT"), 64)
	if err != nil {
		bad("plaita-env: PLAITA_WORKER_DRAIN_TIMEOUT is not set: %v", err)
	}
	if str(cm, "data", "PLAITA_CONSOLE_HOST") != "0.0.0.0" {
		bad("plaita-env: PLAITA_CONSOLE_HOST must be 0.0.0.0 (the image hard-codes no host)")
	}
	for _, role := range plaitaRoles {
		d := byKind["Deployment"]["plaita-"+role]
		if d == nil {
			bad("no Deployment plaita-%s", role)
			continue
		}
		problems = append(problems, deploymentRules(d, role, metricsPort)...)
	}
	if w := byKind["Deployment"]["plaita-worker"]; w != nil {
		pod := at(w, "spec", "template", "spec")
		if g, _ := num(pod, "terminationGracePeriodSeconds"); float64(g) < drain+15 {
			bad("plaita-worker: terminationGracePeriodSeconds %d is not above PLAITA_WORKER_DRAIN_TIMEOUT %g s + a 15 s margin", g, drain)
		}
		if mu := at(w, "spec", "strategy", "rollingUpdate", "maxUnavailable"); mu != 0 {
			bad("plaita-worker: maxUnavailable %v: the worker pool must not shrink during a rollout (0)", mu)
		}
		if pre := at(pod, "containers", 0, "lifecycle", "preStop"); pre != nil {
			bad("plaita-worker: a preStop hook (%v): SIGTERM already drains", pre)
		}
		if !strings.Contains(fmt.Sprint(at(pod, "containers", 0, "args")), "--concurrency") {
			bad("plaita-worker: no --concurrency")
		}
	}
	if c := byKind["Deployment"]["plaita-console"]; c != nil {
		problems = append(problems, consoleRules(c, byKind)...)
	}
	return problems
}

// deploymentRules are every role's: its selector matches its pods, it runs the role as a
// non-root user with its own instance id, the shared environment, and a readiness probe on
// /readyz (not ready while it drains).
func deploymentRules(d object, role, metricsPort string) []string {
	var problems []string
	bad := func(format string, a ...any) {
		problems = append(problems, fmt.Sprintf("plaita-"+role+": "+format, a...))
	}
	labels, _ := at(d, "spec", "template", "metadata", "labels").(object)
	sel, _ := at(d, "spec", "selector", "matchLabels").(object)
	for k, v := range sel {
		if labels[k] != v {
			bad("the selector %s=%v does not match the pod's labels", k, v)
		}
	}
	pod := at(d, "spec", "template", "spec")
	if at(pod, "securityContext", "runAsNonRoot") != true {
		bad("runAsNonRoot is not set")
	}
	ctr := at(pod, "containers", 0)
	if str(ctr, "args", 0) != role {
		bad("args %v do not run the role", at(ctr, "args"))
	}
	idFromPod, sharedEnv := false, false
	for _, e := range asList(at(ctr, "env")) {
		if str(e, "name") == "PLAITA_INSTANCE_ID" && str(e, "valueFrom", "fieldRef", "fieldPath") == "metadata.name" {
			idFromPod = true
		}
	}
	for _, e := range asList(at(ctr, "envFrom")) {
		sharedEnv = sharedEnv || str(e, "configMapRef", "name") == "plaita-env"
	}
	if !idFromPod {
		bad("PLAITA_INSTANCE_ID does not come from the pod's name (every pod would be <role>-1)")
	}
	if !sharedEnv {
		bad("the ConfigMap plaita-env is not in envFrom")
	}
	if str(ctr, "readinessProbe", "httpGet", "path") != "/readyz" {
		bad("the readiness probe does not ask /readyz")
	}
	if port := portNumber(ctr, str(ctr, "readinessProbe", "httpGet", "port")); role != "console" && port != metricsPort {
		bad("the readiness probe asks port %q, the role serves /readyz on PLAITA_METRICS_PORT %s", port, metricsPort)
	}
	return problems
}

// consoleRules: one replica recreated (its SQLite file is one pod's), the database on a claimed
// volume, the admin secret, and a Service that reaches the console's HTTP port.
func consoleRules(c object, byKind map[string]map[string]object) []string {
	var problems []string
	bad := func(format string, a ...any) {
		problems = append(problems, fmt.Sprintf("plaita-console: "+format, a...))
	}
	if str(c, "spec", "strategy", "type") != "Recreate" {
		bad("strategy %q: two consoles must not open one SQLite file (Recreate)", str(c, "spec", "strategy", "type"))
	}
	pod := at(c, "spec", "template", "spec")
	ctr := at(pod, "containers", 0)
	dbDir := ""
	for _, e := range asList(at(ctr, "env")) {
		if str(e, "name") == "PLAITA_CONSOLE_DB_URL" {
			dbDir = path.Dir(strings.TrimPrefix(str(e, "value"), "sqlite:///"))
		}
	}
	claimed := false
	for _, m := range asList(at(ctr, "volumeMounts")) {
		if path.Clean(str(m, "mountPath")) != dbDir {
			continue
		}
		for _, v := range asList(at(pod, "volumes")) {
			if str(v, "name") == str(m, "name") && byKind["PersistentVolumeClaim"][str(v, "persistentVolumeClaim", "claimName")] != nil {
				claimed = true
			}
		}
	}
	if dbDir == "" || !claimed {
		bad("the database directory %q is not on a PersistentVolumeClaim of these manifests", dbDir)
	}
	secret := false
	for _, e := range asList(at(ctr, "envFrom")) {
		secret = secret || byKind["Secret"][str(e, "secretRef", "name")] != nil
	}
	if !secret {
		bad("no Secret of these manifests in envFrom (the admin credentials)")
	}
	svc := byKind["Service"]["plaita-console"]
	if svc == nil {
		return append(problems, "no Service plaita-console")
	}
	podLabels, _ := at(c, "spec", "template", "metadata", "labels").(object)
	for k, v := range at(svc, "spec", "selector").(object) {
		if podLabels[k] != v {
			bad("the Service's selector %s=%v does not select the console's pods", k, v)
		}
	}
	if portNumber(ctr, str(svc, "spec", "ports", 0, "targetPort")) != "8080" {
		bad("the Service does not reach the console's port 8080")
	}
	return problems
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

// portNumber resolves a probe's or a Service's port (a number, or a container port's name).
func portNumber(ctr any, port string) string {
	for _, p := range asList(at(ctr, "ports")) {
		if str(p, "name") == port {
			return str(p, "containerPort")
		}
	}
	return port
}

func TestKubernetesManifestsAreValidAndFollowTheDrainRules(t *testing.T) {
	docs := manifests(t, nil)
	kinds := map[string]int{}
	v := newValidator()
	for _, d := range docs {
		if err := v.validate(d); err != nil {
			t.Errorf("%s: %s %s: %v", d["#file"], d["kind"], str(d, "metadata", "name"), err)
		}
		kinds[str(d, "kind")]++
	}
	if kinds["Deployment"] != len(plaitaRoles) || kinds["Service"] != 1 || kinds["ConfigMap"] != 1 || kinds["Secret"] != 1 {
		t.Errorf("kinds %v", kinds)
	}
	for _, p := range k8sRules(docs) {
		t.Error(p)
	}
}

// The schemas and the rules catch a broken manifest.
func TestKubernetesChecksCatchBrokenManifests(t *testing.T) {
	worker := string(readRepoFile(t, "deploy/k8s/worker.yaml"))
	console := string(readRepoFile(t, "deploy/k8s/console.yaml"))
	v := newValidator()
	schema := []struct{ name, file, src, from, to string }{
		{"a misspelt field", "worker.yaml", worker, "terminationGracePeriodSeconds: 60", "terminationGracePeriod: 60"},
		{"a string for a number", "worker.yaml", worker, "replicas: 2", `replicas: "two"`},
		{"an unknown probe field", "console.yaml", console, "periodSeconds: 5", "periodSeconds: 5\n            everySeconds: 5"},
	}
	for _, tc := range schema {
		if !strings.Contains(tc.src, tc.from) {
			t.Fatalf("%s: no %q", tc.name, tc.from)
		}
		failed := false
		for _, d := range manifests(t, map[string]string{tc.file: strings.Replace(tc.src, tc.from, tc.to, 1)}) {
			failed = failed || v.validate(d) != nil
		}
		if !failed {
			t.Errorf("%s: the schemas accepted it", tc.name)
		}
	}
	rules := []struct{ name, file, src, from, to, want string }{
		{"a short grace period", "worker.yaml", worker, "terminationGracePeriodSeconds: 60", "terminationGracePeriodSeconds: 35", "not above PLAITA_WORKER_DRAIN_TIMEOUT"},
		{"a shrinking pool", "worker.yaml", worker, "maxUnavailable: 0", "maxUnavailable: 1", "must not shrink"},
		{"readiness on the liveness path", "worker.yaml", worker, "path: /readyz", "path: /healthz", "does not ask /readyz"},
		{"one instance id for every pod", "worker.yaml", worker, "fieldPath: metadata.name", "fieldPath: spec.nodeName", "does not come from the pod's name"},
		{"two consoles on one file", "console.yaml", console, "type: Recreate", "type: RollingUpdate", "must not open one SQLite file"},
		{"the database off the volume", "console.yaml", console, "mountPath: /data", "mountPath: /var/data", "is not on a PersistentVolumeClaim"},
	}
	for _, tc := range rules {
		if !strings.Contains(tc.src, tc.from) {
			t.Fatalf("%s: no %q", tc.name, tc.from)
		}
		got := strings.Join(k8sRules(manifests(t, map[string]string{tc.file: strings.Replace(tc.src, tc.from, tc.to, 1)})), "\n")
		if !strings.Contains(got, tc.want) {
			t.Errorf("%s: no problem %q in %q", tc.name, tc.want, got)
		}
	}
	// The preStop rule: a hook is refused.
	hooked := strings.Replace(worker, "          readinessProbe:", "          lifecycle:\n            preStop:\n              exec:\n                command: [\"sleep\", \"5\"]\n          readinessProbe:", 1)
	if got := strings.Join(k8sRules(manifests(t, map[string]string{"worker.yaml": hooked})), "\n"); !strings.Contains(got, "preStop") {
		t.Errorf("a preStop hook passed: %q", got)
	}
}
