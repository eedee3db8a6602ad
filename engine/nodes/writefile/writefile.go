package writefile

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/rs/zerolog"

	"plaita/engine"
)

// ErrEscapes is what every refused write matches with errors.Is.
var ErrEscapes = errors.New("escapes workspace_root")

// EscapeError is a write refused because its path leaves the jail root ("..", an absolute
// path elsewhere, or a symbolic link pointing out).
type EscapeError struct {
	Path  string // the path the flow asked for
	Root  string // the jail root
	Rule  Rule   // which rule chose the root
	Cause error  // what os.Root reported, when it was the one to refuse; nil for lexical refusals
}

func (e *EscapeError) Error() string {
	how := "set by " + VarWorkspaceRoot
	if e.Rule != RuleExplicit {
		how = fmt.Sprintf("derived from the %s; set %s to choose another", e.Rule, VarWorkspaceRoot)
	}
	msg := fmt.Sprintf("writefile: path %q %s %s (%s)", e.Path, ErrEscapes, e.Root, how)
	if e.Cause != nil {
		msg += ": " + e.Cause.Error()
	}
	return msg
}

func (e *EscapeError) Unwrap() error { return ErrEscapes }

// ErrGuarded is what every write into one of plaita's own directories matches with errors.Is.
var ErrGuarded = errors.New("lands in plaita's own files")

// GuardError is a write refused because it lands in one of plaita's own directories (Guard),
// although inside the root.
type GuardError struct {
	Path  string // the path the flow asked for
	Guard Guard  // the directory it lands in
	Root  string // the jail root
	Rule  Rule   // which rule chose the root
}

func (e *GuardError) Error() string {
	where := "directly in" // GuardExecutable
	if e.Guard.Kind == GuardCheckout {
		where = "inside"
	}
	how := "set by " + VarWorkspaceRoot
	if e.Rule != RuleExplicit {
		how = "derived from the " + string(e.Rule)
	}
	return fmt.Sprintf("writefile: path %q %s: %s %s %s, which flows may not write even inside workspace_root %s "+
		"(%s; set %s to a root that does not hold it); not written",
		e.Path, ErrGuarded, where, e.Guard.Kind, e.Guard.Dir, e.Root, how, VarWorkspaceRoot)
}

func (e *GuardError) Unwrap() error { return ErrGuarded }

// ErrNoBoundary is what a write refused for its tenant matches with errors.Is: the root is no
// boundary (the jail is off, or its root is "/").
var ErrNoBoundary = errors.New("no boundary")

// defaultTenant is the tenant a root without a boundary serves (like the code node's subprocess
// backend); an execution without a tenant belongs to it.
const defaultTenant = "default"

// Type is the writefile node type:
//
//	{"type": "writefile", "params": {"path": "out/{{ INPUT.name }}.json", "content": {...},
//	 "mode": "overwrite"|"append", "create_dirs": false}}
//
// Output: {"path": the absolute path written, "bytes": how many bytes were written}.
type Type struct {
	root Root
	abs  string // root.Path made absolute, for reports and for absolute paths in params
	real string // abs with its symbolic links resolved (best effort), likewise
	log  zerolog.Logger
	// noBoundary: writes may go anywhere (unrestricted, or a root that is "/"); only the
	// default tenant writes.
	noBoundary bool
	// guards are the root.Guarded directories that lie inside the root, relative to it.
	guards []relGuard
}

// relGuard is a guarded directory as a path relative to the root ("." is the root itself).
type relGuard struct {
	rel string
	Guard
}

