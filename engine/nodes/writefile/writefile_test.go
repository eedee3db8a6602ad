//go:build unix

package writefile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"plaita/engine"
)

// jail is a root directory with a sibling "outside" holding a secret, and links out of the root.
type jail struct {
	t       *testing.T
	base    string
	root    string
	outside string
	typ     *Type
}

func newJail(t *testing.T) *jail {
	t.Helper()
	base := t.TempDir()
	j := &jail{t: t, base: base, root: filepath.Join(base, "root"), outside: filepath.Join(base, "outside")}
	for _, d := range []string{j.root, j.outside, filepath.Join(j.root, "sub")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	j.file(filepath.Join(j.outside, "secret"), "secret")
	j.file(filepath.Join(j.root, "sub", "inside.txt"), "inside")
	j.link(j.outside, "linkdir")                                    // absolute link to a directory outside
	j.link("../outside", "reldir")                                  // relative link to a directory outside
	j.link(filepath.Join(j.outside, "secret"), "linkfile")          // a file outside
	j.link("../outside/secret", "relfile")                          // same, relative
	j.link(filepath.Join(j.outside, "nothing"), "dangling")         // dangling, outside
	j.link("../outside/nothing-rel", "reldangling")                 // dangling, outside, relative
	j.link("sub", "inlink")                                         // a directory inside
	j.link("sub/inside.txt", "infile")                              // a file inside
	j.link(filepath.Join(j.root, "sub", "inside.txt"), "absinfile") // absolute, pointing inside
	j.typ = New(Root{Path: j.root, Rule: RuleExplicit}, zerolog.Nop())
	return j
}

func (j *jail) file(p, s string) {
	j.t.Helper()
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		j.t.Fatal(err)
	}
}

func (j *jail) link(target, name string) {
	j.t.Helper()
	if err := os.Symlink(target, filepath.Join(j.root, name)); err != nil {
		j.t.Fatal(err)
	}
}

func (j *jail) read(p string) string {
	j.t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		j.t.Fatal(err)
	}
	return string(b)
}

// listing is every path under dir (relative), for before/after comparisons.
func listing(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out = append(out, rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

func (j *jail) assertOutsideUntouched() {
	j.t.Helper()
	if got := strings.Join(listing(j.t, j.outside), " "); got != ". secret" {
		j.t.Errorf("outside holds %s", got)
	}
	if got := j.read(filepath.Join(j.outside, "secret")); got != "secret" {
		j.t.Errorf("secret is now %q", got)
	}
	if got := strings.Join(listing(j.t, j.base), " "); !strings.HasPrefix(got, ". outside outside/secret root") {
		j.t.Errorf("base holds %s", got)
	}
}

func assertEscape(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		t.Fatal("the write was allowed")
	}
	if !errors.Is(err, ErrEscapes) {
		t.Errorf("error is not ErrEscapes: %v", err)
	}
	for _, s := range []string{"escapes workspace_root", VarWorkspaceRoot} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not contain %q", err, s)
		}
	}
	if !engine.IsPermanent(err) {
		t.Errorf("error is not permanent: %v", err)
	}
}

func TestEscapesRefused(t *testing.T) {
	tests := []struct {
		name       string
		path       func(j *jail) string
		append     bool
		createDirs bool
	}{
		{name: "dot dot", path: func(*jail) string { return "../x" }},
		{name: "dot dot to a sibling", path: func(*jail) string { return "../outside/new" }},
		{name: "dot dot after a directory", path: func(*jail) string { return "a/../../x" }},
		{name: "dot dot with create_dirs", path: func(*jail) string { return "a/../../outside/d/x" }, createDirs: true},
		{name: "absolute outside", path: func(j *jail) string { return filepath.Join(j.outside, "x") }},
		{name: "absolute outside, existing file", path: func(j *jail) string { return filepath.Join(j.outside, "secret") }},
		{name: "absolute root prefix without separator", path: func(j *jail) string { return j.root + "-evil/x" }},
		{name: "absolute dot dot out of the root", path: func(j *jail) string { return j.root + "/../outside/x" }},
		{name: "slash", path: func(*jail) string { return "/" }},
		{name: "/etc/passwd", path: func(*jail) string { return "/etc/passwd" }},
		{name: "symlink directory (absolute) pointing outside", path: func(*jail) string { return "linkdir/x" }},
		{name: "symlink directory (relative) pointing outside", path: func(*jail) string { return "reldir/x" }},
		{name: "symlink directory pointing outside, overwrite existing", path: func(*jail) string { return "linkdir/secret" }},
		{name: "symlink directory pointing outside, create_dirs", path: func(*jail) string { return "linkdir/d/x" }, createDirs: true},
		{name: "symlink directory pointing outside, append", path: func(*jail) string { return "reldir/x" }, append: true},
		{name: "symlink final component pointing outside", path: func(*jail) string { return "linkfile" }},
		{name: "symlink final component (relative) pointing outside", path: func(*jail) string { return "relfile" }},
		{name: "dangling symlink pointing outside", path: func(*jail) string { return "dangling" }},
		{name: "dangling symlink (relative) pointing outside", path: func(*jail) string { return "reldangling" }},
		{name: "dangling symlink pointing outside, append", path: func(*jail) string { return "dangling" }, append: true},
		{name: "symlink to a file outside, append", path: func(*jail) string { return "linkfile" }, append: true},
		{name: "symlink (relative) to a file outside, append", path: func(*jail) string { return "relfile" }, append: true},
		{name: "dot dot through an inside link", path: func(*jail) string { return "inlink/../../outside/x" }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			j := newJail(t)
			_, _, err := j.typ.Write(tc.path(j), []byte("pwned"), tc.append, tc.createDirs)
			assertEscape(t, err)
			j.assertOutsideUntouched()
			if tmp := tempLeftovers(t, j.root); len(tmp) > 0 {
				t.Errorf("temporary files left: %q", tmp)
			}
		})
	}
}

