package engine

import (
	"context"
	"testing"
)

type callOutType struct{}

func (callOutType) Prepare(*Node, *PrepareContext) Runner { return callOutNode{} }

type callOutNode struct{}

func (callOutNode) Run(context.Context, *Call) (Outcome, error) { return Outcome{}, nil }

// A flow whose first step is a control node starts instantly; one that first calls out
// (any other node type) does not, and gets its state written before that step.
func TestStartsInstantly(t *testing.T) {
	reg := NewRegistry()
	reg.Register("call_out", callOutType{})
	for first, want := range map[string]bool{
		`{"id":"a","type":"set","params":{"vars":{"x":1}},"next":"z"}`:                               true,
		`{"id":"a","type":"condition","params":{"expr":"true"},"branches":{"true":"z","false":"z"}}`: true,
		`{"id":"a","type":"log","params":{"message":"hi"},"next":"z"}`:                               true,
		`{"id":"a","type":"delay","params":{"seconds":5},"next":"z"}`:                                true,
		`{"id":"a","type":"wait_event","params":{"event_type":"e"},"next":"z"}`:                      true,
		`{"id":"a","type":"approval","params":{"message":"ok?"},"next":"z"}`:                         true,
		`{"id":"a","type":"call_out","next":"z"}`:                                                    false,
	} {
		def := `{"id":"f","version":"1","start":"a","nodes":[` + first + `,{"id":"z","type":"end","params":{"output":1}}]}`
		f, err := Parse([]byte(def), reg, DefaultExprLimits)
		if err != nil {
			t.Fatalf("%s: %v", first, err)
		}
		if got := f.StartsInstantly(); got != want {
			t.Errorf("%s: StartsInstantly = %v, want %v", first, got, want)
		}
	}
}