// New returns the node type writing under root. The root is opened at every write, so it may
// be created after start-up; a root that cannot be opened fails the write (retryably). The
// root and the guarded directories are compared with their symbolic links resolved, now: a
// root that turns out to be "/" is logged as a WARNING here (ResolveRoot, which does not look
// at the file system, cannot tell).
func New(root Root, log zerolog.Logger) *Type {
	t := &Type{root: root, log: log, noBoundary: root.Unrestricted || root.NoBoundary}
	if root.Unrestricted {
		return t
	}
	t.abs = root.Path
	if a, err := filepath.Abs(root.Path); err == nil {
		t.abs = a
	}
	if r, err := filepath.EvalSymlinks(t.abs); err == nil && r != t.abs {
		t.real = r
	}
	if !t.noBoundary && (isFSRoot(t.abs) || t.real != "" && isFSRoot(t.real)) {
		t.noBoundary = true
		log.Warn().Str("event", eventNoBoundary).Str("root", root.Path).Str("variable", VarWorkspaceRoot).
			Msg(noBoundaryWarning(root.Path))
	}
	t.guards = t.relGuards(root.Guarded)
	return t
}

// relGuards keeps the guards that lie inside the root, as paths relative to it. A checkout
// guard is dropped when the root is the checkout or lies inside it: only an explicit root can,
// and that is the operator pointing the jail there on purpose. The binary's directory is kept
// even when it is the root itself (its files are then the root's files).
func (t *Type) relGuards(gs []Guard) []relGuard {
	bases := []string{t.abs}
	if t.real != "" {
		bases = append(bases, t.real)
	}
	var out []relGuard
	for _, g := range gs {
		dirs := []string{g.Dir}
		if r, err := filepath.EvalSymlinks(g.Dir); err == nil && r != g.Dir {
			dirs = append(dirs, r)
		}
		var rels []relGuard
		drop := false
		for _, d := range dirs {
			for _, b := range bases {
				switch rel, err := filepath.Rel(b, d); {
				case g.Kind == GuardCheckout && within(d, b):
					drop = true // the root is at or below the checkout
				case err == nil && within(b, d) && !slices.ContainsFunc(rels, func(r relGuard) bool { return r.rel == rel }):
					rels = append(rels, relGuard{rel: rel, Guard: g})
				}
			}
		}
		if !drop {
			out = append(out, rels...)
		}
	}
	return out
}

// Root is the jail root the type writes under.
func (t *Type) Root() Root { return t.root }

type node struct {
	t          *Type
	path       *engine.Value
	content    *engine.Value
	append     bool
	createDirs bool
}

// Prepare implements engine.NodeType.
func (t *Type) Prepare(n *engine.Node, pc *engine.PrepareContext) engine.Runner {
	p := pc.Params("path", "content", "mode", "create_dirs")
	path := p.String("path", true)
	content := p.Raw("content", true)
	hasContent := p.Has("content")
	mode := p.String("mode", false)
	switch mode {
	case "", "overwrite", "append":
	default:
		pc.Problem(pc.ParamsPath("mode"), "%q: use overwrite or append", mode)
	}
	createDirs := p.Bool("create_dirs")
	var pv, cv *engine.Value // both compiled, so that every problem is reported at once
	if path != "" {
		pv = pc.Value(pc.ParamsPath("path"), path)
	}
	if hasContent {
		cv = pc.Value(pc.ParamsPath("content"), content)
	}
	if pv == nil || cv == nil {
		return nil
	}
	return &node{t: t, path: pv, content: cv, append: mode == "append", createDirs: createDirs}
}