// TestEscapeDetection pins the os.Root error text that isEscape matches: if a Go release changes
// it, this fails instead of symlink escapes turning into plain errors.
func TestEscapeDetection(t *testing.T) {
	j := newJail(t)
	r, err := os.OpenRoot(j.root)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, name := range []string{"linkdir/x", "linkfile", "../x"} {
		_, err := r.OpenFile(name, os.O_WRONLY|os.O_CREATE, 0o644)
		if !isEscape(err) {
			t.Errorf("os.Root error for %q is not recognised as an escape: %v", name, err)
		}
	}
	if isEscape(fs.ErrNotExist) || isEscape(nil) {
		t.Error("isEscape is too broad")
	}
}

func tempLeftovers(t *testing.T, dir string) []string {
	var out []string
	for _, p := range listing(t, dir) {
		if strings.HasPrefix(filepath.Base(p), ".plaita-writefile-") {
			out = append(out, p)
		}
	}
	return out
}

func TestAllowedWrites(t *testing.T) {
	t.Run("nested path with create_dirs", func(t *testing.T) {
		j := newJail(t)
		abs, n, err := j.typ.Write("a/b/c.txt", []byte("hello"), false, true)
		if err != nil {
			t.Fatal(err)
		}
		want := filepath.Join(j.root, "a", "b", "c.txt")
		if abs != want || n != 5 || j.read(want) != "hello" {
			t.Errorf("got %q %d %q", abs, n, j.read(want))
		}
		fi, _ := os.Stat(filepath.Join(j.root, "a", "b"))
		if fi.Mode().Perm() != 0o755&^umask() {
			t.Errorf("directory mode %v", fi.Mode().Perm())
		}
		fi, _ = os.Stat(want)
		if fi.Mode().Perm() != 0o644&^umask() {
			t.Errorf("file mode %v", fi.Mode().Perm())
		}
		// again: the directories exist already
		if _, _, err := j.typ.Write("a/b/c.txt", []byte("again"), false, true); err != nil || j.read(want) != "again" {
			t.Errorf("second write: %v", err)
		}
	})
	t.Run("missing directory without create_dirs", func(t *testing.T) {
		j := newJail(t)
		_, _, err := j.typ.Write("nope/c.txt", []byte("x"), false, false)
		if err == nil || !engine.IsPermanent(err) || !strings.Contains(err.Error(), "create_dirs") || errors.Is(err, ErrEscapes) {
			t.Errorf("got %v", err)
		}
		_, _, err = j.typ.Write("nope/c.txt", []byte("x"), true, false)
		if err == nil || !engine.IsPermanent(err) {
			t.Errorf("append: got %v", err)
		}
	})
	t.Run("absolute path inside", func(t *testing.T) {
		j := newJail(t)
		p := filepath.Join(j.root, "sub", "abs.txt")
		abs, n, err := j.typ.Write(p, []byte("abs"), false, false)
		if err != nil || abs != p || n != 3 || j.read(p) != "abs" {
			t.Errorf("got %q %d %v", abs, n, err)
		}
		// spelt with a harmless dot dot
		p2 := j.root + "/sub/../sub/abs2.txt"
		if abs, _, err := j.typ.Write(p2, []byte("x"), false, false); err != nil || abs != filepath.Join(j.root, "sub", "abs2.txt") {
			t.Errorf("got %q %v", abs, err)
		}
	})
	t.Run("absolute path through a symlinked root", func(t *testing.T) {
		j := newJail(t)
		alias := filepath.Join(j.base, "alias")
		if err := os.Symlink("root", alias); err != nil {
			t.Fatal(err)
		}
		typ := New(Root{Path: alias, Rule: RuleExplicit}, zerolog.Nop())
		// the real path and the alias both name the inside
		for _, p := range []string{filepath.Join(j.root, "r.txt"), filepath.Join(alias, "a.txt")} {
			if _, _, err := typ.Write(p, []byte("x"), false, false); err != nil {
				t.Errorf("%s: %v", p, err)
			}
		}
		_, _, err := typ.Write(filepath.Join(j.outside, "x"), []byte("x"), false, false)
		assertEscape(t, err)
	})
	t.Run("append twice", func(t *testing.T) {
		j := newJail(t)
		for range 2 {
			if _, n, err := j.typ.Write("log.txt", []byte("line\n"), true, false); err != nil || n != 5 {
				t.Fatalf("%d %v", n, err)
			}
		}
		if got := j.read(filepath.Join(j.root, "log.txt")); got != "line\nline\n" {
			t.Errorf("got %q", got)
		}
	})
	t.Run("overwrite replaces and keeps the mode", func(t *testing.T) {
		j := newJail(t)
		p := filepath.Join(j.root, "f.txt")
		j.file(p, "a much longer old content")
		if err := os.Chmod(p, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, _, err := j.typ.Write("f.txt", []byte("new"), false, false); err != nil {
			t.Fatal(err)
		}
		if got := j.read(p); got != "new" {
			t.Errorf("got %q", got)
		}
		if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o600 {
			t.Errorf("mode %v, want 0600 kept", fi.Mode().Perm())
		}
		if tmp := tempLeftovers(t, j.root); len(tmp) > 0 {
			t.Errorf("temporary files left: %q", tmp)
		}
	})
	t.Run("symlink inside is written through", func(t *testing.T) {
		j := newJail(t)
		if _, _, err := j.typ.Write("infile", []byte("through"), false, false); err != nil {
			t.Fatal(err)
		}
		if got := j.read(filepath.Join(j.root, "sub", "inside.txt")); got != "through" {
			t.Errorf("target holds %q", got)
		}
		if fi, _ := os.Lstat(filepath.Join(j.root, "infile")); fi.Mode()&os.ModeSymlink == 0 {
			t.Error("the link was replaced")
		}
		if _, _, err := j.typ.Write("infile", []byte("+"), true, false); err != nil {
			t.Fatal(err)
		}
		if got := j.read(filepath.Join(j.root, "sub", "inside.txt")); got != "through+" {
			t.Errorf("target holds %q", got)
		}
	})
	t.Run("symlinked directory inside", func(t *testing.T) {
		j := newJail(t)
		abs, _, err := j.typ.Write("inlink/new.txt", []byte("x"), false, false)
		if err != nil || abs != filepath.Join(j.root, "inlink", "new.txt") {
			t.Fatalf("%q %v", abs, err)
		}
		if got := j.read(filepath.Join(j.root, "sub", "new.txt")); got != "x" {
			t.Errorf("got %q", got)
		}
		if _, _, err := j.typ.Write("inlink/d/e.txt", []byte("x"), false, true); err != nil {
			t.Fatal(err)
		}
		if got := j.read(filepath.Join(j.root, "sub", "d", "e.txt")); got != "x" {
			t.Errorf("got %q", got)
		}
	})
	t.Run("harmless dot dot inside", func(t *testing.T) {
		j := newJail(t)
		if _, _, err := j.typ.Write("sub/../top.txt", []byte("x"), false, false); err != nil {
			t.Fatal(err)
		}
		if got := j.read(filepath.Join(j.root, "top.txt")); got != "x" {
			t.Errorf("got %q", got)
		}
	})
	t.Run("empty content", func(t *testing.T) {
		j := newJail(t)
		if _, n, err := j.typ.Write("empty", nil, false, false); err != nil || n != 0 {
			t.Fatalf("%d %v", n, err)
		}
		if got := j.read(filepath.Join(j.root, "empty")); got != "" {
			t.Errorf("got %q", got)
		}
	})
}

// An absolute symbolic link is refused by os.Root even when it points inside the root.
func TestAbsoluteSymlinkInsideRefused(t *testing.T) {
	j := newJail(t)
	_, _, err := j.typ.Write("absinfile", []byte("x"), false, false)
	assertEscape(t, err)
	if got := j.read(filepath.Join(j.root, "sub", "inside.txt")); got != "inside" {
		t.Errorf("target holds %q", got)
	}
}

func TestNotAFile(t *testing.T) {
	j := newJail(t)
	for _, p := range []string{"sub", "sub/", ".", "sub/.", "sub/..", j.root} {
		for _, appendMode := range []bool{false, true} {
			_, _, err := j.typ.Write(p, []byte("x"), appendMode, false)
			if err == nil || !engine.IsPermanent(err) || errors.Is(err, ErrEscapes) {
				t.Errorf("%q append=%t: %v", p, appendMode, err)
			}
		}
	}
	if fi, err := os.Stat(filepath.Join(j.root, "sub")); err != nil || !fi.IsDir() {
		t.Errorf("sub was replaced: %v", err)
	}
}

func TestFIFORefusedWithoutHanging(t *testing.T) {
	j := newJail(t)
	fifo := filepath.Join(j.root, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skip("mkfifo:", err)
	}
	j.link("fifo", "fifolink")
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, p := range []string{"fifo", "fifolink"} {
			for _, appendMode := range []bool{false, true} {
				if _, _, err := j.typ.Write(p, []byte("x"), appendMode, false); err == nil {
					t.Errorf("%s append=%t: written", p, appendMode)
				}
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("writing to a FIFO hangs")
	}
	if fi, err := os.Lstat(fifo); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("the FIFO was replaced: %v", err)
	}
}

func TestMissingRootIsRetryable(t *testing.T) {
	typ := New(Root{Path: filepath.Join(t.TempDir(), "missing"), Rule: RuleCwd}, zerolog.Nop())
	_, _, err := typ.Write("x", []byte("x"), false, false)
	if err == nil || engine.IsPermanent(err) || !strings.Contains(err.Error(), VarWorkspaceRoot) {
		t.Errorf("got %v", err)
	}
}

func TestDerivedRootErrorNamesTheVariable(t *testing.T) {
	j := newJail(t)
	typ := New(Root{Path: j.root, Rule: RuleProjectRoot}, zerolog.Nop())
	_, _, err := typ.Write("../x", []byte("x"), false, false)
	assertEscape(t, err)
	if !strings.Contains(err.Error(), "derived from the "+string(RuleProjectRoot)) {
		t.Errorf("got %v", err)
	}
}

func TestUnrestricted(t *testing.T) {
	base := t.TempDir()
	typ := New(Root{Unrestricted: true, Rule: RuleUnrestricted}, zerolog.Nop())
	p := filepath.Join(base, "anywhere", "x.txt")
	abs, n, err := typ.Write(p, []byte("free"), false, true)
	if err != nil || abs != p || n != 4 {
		t.Fatalf("%q %d %v", abs, n, err)
	}
	// a relative path is relative to the working directory; links are followed wherever they go
	t.Chdir(base)
	if err := os.Symlink(filepath.Join(base, "anywhere"), "l"); err != nil {
		t.Fatal(err)
	}
	abs, _, err = typ.Write("l/../anywhere/y.txt", []byte("y"), false, false)
	if err != nil || abs != filepath.Join(base, "anywhere", "y.txt") {
		t.Fatalf("%q %v", abs, err)
	}
	if _, _, err := typ.Write("l/x.txt", []byte("+"), true, false); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "free+" {
		t.Errorf("got %q", b)
	}
}

func TestContentBytes(t *testing.T) {
	for _, tc := range []struct {
		in   any
		want string
	}{
		{"plain <b>text</b>\n", "plain <b>text</b>\n"},
		{map[string]any{"b": []any{true, nil}, "a": 1.0, "h": "<&>"}, `{"a":1,"b":[true,null],"h":"<&>"}`},
		{[]any{1.5, "x"}, `[1.5,"x"]`},
		{nil, "null"},
		{false, "false"},
		{42, "42"},
	} {
		got, err := contentBytes(tc.in)
		if err != nil || string(got) != tc.want {
			t.Errorf("contentBytes(%#v) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func umask() os.FileMode {
	m := syscall.Umask(0)
	syscall.Umask(m)
	return os.FileMode(m)
}

// A hard link names the same file as its other names, wherever they are: a file outside the
// root hard-linked into it must not be written through the inside name, in either mode, nor
// through an inside symbolic link that points at that name.
func TestHardLinkRefused(t *testing.T) {
	for _, name := range []string{"hard", "sub/hard", "viahard"} {
		for _, appendMode := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s append=%t", name, appendMode), func(t *testing.T) {
				j := newJail(t)
				for _, p := range []string{"hard", "sub/hard"} {
					if err := os.Link(filepath.Join(j.outside, "secret"), filepath.Join(j.root, p)); err != nil {
						t.Skip("hard links:", err)
					}
				}
				j.link("hard", "viahard")
				_, _, err := j.typ.Write(name, []byte("pwned"), appendMode, false)
				j.assertOutsideUntouched()
				assertEscape(t, err)
				if !strings.Contains(err.Error(), "hard link") {
					t.Errorf("error %q does not name the hard link", err)
				}
				if tmp := tempLeftovers(t, j.root); len(tmp) > 0 {
					t.Errorf("temporary files left: %q", tmp)
				}
			})
		}
	}
}
