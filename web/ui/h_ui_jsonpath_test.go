package ui

import (
	"encoding/json"
	"fmt"
	"testing"

	"plaita/web/api"
)

// TestPathLines: every path of a definition maps to the line of its key, in the validator's
// path syntax, so a problem is shown on the line it is about.
func TestPathLines(t *testing.T) {
	src := []byte(`{
  "id": "x",
  "nodes": [
    {"id": "a", "type": "log",
     "params": {"message": "hi", "list": [1, {"deep": true}]},
     "next": "b"},
    {
      "id": "b",
      "type": "end"
    }
  ],
  "start": "a"
}`)
	got := pathLines(src)
	for path, line := range map[string]int{"": 1, "id": 2, "nodes": 3, "nodes[0]": 4, "nodes[0].id": 4, "nodes[0].params": 5,
		"nodes[0].params.list[1].deep": 5, "nodes[0].next": 6, "nodes[1]": 7, "nodes[1].type": 9, "start": 12} {
		if got[path] != line {
			t.Errorf("%s: line %d, want %d", path, got[path], line)
		}
	}
	ps := placeProblems(src, []api.FlowProblem{{Path: "nodes[1].next", Message: "is required"}, {Path: "nodes[0].params.url", Message: "x"}, {Path: "", Message: "y"}})
	if ps[0].Line != 7 || ps[1].Line != 5 || ps[2].Line != 1 {
		t.Fatalf("placed %+v", ps)
	}
	if p := syntaxProblem([]byte("{\n  \"id\": \"x\",\n  oops\n}")); p == nil || p.Line != 3 {
		t.Fatalf("syntax problem %+v", p)
	}
}

// TestPrettyKeepsTheDefinitionAsWritten: the HTML escapes encoding/json adds come back as the
// characters, an escaped backslash before "u003c" stays, and the JSON stays the same JSON.
func TestPrettyKeepsTheDefinitionAsWritten(t *testing.T) {
	in := `{"expr":"a \u003c= 1 \u0026\u0026 b \u003e 2","lit":"\\u003c"}`
	got := pretty([]byte(in))
	want := "{\n  \"expr\": \"a <= 1 && b > 2\",\n  \"lit\": \"\\\\u003c\"\n}"
	if got != want {
		t.Fatalf("pretty:\n%s\nwant\n%s", got, want)
	}
	var a, b any
	if json.Unmarshal([]byte(in), &a) != nil || json.Unmarshal([]byte(got), &b) != nil || fmt.Sprint(a) != fmt.Sprint(b) {
		t.Fatalf("not the same JSON: %v / %v", a, b)
	}
}