// Run implements engine.Runner.
func (n *node) Run(ctx context.Context, call *engine.Call) (engine.Outcome, error) {
	pv, err := n.path.Eval(call.Env(), call.Limits())
	if err != nil {
		return engine.Outcome{}, err
	}
	path, ok := pv.(string)
	if !ok {
		return engine.Outcome{}, engine.Permanent(fmt.Errorf("writefile: path is %s, not a string", jsonType(pv)))
	}
	if path == "" {
		return engine.Outcome{}, engine.Permanent(errors.New("writefile: path is empty"))
	}
	cv, err := n.content.Eval(call.Env(), call.Limits())
	if err != nil {
		return engine.Outcome{}, err
	}
	data, err := contentBytes(cv)
	if err != nil {
		return engine.Outcome{}, engine.Permanent(fmt.Errorf("writefile: content: %w", err))
	}
	if err := ctx.Err(); err != nil {
		return engine.Outcome{}, err
	}
	if err := n.t.tenantAllowed(call); err != nil {
		return engine.Outcome{}, err
	}
	abs, written, err := n.t.Write(path, data, n.append, n.createDirs)
	if err != nil {
		return engine.Outcome{}, err
	}
	n.t.log.Debug().Str("node", call.Node.ID).Str("path", abs).Int("bytes", written).Bool("append", n.append).Msg("writefile")
	return engine.Outcome{Output: map[string]any{"path": abs, "bytes": written}}, nil
}

// tenantAllowed refuses, before anything touches the file system, a write of a tenant other
// than the default one when the root is no boundary: the jail is then the only thing between
// one tenant's flows and every other tenant's files (and the worker's own), and no jail is for
// trusted single-host deployments only (docs/flows.md, writefile).
func (t *Type) tenantAllowed(call *engine.Call) error {
	if !t.noBoundary || call == nil || call.Execution == nil {
		return nil
	}
	tenant := call.Execution.TenantID
	if tenant == "" || tenant == defaultTenant {
		return nil
	}
	var why string
	switch {
	case t.root.Unrestricted:
		why = fmt.Sprintf("the jail is off (%s): %s between tenants, which is for a trusted single-host deployment "+
			"only; set %s to a directory instead", RuleUnrestricted, ErrNoBoundary, VarWorkspaceRoot)
	case t.abs != "" && !isFSRoot(t.abs):
		why = fmt.Sprintf("workspace_root %s (%s) resolves to /: %s; set %s to a directory below /",
			t.root.Path, VarWorkspaceRoot, ErrNoBoundary, VarWorkspaceRoot)
	default:
		why = fmt.Sprintf("workspace_root %s (%s) is /: %s; set %s to a directory below /",
			t.root.Path, VarWorkspaceRoot, ErrNoBoundary, VarWorkspaceRoot)
	}
	return engine.Permanent(fmt.Errorf("writefile: tenant %q may not write: %w", tenant, &tenantError{why}))
}

// tenantError carries the reason of a tenant refusal and matches ErrNoBoundary.
type tenantError struct{ why string }

func (e *tenantError) Error() string { return e.why }
func (e *tenantError) Unwrap() error { return ErrNoBoundary }

// contentBytes: a string is written as it is, anything else as compact JSON.
func contentBytes(v any) ([]byte, error) {
	if s, ok := v.(string); ok {
		return []byte(s), nil
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	case string:
		return "a string"
	}
	return "a number"
}

// fsys is what a write goes through: the jail (*os.Root) or, unrestricted, the plain os
// functions.
type fsys interface {
	MkdirAll(name string, perm os.FileMode) error
	OpenFile(name string, flag int, perm os.FileMode) (*os.File, error)
	OpenRoot(name string) (*os.Root, error)
}

type osFS struct{}

func (osFS) MkdirAll(name string, perm os.FileMode) error { return os.MkdirAll(name, perm) }
func (osFS) OpenFile(name string, flag int, perm os.FileMode) (*os.File, error) {
	return os.OpenFile(name, flag, perm)
}
func (osFS) OpenRoot(name string) (*os.Root, error) { return os.OpenRoot(name) }

var (
	errNotRegular = errors.New("not a regular file")
	errNotFile    = errors.New("names a directory, not a file")
)

// linkError refuses a regular file with more than one name: a hard link shares its inode with
// every other name of the file, so the jail, which judges names, cannot tell where the file
// also lives. A file outside the root hard-linked into it would be written through the inside
// name.
type linkError struct {
	name  string
	links uint64 // 0: the platform does not report link counts
}

