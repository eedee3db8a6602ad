package api_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"plaita/test/webtest"
)

var updateOpenAPI = flag.Bool("update", false, "rewrite docs/openapi.json from the handlers")

// openAPISnapshot is the API's contract as it is checked in: a change to a route, a parameter or
// a body shows in review as a diff of this file.
var openAPISnapshot = filepath.Join("..", "..", "docs", "openapi.json")

// servedOpenAPI is the document the console serves, with its keys sorted and indented.
func servedOpenAPI(t *testing.T) []byte {
	t.Helper()
	f := webtest.New(t)
	raw := f.Client(nil).Want(t, http.StatusOK, http.MethodGet, "/api/openapi.json", nil).Raw
	var doc any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(out, '\n')
}

// TestOpenAPISnapshot: the served OpenAPI document is the checked-in one. After a deliberate
// change: go test ./web/api -run TestOpenAPISnapshot -update, and commit docs/openapi.json.
func TestOpenAPISnapshot(t *testing.T) {
	got := servedOpenAPI(t)
	if *updateOpenAPI {
		if err := os.WriteFile(openAPISnapshot, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(openAPISnapshot)
	if err != nil {
		t.Fatalf("%v (write it: go test ./web/api -run TestOpenAPISnapshot -update)", err)
	}
	if bytes.Equal(got, want) {
		return
	}
	g, w := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := range max(len(g), len(w)) {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			t.Fatalf("the API differs from %s at line %d:\n  served:     %s\n  checked in: %s\n"+
				"a deliberate change: go test ./web/api -run TestOpenAPISnapshot -update, and commit the file", openAPISnapshot, i+1, gl, wl)
		}
	}
}

// TestListsAnswerOnePageShape: every list route (a GET that takes a cursor) answers
// {items, next_cursor}, and its limit is bounded by the one policy (1 to 1000).
func TestListsAnswerOnePageShape(t *testing.T) {
	var doc struct {
		Paths map[string]map[string]struct {
			Parameters []struct {
				Name   string `json:"name"`
				In     string `json:"in"`
				Schema struct {
					Minimum *float64 `json:"minimum"`
					Maximum *float64 `json:"maximum"`
				} `json:"schema"`
			} `json:"parameters"`
			Responses map[string]struct {
				Content map[string]struct {
					Schema struct {
						Ref string `json:"$ref"`
					} `json:"schema"`
				} `json:"content"`
			} `json:"responses"`
		} `json:"paths"`
		Components struct {
			Schemas map[string]struct {
				Properties map[string]struct {
					Type any `json:"type"`
				} `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(servedOpenAPI(t), &doc); err != nil {
		t.Fatal(err)
	}
	lists := 0
	for path, ops := range doc.Paths {
		op, ok := ops["get"]
		if !ok || !slices.ContainsFunc(op.Parameters, func(p struct {
			Name   string `json:"name"`
			In     string `json:"in"`
			Schema struct {
				Minimum *float64 `json:"minimum"`
				Maximum *float64 `json:"maximum"`
			} `json:"schema"`
		}) bool {
			return p.In == "query" && p.Name == "cursor"
		}) {
			continue
		}
		lists++
		t.Logf("GET %s", path)
		for _, p := range op.Parameters {
			if p.Name == "limit" && (p.Schema.Minimum == nil || *p.Schema.Minimum != 1 || p.Schema.Maximum == nil || *p.Schema.Maximum > 1000) {
				t.Errorf("GET %s: limit is not bounded 1 to at most 1000: %+v", path, p.Schema)
			}
		}
		ref := op.Responses["200"].Content["application/json"].Schema.Ref
		name := strings.TrimPrefix(ref, "#/components/schemas/")
		props := doc.Components.Schemas[name].Properties
		if _, ok := props["items"]; !ok {
			t.Errorf("GET %s answers %s without items: %v", path, name, keysOf(props))
		}
		if _, ok := props["next_cursor"]; !ok {
			t.Errorf("GET %s answers %s without next_cursor: %v", path, name, keysOf(props))
		}
		for _, old := range []string{"next", "limit", "entries", "next_before_id"} {
			if _, ok := props[old]; ok {
				t.Errorf("GET %s answers %s with %q: the one page shape is {items, next_cursor}", path, name, old)
			}
		}
	}
	if lists < 8 {
		t.Fatalf("found %d list routes (GET with a cursor): the document's shape changed under this test", lists)
	}
}

func keysOf[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
