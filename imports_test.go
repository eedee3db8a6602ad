package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The import rules of the layout (README.md, Architecture), checked on the packages' real
// import graph (go list, test files excluded). A broken rule is printed as the chain of imports
// that breaks it.
func TestImportRules(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	imports := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && (f[0] == "plaita" || strings.HasPrefix(f[0], "plaita/")) {
			imports[f[0]] = f[1:]
		}
	}
	if len(imports) < 10 {
		t.Fatalf("go list found %d packages of the module: %s", len(imports), out)
	}
	under := func(pkg, tree string) bool { return pkg == tree || strings.HasPrefix(pkg, tree+"/") }
	for _, v := range importViolations(imports, under) {
		t.Error(v)
	}
}

// rule forbids packages of a tree to reach (directly or not) any of the listed trees; an entry
// ending in "$" is that package alone (the queue may use the state model, not the engine).
type rule struct {
	from      string
	forbidden []string
	why       string
}

var importRules = []rule{
	{"plaita/engine", []string{"plaita/store", "plaita/queue", "plaita/config", "plaita/web", "plaita/roles", "plaita/cli", "plaita/control"},
		"the engine knows no storage, queue, configuration, HTTP server, role or control plane"},
	{"plaita/store", []string{"plaita/roles", "plaita/cli", "plaita/web", "plaita/config", "plaita/control"}, "storage is below the roles and reads no configuration"},
	{"plaita/queue", []string{"plaita/roles", "plaita/cli", "plaita/web", "plaita/config", "plaita/control", "plaita/engine$", "plaita/engine/nodes"},
		"the queue is below the roles and the engine"},
	{"plaita/control", []string{"plaita/roles", "plaita/cli", "plaita/web", "plaita/config", "github.com/urfave/cli/v3", "github.com/labstack/echo/v4"},
		"the control plane is shared by the CLI and the console: it prints nothing, speaks no HTTP and reads no configuration"},
	{"plaita/web", []string{"plaita/roles", "plaita/cli"}, "the console (its API and its pages) is an adapter over control/, beside the CLI, not on it"},
	{"plaita/web/api", []string{"plaita/web/ui"}, "the web UI calls the API as any caller does; the API knows nothing of the pages"},
	{"plaita/model", []string{"plaita"}, "the domain vocabulary is a leaf every layer may import: it imports only the standard library"},
	{"plaita/config", []string{"plaita/engine", "plaita/store", "plaita/queue", "plaita/control", "plaita/web", "plaita/roles", "plaita/cli", "plaita/internal"},
		"the configuration is a leaf"},
	{"plaita/internal", []string{"plaita/roles", "plaita/cli", "plaita/config", "plaita/control"}, "support packages serve the roles"},
}

// directRule forbids the packages of the trees in from to import any package of the forbidden
// trees themselves; they may reach them through the packages they do import.
type directRule struct {
	from      []string
	forbidden []string
	why       string
}

var directRules = []directRule{
	{
		from: []string{ // the front ends, one tree a line
			"plaita/cli",
			"plaita/web",
		},
		forbidden: []string{"plaita/store", "plaita/store/sqlite", "plaita/store/keys", "plaita/queue"},
		why:       "a front end reaches state through control/ (roles builds its Plane and Accounts); never a storage package",
	},
}