func (e *linkError) Error() string {
	if e.links == 0 {
		return fmt.Sprintf("%s: cannot tell whether it is a hard link to a file outside the root on this platform; not written", e.name)
	}
	return fmt.Sprintf("%s is a hard link (%d names): the same file may have a name outside the root; not written", e.name, e.links)
}

// checkLinks refuses a regular file with more than one name (see linkError).
func checkLinks(name string, fi fs.FileInfo) error {
	n, ok := linkCount(fi)
	if !ok {
		return &linkError{name: name}
	}
	if n > 1 {
		return &linkError{name: name, links: n}
	}
	return nil
}

// Write writes data to path (relative to the jail root, or absolute) and returns the absolute
// path written and the byte count. Overwrites are atomic (a temporary file in the same
// directory, renamed over the target) unless the target is a symbolic link, which is written
// through in place. Every refusal to leave the root is an *EscapeError; errors that retrying
// cannot fix are engine.Permanent.
func (t *Type) Write(path string, data []byte, appendMode, createDirs bool) (string, int, error) {
	var (
		fsy  fsys
		jail *os.Root // nil when unrestricted
		rel  string
		abs  string
	)
	if t.root.Unrestricted {
		fsy, rel = osFS{}, path
		abs = path
		if a, err := filepath.Abs(path); err == nil {
			abs = a
		}
	} else {
		var ok bool
		if rel, ok = t.relative(path); !ok {
			return "", 0, engine.Permanent(&EscapeError{Path: path, Root: t.abs, Rule: t.root.Rule})
		}
		r, err := os.OpenRoot(t.root.Path)
		if err != nil {
			return "", 0, fmt.Errorf("writefile: opening workspace_root (%s): %w", VarWorkspaceRoot, err)
		}
		defer r.Close()
		fsy, jail, abs = r, r, filepath.Join(t.abs, rel)
	}
	dir, base := split(rel)
	if base == "" || base == "." || base == ".." {
		return "", 0, engine.Permanent(fmt.Errorf("writefile: path %q %w", path, errNotFile))
	}
	if jail != nil && len(t.guards) > 0 {
		// Before any directory is created: a refused write leaves no trace in a guarded one.
		if err := t.checkGuards(jail, path, rel); err != nil {
			return "", 0, err
		}
	}
	if createDirs && dir != "." {
		if err := fsy.MkdirAll(dir, 0o755); err != nil {
			return "", 0, t.failed(path, "creating its directories", err, createDirs)
		}
	}
	var (
		n   int
		err error
	)
	jailed := !t.root.Unrestricted
	if appendMode {
		n, err = inPlace(fsy, rel, true, jailed, data)
	} else {
		n, err = overwrite(fsy, rel, dir, base, jailed, data)
	}
	if err != nil {
		return "", n, t.failed(path, "writing", err, createDirs)
	}
	return abs, n, nil
}

// relative turns a path from params into one relative to the root; false when it lies
// outside (lexically: os.Root catches what only the file system can tell, symbolic links).
func (t *Type) relative(p string) (string, bool) {
	if filepath.IsAbs(p) {
		c := filepath.Clean(p)
		for _, base := range []string{t.abs, t.real} {
			if base != "" && within(base, c) {
				rel, err := filepath.Rel(base, c)
				return rel, err == nil
			}
		}
		return "", false
	}
	return p, filepath.IsLocal(p)
}

