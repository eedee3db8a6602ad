//go:build unix

package writefile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

// FuzzConfined writes arbitrary paths (with create_dirs, in both modes) into a root that holds
// links out of it, and checks that nothing outside the root ever changes: the sibling sentinel
// directory and the common parent keep exactly what they had.
func FuzzConfined(f *testing.F) {
	for _, s := range []string{
		"x", "a/b/c", "../x", "../sentinel/x", "a/../../sentinel/x", "up/sentinel/x", "sent/x", "sent/keep",
		"abs/sentinel/x", "dot/x", "sub/../../x", "/x", "//x", "./x", "a//b", "sent", "loop/x", "..", ".",
		"sent/../x", "sub/up/sentinel/x", "\x00", "a/\x00/b", strings.Repeat("d/", 300) + "x",
	} {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, rel string, appendMode bool) {
		base := t.TempDir()
		root := filepath.Join(base, "root")
		sentinel := filepath.Join(base, "sentinel")
		for _, d := range []string{root, sentinel, filepath.Join(root, "sub")} {
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(sentinel, "keep"), []byte("keep"), 0o644); err != nil {
			t.Fatal(err)
		}
		for name, target := range map[string]string{
			"up": "..", "sent": "../sentinel", "abs": base, "dot": ".", "loop": "loop",
			"sub/up": "../..", "keep": "../sentinel/keep",
		} {
			if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
				t.Fatal(err)
			}
		}
		typ := New(Root{Path: root, Rule: RuleExplicit}, zerolog.Nop())
		abs, _, err := typ.Write(rel, []byte("fuzz"), appendMode, true)
		if err == nil && !within(root, abs) {
			t.Errorf("%q: reported %q, outside the root", rel, abs)
		}
		if got := strings.Join(listing(t, sentinel), " "); got != ". keep" {
			t.Errorf("%q: sentinel holds %s", rel, got)
		}
		if b, _ := os.ReadFile(filepath.Join(sentinel, "keep")); string(b) != "keep" {
			t.Errorf("%q: sentinel/keep is %q", rel, b)
		}
		entries, _ := os.ReadDir(base)
		if len(entries) != 2 {
			t.Errorf("%q: base holds %d entries", rel, len(entries))
		}
		if tmp := tempLeftovers(t, root); len(tmp) > 0 {
			t.Errorf("%q: temporary files left: %q", rel, tmp)
		}
	})
}

// FuzzGuarded writes arbitrary paths into a root that holds a guarded checkout and a guarded
// binary directory, reachable through links and dot dots, and checks that neither changes: no
// file below the checkout, no entry directly in the binary's directory.
func FuzzGuarded(f *testing.F) {
	for _, s := range []string{
		"x", "co/x", "co/sub/x", "c/x", "cc/sub/x", "csub/../x", "up/root/co/x", "bin/x", "bin/plaita", "b/plaita",
		"bin/d/x", "bin/sub/x", "bin/d/../x", "sub/../co/x", "co", "bin", "./co/./x", "co//x", "b", "bsub/../x",
		"loop/x", "co/../bin/x", "new/../co/x",
	} {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, rel string, appendMode bool) {
		base := t.TempDir()
		root := filepath.Join(base, "root")
		co, bin := filepath.Join(root, "co"), filepath.Join(root, "bin")
		for _, d := range []string{filepath.Join(co, "sub"), filepath.Join(bin, "sub"), filepath.Join(root, "sub")} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		for _, p := range []string{filepath.Join(co, "keep"), filepath.Join(co, "sub", "keep"), filepath.Join(bin, "plaita")} {
			if err := os.WriteFile(p, []byte("keep"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		for name, target := range map[string]string{
			"c": "co", "cc": "c", "csub": "co/sub", "b": "bin", "bsub": "bin/sub", "up": "..", "loop": "loop",
			"sub/co": "../co", "sub/b": "../b",
		} {
			if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
				t.Fatal(err)
			}
		}
		beforeCo := strings.Join(listing(t, co), " ")
		beforeBin, _ := os.ReadDir(bin)
		typ := New(Root{Path: root, Rule: RuleCwd, Guarded: []Guard{{Dir: co, Kind: GuardCheckout}, {Dir: bin, Kind: GuardExecutable}}}, zerolog.Nop())
		_, _, _ = typ.Write(rel, []byte("fuzz"), appendMode, true)
		if got := strings.Join(listing(t, co), " "); got != beforeCo {
			t.Errorf("%q: the checkout holds %s, had %s", rel, got, beforeCo)
		}
		for _, p := range []string{filepath.Join(co, "keep"), filepath.Join(co, "sub", "keep"), filepath.Join(bin, "plaita")} {
			if b, _ := os.ReadFile(p); string(b) != "keep" {
				t.Errorf("%q: %s is %q", rel, p, b)
			}
		}
		if afterBin, _ := os.ReadDir(bin); len(afterBin) != len(beforeBin) {
			t.Errorf("%q: the binary's directory has %d entries, had %d", rel, len(afterBin), len(beforeBin))
		}
	})
}
