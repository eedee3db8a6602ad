// Package writefile is the writefile node type: it writes a file, confined to one directory
// tree (the jail root, PLAITA_NODES_WORKSPACE_ROOT) unless the operator turned the jail off with
// PLAITA_ALLOW_UNRESTRICTED_WRITES=1.
//
// The jail root is chosen once per process by ResolveRoot (docs/flows.md, writefile):
//
//  1. an explicit PLAITA_NODES_WORKSPACE_ROOT, used verbatim;
//  2. PLAITA_ALLOW_UNRESTRICTED_WRITES=1: no jail;
//  3. derived, fail-closed: PLAITA_PROJECT_ROOT, then the working directory, then the home
//     directory. "/" (or an empty value) is never a boundary: the next candidate is tried. A
//     candidate inside plaita's own checkout (the checkout itself or below) is replaced by the
//     checkout's parent, one level only.
//
// An explicit root of "/" is no boundary either, but it is the operator's word: it is used,
// with a WARNING, and treated like PLAITA_ALLOW_UNRESTRICTED_WRITES=1 (for trusted
// single-host deployments only, never multi-tenant): a write of any tenant but the default one
// is refused. Whatever the root, plaita's own directories inside it are guarded (see Guard):
// stepping out of the checkout is for cross-repository writes, not for flows to rewrite the
// engine or replace its binary.
package writefile

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// The configuration variables the jail depends on.
const (
	VarWorkspaceRoot     = "PLAITA_NODES_WORKSPACE_ROOT"
	VarAllowUnrestricted = "PLAITA_ALLOW_UNRESTRICTED_WRITES"
	VarProjectRoot       = "PLAITA_PROJECT_ROOT"
)

// Facts are everything ResolveRoot looks at. The caller gathers them (the three variables'
// values, read once at start by roles; the rest from the host, see HostFacts).
type Facts struct {
	WorkspaceRoot     string // PLAITA_NODES_WORKSPACE_ROOT ("" = unset or blank)
	AllowUnrestricted bool   // PLAITA_ALLOW_UNRESTRICTED_WRITES is exactly 1
	ProjectRoot       string // PLAITA_PROJECT_ROOT ("" = unset)
	Cwd               string // the process's working directory ("" = unknown)
	Home              string // the home directory ("" = unknown)
	Checkout          string // plaita's own checkout (the directory of its go.mod); "" = unknown
	// ExecutableDir is the directory of the running plaita binary (os.Executable, symbolic
	// links resolved); "" = unknown.
	ExecutableDir string
}

// Rule says which rule chose the jail root.
type Rule string

// The rules, in the order ResolveRoot tries them.
const (
	RuleExplicit     Rule = VarWorkspaceRoot
	RuleUnrestricted Rule = VarAllowUnrestricted + "=1"
	RuleProjectRoot  Rule = VarProjectRoot
	RuleCwd          Rule = "working directory"
	RuleHome         Rule = "home directory"
)

// Root is the resolved jail root.
type Root struct {
	Path         string // the jail root; "" when Unrestricted
	Unrestricted bool   // no jail: writes go anywhere the process may write
	Rule         Rule   // the rule that chose it
	// SteppedFrom is the candidate that lay inside plaita's checkout, when Path is the
	// checkout's parent instead; "" otherwise.
	SteppedFrom string
	// Checkout is plaita's checkout when the root was stepped up from inside it.
	Checkout string
	// Skipped lists the derived candidates that were passed over, and why.
	Skipped []string
	// NoBoundary: an explicit root that is "/" (or resolves to it): jailed in name only.
	NoBoundary bool
	// Guarded are plaita's own directories, never written even when they lie inside the root.
	Guarded []Guard
}

// GuardKind says what a guarded directory is.
type GuardKind string

// The guarded directories.
const (
	// GuardExecutable is the directory of the running plaita binary: no file is written
	// directly in it (the binary, its siblings: external node executables, configuration).
	GuardExecutable GuardKind = "the directory of the running plaita binary"
	// GuardCheckout is plaita's source checkout: nothing is written anywhere below it, unless
	// the root is the checkout or lies inside it (only an explicit root can: the operator
	// pointed the jail there).
	GuardCheckout GuardKind = "plaita's source checkout"
)

// Guard is one directory flows may not write into.
type Guard struct {
	Dir  string // absolute and cleaned
	Kind GuardKind
}

