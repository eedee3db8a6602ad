//go:build unix

package writefile

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"plaita/engine"
	"plaita/engine/state"
	"plaita/store"
)

// runAs runs a one-node writefile flow as tenant and returns the final state.
func runAs(t *testing.T, typ *Type, tenant, path string) *state.Execution {
	t.Helper()
	reg := engine.NewRegistry()
	reg.Register("writefile", typ)
	flow := `{"id": "wf", "start": "w", "nodes": [
		{"id": "w", "type": "writefile", "next": "end", "params": {"path": "{{ INPUT.p }}", "content": "x"}},
		{"id": "end", "type": "end"}
	]}`
	f, err := engine.Parse([]byte(flow), reg, engine.DefaultExprLimits)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	st, err := engine.NewExecutor(store.NewMemory()).Start(context.Background(), f,
		engine.StartRequest{TenantID: tenant, Input: map[string]any{"p": path}})
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	return st
}

func TestSlashIsNoBoundary(t *testing.T) {
	for _, f := range []Facts{
		{WorkspaceRoot: "/"},
		{WorkspaceRoot: "//"},
		{WorkspaceRoot: "/tmp/.."},
		{WorkspaceRoot: "../..", Cwd: "/srv/app"},
	} {
		r, err := ResolveRoot(f)
		if err != nil {
			t.Fatal(err)
		}
		if !r.NoBoundary || r.Path != f.WorkspaceRoot || r.Rule != RuleExplicit {
			t.Errorf("%+v: got %+v, want the explicit value verbatim, marked NoBoundary", f, r)
		}
		w := r.Warning()
		for _, s := range []string{VarWorkspaceRoot, "no boundary", "tenant"} {
			if !strings.Contains(w, s) {
				t.Errorf("%+v: warning %q does not say %q", f, w, s)
			}
		}
	}
	for _, f := range []Facts{{WorkspaceRoot: "/srv"}, {WorkspaceRoot: "work", Cwd: "/"}, {WorkspaceRoot: "work"}} {
		if r, _ := ResolveRoot(f); r.NoBoundary || r.Warning() != "" {
			t.Errorf("%+v: got %+v (warning %q)", f, r, r.Warning())
		}
	}
}

// A root with no boundary serves the default tenant (a trusted single-host deployment) and
// refuses every other one, whether the jail is off or its root is "/".
func TestNoBoundaryRefusesOtherTenants(t *testing.T) {
	base := t.TempDir()
	alias := filepath.Join(base, "alias")
	if err := os.Symlink("/", alias); err != nil {
		t.Fatal(err)
	}
	roots := map[string]Root{
		"unrestricted":    {Unrestricted: true, Rule: RuleUnrestricted},
		"slash":           {Path: "/", Rule: RuleExplicit, NoBoundary: true},
		"slash, unmarked": {Path: "/", Rule: RuleExplicit},
		"a link to slash": {Path: alias, Rule: RuleExplicit},
	}
	for name, root := range roots {
		t.Run(name, func(t *testing.T) {
			typ := New(root, zerolog.Nop())
			for _, tenant := range []string{"", "default"} {
				p := filepath.Join(base, name+"-"+tenant+".txt")
				if st := runAs(t, typ, tenant, p); st.Status != state.Completed {
					t.Errorf("tenant %q: %s %+v", tenant, st.Status, st.Error)
				}
			}
			p := filepath.Join(base, name+"-acme.txt")
			st := runAs(t, typ, "acme", p)
			if st.Status != state.Error || st.Error == nil || !st.Error.Permanent || st.Error.Node != "w" {
				t.Fatalf("tenant acme: %s %+v", st.Status, st.Error)
			}
			want := VarWorkspaceRoot
			if root.Unrestricted {
				want = string(RuleUnrestricted)
			}
			for _, s := range []string{`tenant "acme"`, want, "no boundary"} {
				if !strings.Contains(st.Error.Message, s) {
					t.Errorf("error %q does not say %q", st.Error.Message, s)
				}
			}
			if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the refused write left %s: %v", p, err)
			}
		})
	}
}