// checkGuards refuses a write that lands in a guarded directory. The path is resolved inside
// the root the way os.Root resolves it (symbolic links followed, ".." after them), so neither a
// link inside the root nor a detour through ".." reaches a guarded directory by another name.
// It checks before the write, not the opened file (the directory a file lives in cannot be read
// back from its descriptor portably), so a link that another process swaps in between could
// still redirect the write; flows cannot make links (writefile makes none).
func (t *Type) checkGuards(r *os.Root, path, rel string) error {
	resolved, created, err := resolveIn(r, rel)
	if err != nil {
		return t.failed(path, "resolving", err, true)
	}
	for _, g := range t.guards {
		var hit bool
		switch g.Kind {
		case GuardCheckout: // anything below it
			hit = within(g.rel, resolved)
		default: // the binary's directory: its own entries, files or directories made by create_dirs
			hit = filepath.Dir(resolved) == g.rel || created != "" && filepath.Dir(created) == g.rel
		}
		if hit {
			return engine.Permanent(&GuardError{Path: path, Guard: g.Guard, Root: t.abs, Rule: t.root.Rule})
		}
	}
	return nil
}

// maxLinks bounds the symbolic links followed by one resolution, as the kernel does (ELOOP).
const maxLinks = 40

// errEscapesParent is what os.Root reports for a path leaving it; resolveIn reports the same
// so that failed and isEscape treat both alike.
var errEscapesParent = errors.New("path escapes from parent")

// resolveIn resolves rel inside the root r and returns the root-relative path it names with no
// symbolic link left in it: links are followed (relative ones from their own directory; an
// absolute one is refused, as os.Root refuses it), ".." steps back from where the links led,
// and the part of the path that does not exist yet is taken as written. created is the first
// component found missing (what create_dirs or the write would create first), "" when none is.
func resolveIn(r *os.Root, rel string) (resolved, created string, err error) {
	todo := strings.Split(filepath.ToSlash(rel), "/")
	var done []string
	links := 0
	for len(todo) > 0 {
		c := todo[0]
		todo = todo[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if len(done) == 0 {
				return "", "", &fs.PathError{Op: "resolve", Path: rel, Err: errEscapesParent}
			}
			done = done[:len(done)-1]
			continue
		}
		cur := filepath.Join(filepath.Join(done...), c)
		fi, err := r.Lstat(cur)
		switch {
		case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR):
			if created == "" {
				created = cur
			}
			done = append(done, c) // to be created (or the write fails there)
			continue
		case err != nil:
			return "", "", err
		case fi.Mode()&os.ModeSymlink == 0:
			done = append(done, c)
			continue
		}
		if links++; links > maxLinks {
			return "", "", &fs.PathError{Op: "resolve", Path: rel, Err: syscall.ELOOP}
		}
		target, err := r.Readlink(cur)
		if err != nil {
			return "", "", err
		}
		if filepath.IsAbs(target) {
			return "", "", &fs.PathError{Op: "resolve", Path: rel, Err: errEscapesParent}
		}
		todo = append(strings.Split(filepath.ToSlash(target), "/"), todo...)
	}
	if len(done) == 0 {
		return ".", created, nil
	}
	return filepath.Join(done...), created, nil
}

// split cuts a path at its last separator without cleaning it (os.Root resolves "..").
func split(p string) (dir, base string) {
	for i := len(p) - 1; i >= 0; i-- {
		if os.IsPathSeparator(p[i]) {
			if i == 0 {
				return p[:1], p[1:]
			}
			return p[:i], p[i+1:]
		}
	}
	return ".", p
}

// inPlace opens the file itself (following a final symbolic link, inside the root when
// jailed) and appends data, or replaces its content. O_NONBLOCK keeps a FIFO from hanging the
// open; only regular files are written. When jailed, a file with more than one name is refused:
// the check is an fstat of the opened file, so the file checked is the file written. The open
// does not truncate (O_TRUNC would empty a refused file before the check); the content is cut
// only once the checks pass.
func inPlace(fsy fsys, name string, appendMode, jailed bool, data []byte) (int, error) {
	flag := os.O_WRONLY | os.O_CREATE | syscall.O_NONBLOCK
	if appendMode {
		flag |= os.O_APPEND
	}
	f, err := fsy.OpenFile(name, flag, 0o644)
	if err != nil {
		return 0, err
	}
	fi, err := f.Stat()
	switch {
	case err != nil:
	case !fi.Mode().IsRegular():
		err = &fs.PathError{Op: "write", Path: name, Err: errNotRegular}
	case jailed:
		err = checkLinks(name, fi)
	}
	if err == nil && !appendMode {
		err = f.Truncate(0)
	}
	if err != nil {
		f.Close()
		return 0, err
	}
	n, err := f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return n, err
}