// importViolations lists every broken rule, with the import chain that breaks it, every direct
// import a directRule forbids, and every package outside roles/, cli/ and main that imports the
// configuration (the loader).
func importViolations(imports map[string][]string, under func(pkg, tree string) bool) []string {
	var out []string
	pkgs := make([]string, 0, len(imports))
	for p := range imports {
		pkgs = append(pkgs, p)
	}
	slices.Sort(pkgs)
	for _, r := range directRules {
		for _, p := range pkgs {
			if !slices.ContainsFunc(r.from, func(tree string) bool { return under(p, tree) }) {
				continue
			}
			for _, q := range imports[p] {
				if slices.ContainsFunc(r.forbidden, func(tree string) bool { return under(q, tree) }) {
					out = append(out, "forbidden: "+p+" → "+q+" ("+r.why+")")
				}
			}
		}
	}
	for _, r := range importRules {
		for _, p := range pkgs {
			if !under(p, r.from) {
				continue
			}
			for _, f := range r.forbidden {
				match := func(q string) bool { return under(q, f) }
				if exact, ok := strings.CutSuffix(f, "$"); ok {
					match = func(q string) bool { return q == exact }
				}
				if chain := reach(imports, p, match); chain != nil {
					out = append(out, "forbidden: "+strings.Join(chain, " → ")+" ("+r.why+")")
				}
			}
		}
	}
	for _, p := range pkgs {
		// SQL lives in store/sqlite and store/postgres (its driver for PostgreSQL): nothing else
		// opens a database or runs a migration.
		if p != "plaita/store/sqlite" && p != "plaita/store/postgres" {
			for _, q := range imports[p] {
				if q == "database/sql" || q == "modernc.org/sqlite" || strings.HasPrefix(q, "github.com/golang-migrate/migrate/v4") {
					out = append(out, "forbidden: "+p+" → "+q+" (SQL only in store/sqlite and store/postgres)")
				}
			}
		}
		// The console's API builds no Redis command: it calls control/.
		if under(p, "plaita/web") && slices.Contains(imports[p], "github.com/redis/rueidis") {
			out = append(out, "forbidden: "+p+" → github.com/redis/rueidis (the console's API calls control/; Redis commands live in store/ and queue/)")
		}
		// test/ is the tests' room (the scenarios, redistest, testutil): no program links it.
		if !under(p, "plaita/test") {
			for _, q := range imports[p] {
				if under(q, "plaita/test") {
					out = append(out, "forbidden: "+p+" → "+q+" (a test helper; import it from _test.go files only)")
				}
			}
		}
		// The shared contracts (storage, task queue, console store) are for tests: no program links them.
		for _, contract := range []string{"plaita/store/storetest", "plaita/queue/queuetest", "plaita/store/sqlite/consoletest"} {
			if slices.Contains(imports[p], contract) {
				out = append(out, "forbidden: "+p+" → "+contract+" (a test helper; import it from _test.go files only)")
			}
		}
		// A test fixture (test/…) builds a role's configuration as its process would: it runs
		// the role (webtest's local mode), it does not read the environment of a program.
		if p == "plaita" || under(p, "plaita/roles") || under(p, "plaita/cli") || under(p, "plaita/config") || under(p, "plaita/test") {
			continue
		}
		if slices.Contains(imports[p], "plaita/config") {
			out = append(out, "forbidden: "+p+" → plaita/config (only roles/, cli/ and main.go read the configuration; pass typed settings)")
		}
	}
	return out
}

// reach is the shortest import chain from p to a package matching target, or nil.
func reach(imports map[string][]string, p string, target func(string) bool) []string {
	prev := map[string]string{p: ""}
	queue := []string{p}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		for _, next := range imports[cur] {
			if _, seen := prev[next]; seen {
				continue
			}
			prev[next] = cur
			if target(next) {
				chain := []string{next}
				for at := cur; at != ""; at = prev[at] {
					chain = append([]string{at}, chain...)
				}
				return chain
			}
			queue = append(queue, next)
		}
	}
	return nil
}