// New warns about a root that turns out to be "/" only on the file system (a link to it),
// which ResolveRoot, being pure, cannot see.
func TestNewWarnsAboutALinkToSlash(t *testing.T) {
	alias := filepath.Join(t.TempDir(), "alias")
	if err := os.Symlink("/", alias); err != nil {
		t.Fatal(err)
	}
	var logs strings.Builder
	New(Root{Path: alias, Rule: RuleExplicit}, zerolog.New(&logs))
	if !strings.Contains(logs.String(), `"level":"warn","event":"writefile.no_boundary"`) || !strings.Contains(logs.String(), alias) {
		t.Errorf("no warning: %q", logs.String())
	}
	logs.Reset()
	New(Root{Path: "/", Rule: RuleExplicit, NoBoundary: true}, zerolog.New(&logs))
	New(Root{Path: t.TempDir(), Rule: RuleExplicit}, zerolog.New(&logs))
	if logs.Len() != 0 {
		t.Errorf("New logged %q: a root marked NoBoundary is the caller's warning, a real directory none", logs.String())
	}
}

func TestResolveRootGuards(t *testing.T) {
	exe := Guard{Dir: "/opt/plaita/bin", Kind: GuardExecutable}
	co := Guard{Dir: "/w/plaita", Kind: GuardCheckout}
	for _, tc := range []struct {
		name string
		f    Facts
		want []Guard
	}{
		{"derived, stepped out of the checkout", Facts{Cwd: "/w/plaita/engine", Checkout: "/w/plaita", ExecutableDir: "/opt/plaita/bin/"}, []Guard{exe, co}},
		{"derived, checkout found from the binary", Facts{Cwd: "/w", Checkout: "/w/plaita"}, []Guard{co}},
		{"explicit", Facts{WorkspaceRoot: "/w", Checkout: "/w/plaita", ExecutableDir: "/opt/plaita/bin"}, []Guard{exe, co}},
		{"unrestricted: no jail, nothing to guard", Facts{AllowUnrestricted: true, Checkout: "/w/plaita", ExecutableDir: "/opt/plaita/bin"}, nil},
		{"unknown", Facts{Cwd: "/w"}, nil},
		{"relative facts are ignored", Facts{Cwd: "/w", Checkout: "plaita", ExecutableDir: "bin"}, nil},
	} {
		r, err := ResolveRoot(tc.f)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(r.Guarded, tc.want) {
			t.Errorf("%s: guarded %+v, want %+v", tc.name, r.Guarded, tc.want)
		}
	}
}

// guarded is a deployment root holding plaita's checkout, the directory of its binary and a
// business repository.
type guarded struct {
	*jail
	checkout, bin string
}