// LogLine is the start-up log line: "writefile jail: <root> (<rule>)", followed by the guarded
// directories that lie inside the root.
func (r Root) LogLine() string {
	var line string
	switch {
	case r.Unrestricted:
		return fmt.Sprintf("writefile jail: unrestricted (%s): flows may write anywhere the process can", r.Rule)
	case r.SteppedFrom != "":
		line = fmt.Sprintf("writefile jail: %s (%s %s is inside plaita's checkout %s: its parent)",
			r.Path, r.Rule, r.SteppedFrom, r.Checkout)
	default:
		line = fmt.Sprintf("writefile jail: %s (%s)", r.Path, r.Rule)
	}
	var inside []string
	for _, g := range r.Guarded {
		if filepath.IsAbs(r.Path) && within(filepath.Clean(r.Path), g.Dir) {
			inside = append(inside, fmt.Sprintf("%s (%s)", g.Dir, g.Kind))
		}
	}
	if len(inside) > 0 {
		line += "; never written: " + strings.Join(inside, ", ")
	}
	return line
}

// Where says where writefile nodes write and what chose it, in the words of the lines a user
// reads first (plaita run's summary, plaita dev's first lines; a role's start-up line carries
// the root and the rule as fields):
//
//	under /srv/ws (PLAITA_NODES_WORKSPACE_ROOT)
//	under /home/me/work (the working directory; PLAITA_NODES_WORKSPACE_ROOT sets another)
//	under /home/me/src (the working directory /home/me/src/plaita is inside plaita's checkout
//	  /home/me/src/plaita, so its parent; PLAITA_NODES_WORKSPACE_ROOT sets another)
//	anywhere the process may write (PLAITA_ALLOW_UNRESTRICTED_WRITES=1)
//
// A relative explicit root is shown as the working directory makes it.
func (r Root) Where() string {
	rule := string(r.Rule)
	if r.Rule == RuleCwd || r.Rule == RuleHome {
		rule = "the " + rule
	}
	switch {
	case r.Unrestricted:
		return fmt.Sprintf("anywhere the process may write (%s)", r.Rule)
	case r.Rule == RuleExplicit:
		p := r.Path
		if a, err := filepath.Abs(p); err == nil {
			p = a
		}
		return fmt.Sprintf("under %s (%s)", p, VarWorkspaceRoot)
	case r.SteppedFrom != "":
		return fmt.Sprintf("under %s (%s %s is inside plaita's checkout %s, so its parent; %s sets another)",
			r.Path, rule, r.SteppedFrom, r.Checkout, VarWorkspaceRoot)
	}
	return fmt.Sprintf("under %s (%s; %s sets another)", r.Path, rule, VarWorkspaceRoot)
}

// Warning is what the caller logs at WARNING level, "" when there is nothing to warn about.
// WarningEvent names the event of that line.
func (r Root) Warning() string {
	switch {
	case r.Unrestricted:
		return "writefile jail is off (" + string(RuleUnrestricted) + "): any flow author can write any file " +
			"the process can, and writes of tenants other than the default one are refused; set " + VarWorkspaceRoot +
			" instead unless this is a trusted single-host deployment"
	case r.NoBoundary:
		return noBoundaryWarning(r.Path)
	}
	return ""
}

// WarningEvent is the event field of the Warning line: writefile.unrestricted or
// writefile.no_boundary.
func (r Root) WarningEvent() string {
	if r.NoBoundary {
		return eventNoBoundary
	}
	return "writefile.unrestricted"
}

const eventNoBoundary = "writefile.no_boundary"

func noBoundaryWarning(root string) string {
	return fmt.Sprintf("writefile jail root %s=%s is / and so no boundary: any flow author can write any file the process "+
		"can, as with %s, and writes of tenants other than the default one are refused; set %s to a directory below /",
		VarWorkspaceRoot, root, RuleUnrestricted, VarWorkspaceRoot)
}

// guards lists plaita's own directories that f knows (absolute ones only: a relative fact is
// no evidence of where they are).
func guards(f Facts) []Guard {
	var out []Guard
	for _, g := range []Guard{{f.ExecutableDir, GuardExecutable}, {f.Checkout, GuardCheckout}} {
		if g.Dir != "" && filepath.IsAbs(g.Dir) {
			out = append(out, Guard{Dir: filepath.Clean(g.Dir), Kind: g.Kind})
		}
	}
	return out
}