// The checker itself: a graph with each kind of broken rule is reported, with its chain.
func TestImportViolationsAreFound(t *testing.T) {
	graph := map[string][]string{
		"plaita/engine":       {"plaita/engine/state", "plaita/store"},
		"plaita/engine/state": nil,
		"plaita/store":        {"plaita/engine/state"},
		"plaita/queue":        {"plaita/store", "plaita/config"},
		"plaita/config":       nil,
		"plaita/web":          {"github.com/redis/rueidis"},
		"plaita/web/api":      {"plaita/web/ui/sub"},
		"plaita/web/ui/sub":   nil,
		// The CLI imports storage directly (a sub-package of its tree too); through control it
		// may.
		"plaita/cli":            {"plaita/control", "plaita/store/keys"},
		"plaita/cli/sub":        {"plaita/queue"},
		"plaita/control":        {"plaita/store", "plaita/queue"},
		"plaita/roles/settings": {"plaita/store"},
		"plaita/model":          {"errors", "plaita/store/keys"},
		"plaita/store/keys":     nil,
		"plaita/store/sqlite":   {"plaita/test/redistest"},
	}
	under := func(pkg, tree string) bool { return pkg == tree || strings.HasPrefix(pkg, tree+"/") }
	got := importViolations(graph, under)
	for _, want := range []string{"plaita/engine → plaita/store", "plaita/queue → plaita/config", "plaita/web → github.com/redis/rueidis", "plaita/web/api → plaita/web/ui/sub",
		"plaita/cli → plaita/store/keys", "plaita/cli/sub → plaita/queue", "plaita/model → plaita/store/keys",
		"plaita/store/sqlite → plaita/test/redistest"} {
		found := false
		for _, v := range got {
			found = found || strings.Contains(v, want)
		}
		if !found {
			t.Errorf("no violation %q in %q", want, got)
		}
	}
	for _, v := range got {
		if strings.Contains(v, "plaita/cli → plaita/control") || strings.Contains(v, "plaita/roles/settings") {
			t.Errorf("a direct rule reported a path through control, or a package outside its trees: %q", v)
		}
	}
}

// Fresh tasks enter the stream through one producer path, queue.Producer (it stamps the
// generations and holds the input to PLAITA_EXECUTION_STATE_MAX_BYTES), so no producer can
// forget a step: no Go file outside package queue, tests aside, uses queue.Enqueue. Inside the
// package, Producer and the copies of existing messages (Replay, Requeue) call it.
func TestImportsOnlyTheProducerPathEnqueues(t *testing.T) {
	var uses []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && (path == "queue" || path == "testdata" || strings.HasPrefix(d.Name(), ".") && path != "."):
			return filepath.SkipDir
		case d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go"):
			return nil
		}
		found, err := enqueueUses(path, nil)
		uses = append(uses, found...)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range uses {
		t.Errorf("%s uses queue.Enqueue: enqueue fresh tasks through queue.Producer (queue/producer.go)", u)
	}
}

// enqueueUses lists where a Go file (src, or the file at path when src is nil) refers to the
// Enqueue function of plaita/queue, under whatever name the file imports the package.
func enqueueUses(path string, src any) ([]string, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p == "plaita/queue" {
			name := "queue"
			if imp.Name != nil {
				name = imp.Name.Name
			}
			names = append(names, name)
		}
	}
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok || sel.Sel.Name != "Enqueue" {
			return true
		}
		if x, ok := sel.X.(*ast.Ident); ok && slices.Contains(names, x.Name) {
			out = append(out, fset.Position(sel.Pos()).String())
		}
		return true
	})
	return out, nil
}

// The checker itself: a call and a function value are found under the package's own name and
// under an alias; a method named Enqueue of another value is not.
func TestImportsEnqueueUsesAreFound(t *testing.T) {
	src := `package x

import (
	"plaita/queue"
	q2 "plaita/queue"
)

func f(p *queue.Producer) {
	queue.Enqueue(nil, nil, "s", queue.Envelope{})
	g := q2.Enqueue
	_ = g
	p.Enqueue(nil, queue.Envelope{})
}
`
	got, err := enqueueUses("x.go", src)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !strings.HasPrefix(got[0], "x.go:9:") || !strings.HasPrefix(got[1], "x.go:10:") {
		t.Errorf("uses %q, want lines 9 and 10", got)
	}
}