func newGuarded(t *testing.T) *guarded {
	t.Helper()
	j := newJail(t)
	g := &guarded{jail: j, checkout: filepath.Join(j.root, "plaita"), bin: filepath.Join(j.root, "bin")}
	for _, d := range []string{filepath.Join(g.checkout, "engine"), filepath.Join(g.bin, "sub"), filepath.Join(j.root, "repo")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	j.file(filepath.Join(g.checkout, "go.mod"), "module plaita\n")
	j.file(filepath.Join(g.checkout, "main.go"), "package main\n")
	j.file(filepath.Join(g.bin, "plaita"), "binary")
	j.link("plaita", "eng")           // an inside link to the checkout
	j.link("plaita/engine", "engdir") // and to a directory below it
	j.link("bin/plaita", "binlink")   // to the binary
	return g
}

// root resolves the jail the way a worker started in the checkout's engine directory does.
func (g *guarded) typeFor(t *testing.T, f Facts) *Type {
	t.Helper()
	f.Checkout, f.ExecutableDir = g.checkout, g.bin
	r, err := ResolveRoot(f)
	if err != nil {
		t.Fatal(err)
	}
	return New(r, zerolog.Nop())
}

func (g *guarded) assertUntouched(t *testing.T) {
	t.Helper()
	if got := strings.Join(listing(t, g.checkout), " "); got != ". engine go.mod main.go" {
		t.Errorf("checkout holds %s", got)
	}
	if got := g.read(filepath.Join(g.checkout, "main.go")); got != "package main\n" {
		t.Errorf("main.go is now %q", got)
	}
	entries, err := os.ReadDir(g.bin)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if got := strings.Join(names, " "); got != "plaita sub" {
		t.Errorf("bin holds %s", got)
	}
	if got := g.read(filepath.Join(g.bin, "plaita")); got != "binary" {
		t.Errorf("the binary is now %q", got)
	}
}

func assertGuarded(t *testing.T, err error, kind GuardKind, dir string) {
	t.Helper()
	if err == nil {
		t.Fatal("the write was allowed")
	}
	var ge *GuardError
	if !errors.As(err, &ge) || !errors.Is(err, ErrGuarded) || ge.Guard.Kind != kind {
		t.Fatalf("error is not a %s GuardError: %v", kind, err)
	}
	for _, s := range []string{string(kind), dir, VarWorkspaceRoot} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not say %q", err, s)
		}
	}
	if !engine.IsPermanent(err) || errors.Is(err, ErrEscapes) {
		t.Errorf("error is not a permanent refusal of its own: %v", err)
	}
}

func TestGuardedDirectoriesRefused(t *testing.T) {
	for _, tc := range []struct {
		name       string
		path       func(g *guarded) string
		kind       GuardKind
		append     bool
		createDirs bool
	}{
		{name: "a checkout file", path: func(*guarded) string { return "plaita/main.go" }, kind: GuardCheckout},
		{name: "a checkout file, append", path: func(*guarded) string { return "plaita/main.go" }, kind: GuardCheckout, append: true},
		{name: "a new file in the checkout", path: func(*guarded) string { return "plaita/engine/new.go" }, kind: GuardCheckout},
		{name: "a new directory in the checkout", path: func(*guarded) string { return "plaita/new/x.go" }, kind: GuardCheckout, createDirs: true},
		{name: "the checkout by its absolute path", path: func(g *guarded) string { return filepath.Join(g.checkout, "main.go") }, kind: GuardCheckout},
		{name: "the checkout through a dot dot", path: func(*guarded) string { return "repo/../plaita/main.go" }, kind: GuardCheckout},
		{name: "the checkout through an inside link", path: func(*guarded) string { return "eng/main.go" }, kind: GuardCheckout},
		{name: "below the checkout through an inside link", path: func(*guarded) string { return "engdir/x.go" }, kind: GuardCheckout},
		{name: "the checkout through a link and a dot dot", path: func(*guarded) string { return "engdir/../main.go" }, kind: GuardCheckout, append: true},
		{name: "the binary", path: func(*guarded) string { return "bin/plaita" }, kind: GuardExecutable},
		{name: "the binary, append", path: func(*guarded) string { return "bin/plaita" }, kind: GuardExecutable, append: true},
		{name: "a new file beside the binary", path: func(*guarded) string { return "bin/plaita-node-x" }, kind: GuardExecutable},
		{name: "the binary through an inside link", path: func(*guarded) string { return "binlink" }, kind: GuardExecutable},
		{name: "a new directory beside the binary", path: func(*guarded) string { return "bin/newdir/x" }, kind: GuardExecutable, createDirs: true},
		{name: "a new directory beside the binary, dot dot", path: func(*guarded) string { return "bin/newdir/../y" }, kind: GuardExecutable, createDirs: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newGuarded(t)
			typ := g.typeFor(t, Facts{Cwd: filepath.Join(g.checkout, "engine")})
			if typ.Root().Path != g.jail.root {
				t.Fatalf("root %q, want the checkout's parent %q", typ.Root().Path, g.jail.root)
			}
			dir := g.checkout
			if tc.kind == GuardExecutable {
				dir = g.bin
			}
			_, _, err := typ.Write(tc.path(g), []byte("pwned"), tc.append, tc.createDirs)
			g.assertUntouched(t)
			assertGuarded(t, err, tc.kind, dir)
			if tc.kind == GuardCheckout && !strings.Contains(err.Error(), string(RuleCwd)) {
				t.Errorf("error %q does not say where the root came from", err)
			}
		})
	}
}

