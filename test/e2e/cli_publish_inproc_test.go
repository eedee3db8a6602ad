//go:build !e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"plaita/engine/state"
	"plaita/store/keys"
)

const shipV1 = `{"id": "ship", "version": "v1", "start": "ask", "nodes": [
  {"id": "ask", "type": "approval", "params": {"message": "Ship {{ INPUT.what }}?"}, "next": "done"},
  {"id": "done", "type": "end", "params": {"output": {"approved": "{{ NODE.ask.approved }}"}}}]}`

// TestCLIPublishedVersionIsImmutable: a (flow id, version) once published keeps its definition.
// Publishing the same definition again is a no-op; a different one is refused before anything is
// enqueued, so executions suspended on the published definition can still be resumed.
func TestCLIPublishedVersionIsImmutable(t *testing.T) {
	t.Parallel()
	s := newStack(t, withEnv(cliEnv()))
	env := s.env
	s.start("worker", nil)
	c := s.c
	ctx := context.Background()
	sp := keys.MustFor("", "")
	stored := func() string {
		t.Helper()
		def, err := c.Do(ctx, c.B().Get().Key(sp.Flow("ship", "v1")).Build()).ToString()
		if err != nil {
			t.Fatalf("read the published definition: %v", err)
		}
		return def
	}
	// The worker deletes what it acknowledges, so the stream's length moves on its own; the
	// last id the stream generated moves only with an XADD.
	lastAdded := func() string {
		t.Helper()
		info, err := c.Do(ctx, c.B().XinfoStream().Key("plaita:flow:queue").Build()).AsMap()
		if err != nil {
			t.Fatal(err)
		}
		last := info["last-generated-id"]
		id, err := last.ToString()
		if err != nil {
			t.Fatal(err)
		}
		return id
	}

	flow := writeFile(t, "ship.json", shipV1)
	out, r := startFile(t, env, flow, "--input", `{"what":"v2"}`)
	if r.code != 0 || !out.Published || out.AlreadyPublished == nil || *out.AlreadyPublished || out.FlowVersion != "v1" {
		t.Fatalf("first publication: exit %d %+v\n%s\n%s", r.code, out, r.stdout, r.stderr)
	}
	suspended := out.ExecutionID
	s.waitStatus(suspended, "", state.Suspended, 30*time.Second)

	// The same file, and the same definition written differently: already published, untouched.
	compact := strings.Join(strings.Fields(shipV1), " ")
	for _, def := range []string{shipV1, compact} {
		out, r = startFile(t, env, writeFile(t, "ship.json", def))
		if r.code != 0 || out.Published || out.AlreadyPublished == nil || !*out.AlreadyPublished {
			t.Fatalf("republishing the same definition: exit %d %+v\n%s\n%s", r.code, out, r.stdout, r.stderr)
		}
		if got := stored(); got != shipV1 {
			t.Fatalf("republishing the same definition rewrote it:\n%s", got)
		}
	}

	// A changed definition under the same version is refused: nothing written, nothing enqueued.
	changed := strings.Replace(shipV1, "Ship {{", "Send {{", 1)
	changedFile := writeFile(t, "ship.json", changed)
	before := lastAdded()
	r = run(t, env, "start", changedFile, "--quiet")
	if r.code != 1 {
		t.Fatalf("changed definition under v1: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"ship", `"v1"`, "already published", `"version"`, "--version"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("refusal lacks %q:\n%s", want, r.stderr)
		}
	}
	if got := stored(); got != shipV1 {
		t.Fatalf("the refused publication overwrote the definition:\n%s", got)
	}
	if id := lastAdded(); id != before {
		t.Fatalf("the refused start enqueued a message (last id %s, was %s)", id, before)
	}

	// The execution suspended on v1 still resumes and completes.
	if r = run(t, env, "execution", "resume", suspended, "--type", "approval", "--data", `{"approved":true}`, "--quiet"); r.code != 0 {
		t.Fatalf("resume: exit %d\n%s", r.code, r.stderr)
	}
	s.waitStatus(suspended, "", state.Completed, 30*time.Second)

	// The change published as a new version.
	out, r = startFile(t, env, writeFile(t, "ship.json", strings.Replace(changed, `"v1"`, `"v2"`, 1)))
	if r.code != 0 || !out.Published || out.FlowVersion != "v2" {
		t.Fatalf("new version: exit %d %+v\n%s", r.code, out, r.stderr)
	}

	// A file without "version", published with --version: the hint names --version.
	bare := strings.Replace(shipV1, `"version": "v1", `, "", 1)
	if out, r = startFile(t, env, writeFile(t, "bare.json", bare), "--version", "v9"); r.code != 0 || !out.Published {
		t.Fatalf("--version v9: exit %d %+v\n%s", r.code, out, r.stderr)
	}
	r = run(t, env, "start", writeFile(t, "bare.json", strings.Replace(bare, "Ship {{", "Send {{", 1)), "--version", "v9", "--quiet")
	if r.code != 1 || !strings.Contains(r.stderr, `"v9"`) || !strings.Contains(r.stderr, "--version") {
		t.Fatalf("changed definition under --version v9: exit %d\n%s", r.code, r.stderr)
	}
}
