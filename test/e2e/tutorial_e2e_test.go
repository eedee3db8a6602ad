//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"plaita/test/redistest"
)

// A page walked by a test: every ```sh block of it runs, in order, in one bash session (what a
// block exports, the directory it enters and the roles it starts in the background stay for the
// next ones), and a ```text block right after a ```sh block is what that block prints on its
// standard output — line by line, where "…" stands for any text (an id, a time, a duration).
// A command that fails fails the walk.

type pageBlock struct {
	line   int    // of the opening fence
	code   string // the commands
	output string // the ```text block after it ("" when none)
	hasOut bool
}

// pageBlocks reads the ```sh blocks of a markdown page and the ```text block that follows each.
func pageBlocks(t *testing.T, path string) []pageBlock {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var (
		blocks  []pageBlock
		fence   string // the open block's info string; "" outside a block
		start   int
		body    []string
		between bool // only blank lines since the last sh block closed
	)
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case fence == "" && strings.HasPrefix(line, "```"):
			fence, start, body = strings.TrimSpace(strings.TrimPrefix(line, "```")), n, nil
		case fence != "" && strings.TrimSpace(line) == "```":
			text := strings.Join(body, "\n")
			switch {
			case fence == "sh":
				blocks = append(blocks, pageBlock{line: start, code: text})
				between = true
			case fence == "text" && between:
				blocks[len(blocks)-1].output, blocks[len(blocks)-1].hasOut = text, true
				between = false
			default:
				between = false
			}
			fence = ""
		case fence != "":
			body = append(body, line)
		case strings.TrimSpace(line) != "":
			between = false
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if fence != "" {
		t.Fatalf("%s: the block opened at line %d is not closed", path, start)
	}
	return blocks
}

// matchPage reports where got differs from want, a page's ```text block ("" when they match).
func matchPage(want, got string) string {
	wl := strings.Split(strings.TrimRight(want, "\n"), "\n")
	gl := strings.Split(strings.TrimRight(got, "\n"), "\n")
	for i, w := range wl {
		if i >= len(gl) {
			return fmt.Sprintf("line %d: want %q, the output ends", i+1, w)
		}
		parts := strings.Split(strings.TrimRight(w, " "), "…")
		for j := range parts {
			parts[j] = regexp.QuoteMeta(parts[j])
		}
		re := regexp.MustCompile("^" + strings.Join(parts, ".*?") + "$")
		if !re.MatchString(strings.TrimRight(gl[i], " ")) {
			return fmt.Sprintf("line %d: want %q, got %q", i+1, w, gl[i])
		}
	}
	if len(gl) > len(wl) {
		return fmt.Sprintf("line %d: the output goes on: %q", len(wl)+1, gl[len(wl)])
	}
	return ""
}

func TestPageMatcher(t *testing.T) {
	for _, tc := range []struct {
		want, got string
		ok        bool
	}{
		{"execution ex_…: completed", "execution ex_9e0b: completed", true},
		{"execution ex_…: completed", "execution ex_9e0b: suspended", false},
		{"a\nb", "a\nb\nc", false},
		{"a\nb", "a", false},
		{"  duration:  …", "  duration:  1.05ms", true},
		{"x (y)", "x (y)", true},
	} {
		if got := matchPage(tc.want, tc.got); (got == "") != tc.ok {
			t.Errorf("%q against %q: %q", tc.want, tc.got, got)
		}
	}
}

// TestTutorialWalk runs docs/tutorial.md as a new user would, from a clone: `go install .` into
// a GOBIN of the test's, a HOME of its own, a private Redis as PLAITA_REDIS_URL.
func TestTutorialWalk(t *testing.T) {
	t.Parallel()
	page := filepath.Join(repoRoot, "docs", "tutorial.md")
	blocks := pageBlocks(t, page)
	if len(blocks) < 5 {
		t.Fatalf("%s has %d sh blocks: nothing to walk", page, len(blocks))
	}
	srv := redistest.StartServer(t)
	home := t.TempDir()
	bin := filepath.Join(home, "go-bin")
	outDir := t.TempDir()

	// One script: each block runs in the session's shell with its stdout in a file of its own,
	// then the block's number is recorded, so a failure names its block.
	var script strings.Builder
	script.WriteString("set -eo pipefail\n")
	for i, b := range blocks {
		fmt.Fprintf(&script, "echo %d > %s\n{\n%s\n} > %s\n", i, filepath.Join(outDir, "at"), b.code, filepath.Join(outDir, fmt.Sprintf("out-%d", i)))
	}
	script.WriteString("echo done > " + filepath.Join(outDir, "at") + "\n")

	goEnv := func(name string) string {
		out, err := exec.Command("go", "env", name).Output()
		if err != nil {
			t.Fatalf("go env %s: %v", name, err)
		}
		return strings.TrimSpace(string(out))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script.String())
	cmd.Dir = repoRoot
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// The roles a block starts in the background are in the session's process group: all go at
	// the end.
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.Env = append(os.Environ(),
		"HOME="+home, "GOBIN="+bin, "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		// The module and build caches stay the machine's (a new HOME would move them).
		"GOCACHE="+goEnv("GOCACHE"), "GOMODCACHE="+goEnv("GOMODCACHE"), "GOPATH="+goEnv("GOPATH"),
		"PLAITA_REDIS_URL="+srv.URL(), "CGO_ENABLED=0")
	stderr, err := os.Create(filepath.Join(outDir, "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer stderr.Close()
	cmd.Stderr = stderr
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	runErr := cmd.Run()

	at, _ := os.ReadFile(filepath.Join(outDir, "at"))
	errText, _ := os.ReadFile(filepath.Join(outDir, "stderr"))
	if runErr != nil {
		i := strings.TrimSpace(string(at))
		var n int
		if _, err := fmt.Sscan(i, &n); err == nil && n < len(blocks) {
			out, _ := os.ReadFile(filepath.Join(outDir, fmt.Sprintf("out-%d", n)))
			t.Fatalf("the block at %s:%d failed: %v\n%s\nstdout:\n%s\nstderr (the session's):\n%s", page, blocks[n].line, runErr, blocks[n].code, out, tail(string(errText), 60))
		}
		t.Fatalf("the walk failed after block %s: %v\nstderr:\n%s", i, runErr, tail(string(errText), 60))
	}
	for i, b := range blocks {
		if !b.hasOut {
			continue
		}
		out, err := os.ReadFile(filepath.Join(outDir, fmt.Sprintf("out-%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		if diff := matchPage(b.output, string(out)); diff != "" {
			t.Errorf("%s:%d: the page shows another output than the commands print: %s\ncommands:\n%s\nprinted:\n%s", page, b.line, diff, b.code, out)
		}
	}
}