// overwrite replaces dir/base atomically: a temporary file in the same directory (through a
// handle on that directory, so both live in the one directory whatever happens to the path
// meanwhile), synced, then renamed over base. An existing regular file keeps its permission
// bits. A symbolic link at base is written through instead (in place, not atomically), so
// that it is resolved, and refused when it points out of the root. When jailed, an existing
// file with more than one name is refused like in inPlace, although the rename would leave its
// other names alone: a write to such a name is refused in either mode.
func overwrite(fsy fsys, rel, dir, base string, jailed bool, data []byte) (int, error) {
	d, err := fsy.OpenRoot(dir)
	if err != nil {
		return 0, err
	}
	defer d.Close()
	var (
		existed bool        // replacing a regular file: keep its permission bits
		keep    os.FileMode // (a new file gets 0644 less the umask)
	)
	fi, err := d.Lstat(base)
	switch {
	case err == nil && fi.Mode()&os.ModeSymlink != 0:
		return inPlace(fsy, rel, false, jailed, data)
	case err == nil && fi.IsDir():
		return 0, &fs.PathError{Op: "write", Path: rel, Err: syscall.EISDIR}
	case err == nil && !fi.Mode().IsRegular():
		return 0, &fs.PathError{Op: "write", Path: rel, Err: errNotRegular}
	case err == nil && jailed:
		if err := checkLinks(rel, fi); err != nil {
			return 0, err
		}
		existed, keep = true, fi.Mode().Perm()
	case err == nil:
		existed, keep = true, fi.Mode().Perm()
	case !errors.Is(err, fs.ErrNotExist):
		return 0, err
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	tmp := ".plaita-writefile-" + hex.EncodeToString(rnd[:]) + ".tmp"
	f, err := d.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return 0, err
	}
	n, err := f.Write(data)
	if err == nil && existed {
		err = f.Chmod(keep) // fchmod on the open file: no path, no race
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = d.Rename(tmp, base)
	}
	if err != nil {
		_ = d.Remove(tmp)
		return 0, err
	}
	return n, nil
}

// failed turns a file system error into the node's error.
func (t *Type) failed(path, doing string, err error, createDirs bool) error {
	var le *linkError
	if !t.root.Unrestricted && (isEscape(err) || errors.As(err, &le)) {
		return engine.Permanent(&EscapeError{Path: path, Root: t.abs, Rule: t.root.Rule, Cause: err})
	}
	msg := fmt.Errorf("writefile: %s %q: %w", doing, path, err)
	if errors.Is(err, fs.ErrNotExist) && !createDirs {
		msg = fmt.Errorf("%w (set create_dirs to create missing directories)", msg)
	}
	if permanent(err) {
		return engine.Permanent(msg)
	}
	return msg
}

// isEscape reports whether err is os.Root's refusal to leave the root. The standard library
// does not export that error; its text is matched, and the tests pin it.
func isEscape(err error) bool {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if e.Error() == "path escapes from parent" {
			return true
		}
	}
	return false
}

// permanent: errors that the same write would meet again. Out of space, quotas, I/O errors
// and running out of descriptors may pass, and stay retryable.
func permanent(err error) bool {
	for _, target := range []error{fs.ErrNotExist, fs.ErrPermission, fs.ErrExist, errNotRegular,
		syscall.ENOTDIR, syscall.EISDIR, syscall.ELOOP, syscall.ENAMETOOLONG, syscall.EINVAL, syscall.EROFS} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}