// ResolveRoot chooses the jail root from f. It is pure: it neither reads the environment nor
// touches the file system (so it does not check that the root exists; opening it at write time
// does). Derived candidates are compared lexically, after filepath.Clean; a relative derived
// candidate is taken relative to f.Cwd (and skipped when f.Cwd is not absolute).
func ResolveRoot(f Facts) (Root, error) {
	if f.WorkspaceRoot != "" {
		p := f.WorkspaceRoot
		if !filepath.IsAbs(p) && filepath.IsAbs(f.Cwd) {
			p = filepath.Join(f.Cwd, p)
		}
		return Root{Path: f.WorkspaceRoot, Rule: RuleExplicit, Guarded: guards(f),
			NoBoundary: filepath.IsAbs(p) && isFSRoot(filepath.Clean(p))}, nil
	}
	if f.AllowUnrestricted {
		return Root{Unrestricted: true, Rule: RuleUnrestricted}, nil
	}
	checkout := ""
	if f.Checkout != "" {
		checkout = filepath.Clean(f.Checkout)
	}
	var skipped []string
	candidates := []struct {
		rule Rule
		path string
	}{{RuleProjectRoot, f.ProjectRoot}, {RuleCwd, f.Cwd}, {RuleHome, f.Home}}
	for _, c := range candidates {
		if c.path == "" {
			continue
		}
		p := c.path
		if !filepath.IsAbs(p) {
			if !filepath.IsAbs(f.Cwd) {
				skipped = append(skipped, fmt.Sprintf("%s %q: relative and the working directory is unknown", c.rule, c.path))
				continue
			}
			p = filepath.Join(f.Cwd, p)
		}
		p = filepath.Clean(p)
		if isFSRoot(p) {
			skipped = append(skipped, fmt.Sprintf("%s %s: / is not a boundary", c.rule, c.path))
			continue
		}
		if checkout != "" && within(checkout, p) {
			parent := filepath.Dir(checkout)
			if isFSRoot(parent) {
				skipped = append(skipped, fmt.Sprintf("%s %s: inside plaita's checkout %s, whose parent is /", c.rule, p, checkout))
				continue
			}
			return Root{Path: parent, Rule: c.rule, SteppedFrom: p, Checkout: checkout, Skipped: skipped, Guarded: guards(f)}, nil
		}
		return Root{Path: p, Rule: c.rule, Skipped: skipped, Guarded: guards(f)}, nil
	}
	why := "none is set"
	if len(skipped) > 0 {
		why = strings.Join(skipped, "; ")
	}
	return Root{}, fmt.Errorf("writefile jail: no usable root: %s is unset, %s is not 1, and no derived candidate "+
		"(%s, working directory, home directory) is a boundary (%s); set %s",
		VarWorkspaceRoot, VarAllowUnrestricted, VarProjectRoot, why, VarWorkspaceRoot)
}

// isFSRoot reports whether the cleaned absolute path p is a file system root ("/", or a volume
// root on Windows).
func isFSRoot(p string) bool { return filepath.Dir(p) == p }

// within reports whether p is dir itself or lies below it (both cleaned, lexically).
func within(dir, p string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && filepath.IsLocal(rel)
}

// FindCheckout walks up from start looking for a go.mod whose module is plaita, and returns
// the directory that holds it; "" when there is none (or start is "").
func FindCheckout(start string) string {
	if start == "" {
		return ""
	}
	dir, err := filepath.Abs(start)
	if err != nil {
		return ""
	}
	for {
		if modulePath(filepath.Join(dir, "go.mod")) == "plaita" {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// modulePath reads the module path of a go.mod ("" when unreadable or absent).
func modulePath(gomod string) string {
	data, err := os.ReadFile(gomod)
	if err != nil {
		return ""
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := sc.Text()
		if i := strings.Index(line, "//"); i >= 0 {
			line = line[:i]
		}
		fields := strings.Fields(line)
		if len(fields) != 2 || fields[0] != "module" {
			continue
		}
		if uq, err := strconv.Unquote(fields[1]); err == nil {
			return uq
		}
		return fields[1]
	}
	return ""
}

// HostFacts fills Facts from the three configuration values and the host: the working
// directory, the home directory, the directory of the running executable (symbolic links
// resolved, so that a link in a bin directory names the real binary's home) and plaita's
// checkout (found from the working directory, else from that directory). The caller still
// decides what to do with the result.
func HostFacts(workspaceRoot string, allowUnrestricted bool, projectRoot string) Facts {
	f := Facts{WorkspaceRoot: workspaceRoot, AllowUnrestricted: allowUnrestricted, ProjectRoot: projectRoot}
	if wd, err := os.Getwd(); err == nil {
		f.Cwd = wd
	}
	if h, err := os.UserHomeDir(); err == nil {
		f.Home = h
	}
	if exe, err := os.Executable(); err == nil {
		if r, err := filepath.EvalSymlinks(exe); err == nil {
			exe = r
		}
		f.ExecutableDir = filepath.Dir(exe)
	}
	f.Checkout = FindCheckout(f.Cwd)
	if f.Checkout == "" {
		f.Checkout = FindCheckout(f.ExecutableDir)
	}
	return f
}
