package state

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"plaita/model"
)

// TestBranchesRoundTrip: the counts survive a trip through JSON; an empty set of counts (a new
// state) stays a set of counts, and a state without them (an older engine's, or null) stays
// without.
func TestBranchesRoundTrip(t *testing.T) {
	roundTrip := func(t *testing.T, st *Execution) (*Execution, string) {
		t.Helper()
		b, err := json.Marshal(st)
		if err != nil {
			t.Fatal(err)
		}
		var back Execution
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		return &back, string(b)
	}
	counted := &Execution{ExecutionID: "ex_1", Branches: map[string]map[string]int{"more": {"true": 10000, "false": 1}, "pick": {"case 2": 3}}}
	back, b := roundTrip(t, counted)
	if !strings.Contains(b, `"branches":{"more":{"false":1,"true":10000},"pick":{"case 2":3}}`) || !reflect.DeepEqual(back.Branches, counted.Branches) {
		t.Fatalf("counts: %s → %v", b, back.Branches)
	}

	back, b = roundTrip(t, &Execution{ExecutionID: "ex_2", Branches: map[string]map[string]int{}})
	if !strings.Contains(b, `"branches":{}`) || back.Branches == nil {
		t.Fatalf("no decision yet: %s → %#v", b, back.Branches)
	}

	for _, doc := range []string{`{"execution_id":"ex_3","status":"running"}`, `{"execution_id":"ex_3","branches":null}`} {
		var old Execution
		if err := json.Unmarshal([]byte(doc), &old); err != nil {
			t.Fatal(err)
		}
		if old.Branches != nil {
			t.Fatalf("%s: counts %v", doc, old.Branches)
		}
		old.CountBranch("c", "true")
		if back, _ := roundTrip(t, &old); back.Branches != nil {
			t.Fatalf("%s: an older state was counted from the middle: %v", doc, back.Branches)
		}
	}
}

// TestCountBranchIsBounded: a node's labels stop at MaxBranchLabels, the rest counted together
// under BranchOther, so the counts still add up to every decision.
func TestCountBranchIsBounded(t *testing.T) {
	st := &Execution{Branches: map[string]map[string]int{}}
	for i := range 100 {
		st.CountBranch("sw", "case "+strings.Repeat("i", i))
		st.CountBranch("sw", "case ")
	}
	st.CountBranch("c", "")
	m := st.Branches["sw"]
	total := 0
	for _, n := range m {
		total += n
	}
	if len(m) != MaxBranchLabels || total != 200 || m[BranchOther] != 100-(MaxBranchLabels-1) || m["case "] != 101 {
		t.Fatalf("%d labels, %d decisions, %d other, %d of the first: %v", len(m), total, m[BranchOther], m["case "], m)
	}
	if _, ok := st.Branches["c"]; ok {
		t.Fatal("a decision without a label was counted")
	}
}

// A NotFoundError is an ErrNotFound (its class too) that names the execution, in the text the
// formatted error had.
func TestNotFoundErrorNamesTheExecution(t *testing.T) {
	err := error(&NotFoundError{ExecutionID: "ex_1"})
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("%v does not match ErrNotFound", err)
	}
	if want := fmt.Errorf("%w: %s", ErrNotFound, "ex_1").Error(); err.Error() != want {
		t.Fatalf("text %q, want %q", err.Error(), want)
	}
	if model.ClassOf(err) != model.NotFound {
		t.Fatalf("class %v, want NotFound", model.ClassOf(err))
	}
}
