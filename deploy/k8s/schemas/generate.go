//go:build ignore

// Command generate writes the JSON schemas kubeconform and deploy/k8s_test.go validate the
// manifests of deploy/k8s against, in kubeconform's standalone-strict layout
// (<kind><-group>-<version>.json), from the OpenAPI v3 document of one Kubernetes release —
// fetched through the Go module proxy, since the usual schema repository is on GitHub:
//
//	go run deploy/k8s/schemas/generate.go            # from the repository root
//
// Every $ref is inlined (standalone), every object with properties refuses unknown ones
// (strict: a misspelt field is an error, as `kubectl apply --validate=strict` makes it),
// apiVersion and kind are pinned, and descriptions are dropped to keep the files small.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// release is the Kubernetes release whose API the manifests are checked against; the kinds
// they use are stable since long before it.
const release = "v1.33.13"

// kinds are the kinds deploy/k8s uses: OpenAPI document, component, output file.
var kinds = []struct{ doc, component, file string }{
	{"apis__apps__v1_openapi.json", "io.k8s.api.apps.v1.Deployment", "deployment-apps-v1.json"},
	{"api__v1_openapi.json", "io.k8s.api.core.v1.Service", "service-v1.json"},
	{"api__v1_openapi.json", "io.k8s.api.core.v1.ConfigMap", "configmap-v1.json"},
	{"api__v1_openapi.json", "io.k8s.api.core.v1.Secret", "secret-v1.json"},
	{"api__v1_openapi.json", "io.k8s.api.core.v1.PersistentVolumeClaim", "persistentvolumeclaim-v1.json"},
}

func main() {
	out, err := exec.Command("go", "mod", "download", "-json", "k8s.io/kubernetes@"+release).Output()
	if err != nil {
		fail("go mod download k8s.io/kubernetes@%s: %v", release, err)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		fail("go mod download: %v", err)
	}
	for _, k := range kinds {
		b, err := os.ReadFile(filepath.Join(mod.Dir, "api", "openapi-spec", "v3", k.doc))
		if err != nil {
			fail("%v", err)
		}
		var doc struct {
			Components struct {
				Schemas map[string]map[string]any `json:"schemas"`
			} `json:"components"`
		}
		if err := json.Unmarshal(b, &doc); err != nil {
			fail("%s: %v", k.doc, err)
		}
		g := gen{all: doc.Components.Schemas, stack: map[string]bool{}}
		root, ok := g.all[k.component]
		if !ok {
			fail("%s: no %s", k.doc, k.component)
		}
		s := g.schema(root, k.component)
		pinKind(s, root)
		body, err := json.MarshalIndent(s, "", " ")
		if err != nil {
			fail("%v", err)
		}
		if err := os.WriteFile(filepath.Join("deploy", "k8s", "schemas", k.file), append(body, '\n'), 0o644); err != nil {
			fail("%v", err)
		}
		fmt.Printf("%s: %d bytes (Kubernetes %s, %s)\n", k.file, len(body), release, k.component)
	}
}

type gen struct {
	all   map[string]map[string]any
	stack map[string]bool // the components being inlined: a recursive one becomes {}
}

// schema returns s with every $ref inlined, strict objects and no descriptions.
func (g *gen) schema(s map[string]any, name string) map[string]any {
	if name != "" {
		if g.stack[name] {
			return map[string]any{}
		}
		g.stack[name] = true
		defer delete(g.stack, name)
	}
	if ref, ok := s["$ref"].(string); ok {
		return g.ref(ref)
	}
	// OpenAPI v3 wraps a reference that carries a default or a description in allOf.
	if all, ok := s["allOf"].([]any); ok && len(all) == 1 {
		if one, ok := all[0].(map[string]any); ok {
			if ref, ok := one["$ref"].(string); ok {
				return g.ref(ref)
			}
		}
	}
	out := map[string]any{}
	for k, v := range s {
		switch {
		case k == "description" || k == "default" || strings.HasPrefix(k, "x-kubernetes-"):
		case k == "properties":
			props := map[string]any{}
			for p, ps := range v.(map[string]any) {
				props[p] = g.schema(ps.(map[string]any), "")
			}
			out[k] = props
		case k == "items" || k == "additionalProperties":
			if m, ok := v.(map[string]any); ok {
				out[k] = g.schema(m, "")
			} else {
				out[k] = v
			}
		case k == "allOf" || k == "oneOf" || k == "anyOf":
			var list []any
			for _, e := range v.([]any) {
				list = append(list, g.schema(e.(map[string]any), ""))
			}
			out[k] = list
		default:
			out[k] = v
		}
	}
	if _, has := out["properties"]; has {
		if _, set := out["additionalProperties"]; !set {
			out["additionalProperties"] = false
		}
	}
	return out
}

func (g *gen) ref(ref string) map[string]any {
	name := strings.TrimPrefix(ref, "#/components/schemas/")
	s, ok := g.all[name]
	if !ok {
		fail("unresolved reference %s", ref)
	}
	return g.schema(s, name)
}

// pinKind allows only the kind's own apiVersion and kind.
func pinKind(s, root map[string]any) {
	gvks, _ := root["x-kubernetes-group-version-kind"].([]any)
	if len(gvks) == 0 {
		fail("no group-version-kind")
	}
	gvk := gvks[0].(map[string]any)
	apiVersion := gvk["version"].(string)
	if group := gvk["group"].(string); group != "" {
		apiVersion = group + "/" + apiVersion
	}
	props := s["properties"].(map[string]any)
	props["apiVersion"] = map[string]any{"type": "string", "enum": []string{apiVersion}}
	props["kind"] = map[string]any{"type": "string", "enum": []string{gvk["kind"].(string)}}
	s["required"] = []string{"apiVersion", "kind", "metadata"}
}

func fail(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "generate: "+format+"\n", a...)
	os.Exit(1)
}
