//go:build unix

package writefile

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"plaita/engine"
	"plaita/engine/state"
	"plaita/store"
)

func run(t *testing.T, typ *Type, flow string, input any) *state.Execution {
	t.Helper()
	reg := engine.NewRegistry()
	reg.Register("writefile", typ)
	f, err := engine.Parse([]byte(flow), reg, engine.DefaultExprLimits)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	st, err := engine.NewExecutor(store.NewMemory()).Start(context.Background(), f, engine.StartRequest{Input: input})
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	return st
}

func TestThroughTheEngine(t *testing.T) {
	j := newJail(t)
	flow := `{"id": "wf", "start": "text", "nodes": [
		{"id": "text", "type": "writefile", "next": "json",
		 "params": {"path": "out/{{ INPUT.name }}.txt", "content": "hello {{ INPUT.who }}", "create_dirs": true}},
		{"id": "json", "type": "writefile", "next": "log",
		 "params": {"path": "{{ INPUT.dir }}/data.json", "content": {"n": "{{ INPUT.n }}", "list": [1, "{{ INPUT.who }}"]}}},
		{"id": "log", "type": "writefile", "next": "log2",
		 "params": {"path": "out/log", "content": "a\n", "mode": "append"}},
		{"id": "log2", "type": "writefile", "next": "end",
		 "params": {"path": "out/log", "content": "b\n", "mode": "append", "create_dirs": false}},
		{"id": "end", "type": "end", "params": {"output": "{{ NODE.text }}"}}
	]}`
	st := run(t, j.typ, flow, map[string]any{"name": "greeting", "who": "world", "n": 3, "dir": j.root + "/sub"})
	if st.Status != state.Completed {
		t.Fatalf("status %s: %+v", st.Status, st.Error)
	}
	if got := j.read(filepath.Join(j.root, "out", "greeting.txt")); got != "hello world" {
		t.Errorf("text: %q", got)
	}
	if got := j.read(filepath.Join(j.root, "sub", "data.json")); got != `{"list":[1,"world"],"n":3}` {
		t.Errorf("json: %q", got)
	}
	if got := j.read(filepath.Join(j.root, "out", "log")); got != "a\nb\n" {
		t.Errorf("log: %q", got)
	}
	out, _ := st.Output.(map[string]any)
	if out["path"] != filepath.Join(j.root, "out", "greeting.txt") || out["bytes"] != float64(len("hello world")) {
		t.Errorf("output %#v", st.Output)
	}
}

func TestThroughTheEngineEscape(t *testing.T) {
	for _, path := range []string{"../escape.txt", "linkdir/x", "linkfile", "{{ INPUT.p }}"} {
		t.Run(path, func(t *testing.T) {
			j := newJail(t)
			flow := `{"id": "wf", "start": "w", "nodes": [
				{"id": "w", "type": "writefile", "next": "end", "retry": {"max_attempts": 3},
				 "params": {"path": "` + path + `", "content": "pwned"}},
				{"id": "end", "type": "end"}
			]}`
			st := run(t, j.typ, flow, map[string]any{"p": filepath.Join(j.outside, "secret")})
			if st.Status != state.Error || st.Error == nil {
				t.Fatalf("status %s", st.Status)
			}
			if st.Error.Node != "w" || !st.Error.Permanent || !strings.Contains(st.Error.Message, "escapes workspace_root") ||
				!strings.Contains(st.Error.Message, VarWorkspaceRoot) {
				t.Errorf("error %+v", st.Error)
			}
			for _, e := range st.Timeline {
				if e.Event == "retry" {
					t.Errorf("retried a refused write: %+v", e)
				}
			}
			j.assertOutsideUntouched()
		})
	}
}

func TestRuntimeErrors(t *testing.T) {
	j := newJail(t)
	for _, tc := range []struct{ path, want string }{
		{"{{ INPUT.n }}", "path is a number, not a string"},
		{"{{ INPUT.missing }}", "path is null, not a string"},
		{"{{ INPUT.empty }}", "path is empty"},
	} {
		flow := `{"id": "wf", "start": "w", "nodes": [
			{"id": "w", "type": "writefile", "next": "end", "params": {"path": "` + tc.path + `", "content": "x"}},
			{"id": "end", "type": "end"}
		]}`
		st := run(t, j.typ, flow, map[string]any{"n": 1, "empty": ""})
		if st.Status != state.Error || st.Error.Node != "w" || !st.Error.Permanent || !strings.Contains(st.Error.Message, tc.want) {
			t.Errorf("%s: %s %+v", tc.path, st.Status, st.Error)
		}
	}
}

func TestParamsValidation(t *testing.T) {
	typ := New(Root{Path: t.TempDir(), Rule: RuleExplicit}, zerolog.Nop())
	reg := engine.NewRegistry()
	reg.Register("writefile", typ)
	flow := `{"id": "wf", "start": "a", "nodes": [
		{"id": "a", "type": "writefile", "next": "b", "params": {"mode": "truncate", "create_dirs": "yes", "extra": 1}},
		{"id": "b", "type": "writefile", "next": "c", "params": {"path": "", "content": null}},
		{"id": "c", "type": "writefile", "next": "d", "params": {"path": 7, "content": "{{ nope( }}"}},
		{"id": "d", "type": "writefile", "next": "end", "params": {"path": "{{ UNKNOWN.x }}", "content": {"k": ["{{ }}"]}}},
		{"id": "end", "type": "end"}
	]}`
	_, err := engine.Parse([]byte(flow), reg, engine.DefaultExprLimits)
	var ve *engine.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("got %v", err)
	}
	got := map[string]bool{}
	for _, p := range ve.Problems {
		got[p.Path] = true
	}
	for _, want := range []string{
		"nodes[0].params.path", "nodes[0].params.content", "nodes[0].params.mode", "nodes[0].params.create_dirs",
		"nodes[0].params.extra",
		"nodes[1].params.path", "nodes[1].params.content",
		"nodes[2].params.path", "nodes[2].params.content",
		"nodes[3].params.path", "nodes[3].params.content.k[0]",
	} {
		if !got[want] {
			t.Errorf("no problem at %s; problems:\n%v", want, err)
		}
	}
}

// The writefile type is an engine node type (checked by the compiler).
var _ engine.NodeType = (*Type)(nil)