func TestGuardedNeighboursAllowed(t *testing.T) {
	g := newGuarded(t)
	typ := g.typeFor(t, Facts{Cwd: filepath.Join(g.checkout, "engine")})
	for _, p := range []string{"repo/out.txt", "plaita-other/x", "new/x", "bin/sub/x", "top.txt"} {
		if _, _, err := typ.Write(p, []byte("ok"), false, true); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	g.assertUntouched(t)
	if got := strings.Join(listing(t, filepath.Join(g.bin, "sub")), " "); got != ". x" {
		t.Errorf("bin/sub holds %s: a directory below the binary's is not guarded", got)
	}
}

func TestGuardsOfExplicitRoots(t *testing.T) {
	t.Run("above the checkout: guarded", func(t *testing.T) {
		g := newGuarded(t)
		typ := g.typeFor(t, Facts{WorkspaceRoot: g.jail.root})
		_, _, err := typ.Write("plaita/main.go", []byte("pwned"), false, false)
		assertGuarded(t, err, GuardCheckout, g.checkout)
		_, _, err = typ.Write("bin/plaita", []byte("pwned"), false, false)
		assertGuarded(t, err, GuardExecutable, g.bin)
		g.assertUntouched(t)
	})
	t.Run("the checkout itself, named by the operator: writable", func(t *testing.T) {
		g := newGuarded(t)
		typ := g.typeFor(t, Facts{WorkspaceRoot: g.checkout})
		if _, _, err := typ.Write("engine/gen.go", []byte("package engine\n"), false, false); err != nil {
			t.Error(err)
		}
	})
	t.Run("the binary's directory as the root: its files are guarded, not its subdirectories", func(t *testing.T) {
		g := newGuarded(t)
		typ := g.typeFor(t, Facts{WorkspaceRoot: g.bin})
		_, _, err := typ.Write("plaita", []byte("pwned"), false, false)
		assertGuarded(t, err, GuardExecutable, g.bin)
		_, _, err = typ.Write("new", []byte("pwned"), true, false)
		assertGuarded(t, err, GuardExecutable, g.bin)
		if _, _, err := typ.Write("sub/x", []byte("ok"), false, false); err != nil {
			t.Error(err)
		}
	})
	t.Run("a root reached through a link", func(t *testing.T) {
		g := newGuarded(t)
		alias := filepath.Join(g.base, "alias")
		if err := os.Symlink("root", alias); err != nil {
			t.Fatal(err)
		}
		typ := g.typeFor(t, Facts{WorkspaceRoot: alias})
		_, _, err := typ.Write(filepath.Join(alias, "plaita", "main.go"), []byte("pwned"), false, false)
		assertGuarded(t, err, GuardCheckout, g.checkout)
		_, _, err = typ.Write("bin/plaita", []byte("pwned"), true, false)
		assertGuarded(t, err, GuardExecutable, g.bin)
		g.assertUntouched(t)
	})
}

func TestHostFactsExecutableDir(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Skip("os.Executable:", err)
	}
	if r, err := filepath.EvalSymlinks(exe); err == nil {
		exe = r
	}
	if f := HostFacts("", false, ""); f.ExecutableDir != filepath.Dir(exe) {
		t.Errorf("ExecutableDir %q, want %q", f.ExecutableDir, filepath.Dir(exe))
	}
}
