//go:build e2e

package e2e

// Definitions the process-level suites share with the in-process ones of test/cluster (each
// package keeps its own copy: test files cannot be imported).

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const orderFlow = `{"id": "order", "version": "1", "start": "wait", "nodes": [
  {"id": "wait", "type": "wait_event", "params": {"event_type": "order.paid", "match": "EVENT.order_id == INPUT.order_id", "timeout": 3600}, "next": "done"},
  {"id": "done", "type": "end"}]}`

// hintCommand returns the command printed on the line after the one holding label, as words
// without the leading "plaita"; ok is false when there is no such label.
func hintCommand(t *testing.T, out, label string) ([]string, bool) {
	t.Helper()
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		if strings.Contains(l, label) && i+1 < len(lines) {
			words := shellWords(t, strings.TrimSpace(lines[i+1]))
			if len(words) == 0 || words[0] != "plaita" {
				t.Fatalf("the line after %q is not a plaita command:\n%s", label, out)
			}
			return words[1:], true
		}
	}
	return nil, false
}

// shellWords splits a printed command the way sh does for what the hints use: words separated
// by spaces, single-quoted strings, and '\” for a quote inside one.
func shellWords(t *testing.T, line string) []string {
	t.Helper()
	var words []string
	var cur strings.Builder
	inWord, quoted := false, false
	for i := 0; i < len(line); i++ {
		ch := line[i]
		switch {
		case quoted && ch == '\'':
			quoted = false
		case quoted:
			cur.WriteByte(ch)
		case ch == '\'':
			quoted, inWord = true, true
		case ch == '\\' && i+1 < len(line):
			i++
			cur.WriteByte(line[i])
			inWord = true
		case ch == ' ':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(ch)
			inWord = true
		}
	}
	if quoted {
		t.Fatalf("unterminated quote in %q", line)
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

func readState(t *testing.T, stateDir, id string) savedExecution {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(stateDir, id+".json"))
	if err != nil {
		t.Fatalf("state file: %v", err)
	}
	var st savedExecution
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatalf("state file is not JSON: %v\n%s", err, b)
	}
	return st
}

type savedExecution struct {
	ExecutionID string         `json:"execution_id"`
	FlowID      string         `json:"flow_id"`
	Status      string         `json:"status"`
	CurrentNode string         `json:"current_node"`
	StepCount   int            `json:"step_count"`
	Output      any            `json:"output"`
	Context     map[string]any `json:"context"`
	Suspend     *struct {
		Kind      string `json:"kind"`
		Node      string `json:"node"`
		EventType string `json:"event_type"`
		Message   string `json:"message"`
	} `json:"suspend"`
	Error *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
		Node    string `json:"node"`
	} `json:"error"`
	Timeline []struct {
		Seq   int    `json:"seq"`
		Event string `json:"event"`
		Node  string `json:"node"`
	} `json:"timeline"`
}

func noStateFile(t *testing.T, stateDir, id string) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(stateDir, id+".json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("state file of %s still there (stat: %v)", id, err)
	}
}
