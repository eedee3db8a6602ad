package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"plaita/engine"
	"plaita/graph"
)

// TestFlowGraphDrawsTheConsolesPicture: `plaita flow graph FLOW.json` prints the SVG the
// console's flow page shows, byte for byte; an invalid flow is exit 2 with its problems.
func TestFlowGraphDrawsTheConsolesPicture(t *testing.T) {
	path := filepath.Join("..", "examples", "expense-approval.json")
	var stdout, stderr bytes.Buffer
	err := App(&stdout, &stderr).Run(context.Background(), []string{"plaita", "flow", "graph", path, "--quiet"})
	if err != nil {
		t.Fatalf("flow graph: %v\n%s", err, stderr.String())
	}
	def, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := engine.Parse(def, engine.NewRegistry(), engine.DefaultExprLimits)
	if err != nil {
		t.Fatal(err)
	}
	want, err := graph.New().SVG(f, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(stdout.Bytes(), want) {
		t.Fatalf("the CLI's picture differs from the console's:\n%s", stdout.String())
	}

	stdout.Reset()
	bad := filepath.Join("..", "testdata", "invalid-flows", "unknown-next-target.json")
	err = App(&stdout, &stderr).Run(context.Background(), []string{"plaita", "flow", "graph", bad, "--quiet"})
	if code := ExitCode(err, &stderr); code != ExitRejected || stdout.Len() != 0 || !bytes.Contains(stderr.Bytes(), []byte(`nodes[0].next: unknown node "fial"`)) {
		t.Fatalf("invalid flow: exit %d, stdout %q, stderr %s", code, stdout.String(), stderr.String())
	}
}
