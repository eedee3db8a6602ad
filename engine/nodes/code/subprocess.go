package code

import (
	"context"
	"errors"
	"fmt"

	"plaita/engine"
	"plaita/engine/nodes/sandbox"
)

// nodeAddressSpaceHeadroomMB is added to PLAITA_SANDBOX_MEMORY_MB for the RLIMIT_AS of node:
// V8 reserves several hundred MiB of address space at startup (its code range) and aborts or
// hangs when it cannot, so node's address space cannot be limited to the configured size
// itself. node gets --max-old-space-size=<PLAITA_SANDBOX_MEMORY_MB> (the JavaScript heap, where
// almost all of its memory goes) and RLIMIT_AS = the configured size + this headroom as the
// backstop for memory outside that heap (Buffers, typed arrays).
const nodeAddressSpaceHeadroomMB = 1024

// defaultTenant is the tenant the subprocess backend serves; every other tenant is refused.
const defaultTenant = "default"

func tenantOf(call *engine.Call) string {
	if call == nil || call.Execution == nil {
		return ""
	}
	return call.Execution.TenantID
}

// subprocessCommand is the interpreter command of a language on the host, with the memory
// limit applied as described at nodeAddressSpaceHeadroomMB.
func (t *Type) subprocessCommand(language string) (path string, args []string, memoryMB int, err error) {
	memoryMB = t.memoryMB
	switch language {
	case Python:
		path, err = sandbox.LookPath(t.python)
		if err != nil {
			return "", nil, 0, engine.Permanent(fmt.Errorf("code node (python, subprocess): the python3 executable is missing: %v", err))
		}
		// -I: isolated mode (no PYTHON* variables, no user site, no script directory on sys.path).
		return path, []string{"-I", "-c", pythonWrapper}, memoryMB, nil
	case JS:
		path, err = sandbox.LookPath(t.nodeBin)
		if err != nil {
			return "", nil, 0, engine.Permanent(fmt.Errorf("code node (js, subprocess): the node executable %q is missing (PLAITA_SANDBOX_NODE_BIN): %v", t.nodeBin, err))
		}
		if memoryMB > 0 {
			args = append(args, fmt.Sprintf("--max-old-space-size=%d", memoryMB))
			memoryMB += nodeAddressSpaceHeadroomMB
		}
		return path, append(args, "-e", jsWrapper), memoryMB, nil
	}
	return "", nil, 0, engine.Permanent(fmt.Errorf("code node: no subprocess implementation for language %q", language))
}

func (r *runner) runSubprocess(ctx context.Context, call *engine.Call, input any) (any, error) {
	if tenant := tenantOf(call); tenant != "" && tenant != defaultTenant {
		// Checked before anything is spawned: the child would run as the worker's user with the
		// worker's file system, where every tenant's credentials are readable.
		return nil, engine.Permanent(fmt.Errorf("code node: tenant %q cannot run code in the subprocess backend: "+
			"subprocess is not a tenant isolation boundary (same user, file system and network as the worker); use sandbox_backend docker", tenant))
	}
	path, args, mem, err := r.t.subprocessCommand(r.language)
	if err != nil {
		return nil, err
	}
	stdin, err := r.stdin(input)
	if err != nil {
		return nil, err
	}
	env, red, err := r.openCredentials(ctx, call)
	if err != nil {
		return nil, err
	}
	res, err := r.t.sandbox.Run(ctx, sandbox.Command{Path: path, Args: args, Stdin: stdin, Timeout: r.timeout, MemoryMB: mem, ExtraEnv: env})
	if err != nil {
		return nil, startFailure(fmt.Errorf("code node (%s, subprocess): cannot start %s: %w", r.language, path, err))
	}
	return redacted(red)(r.result(res))
}

// startFailure marks a program that was not started for want of isolation as permanent: a retry
// fails the same way until the operator changes how plaita runs (the error says how).
func startFailure(err error) error {
	if errors.Is(err, sandbox.ErrIsolationUnavailable) {
		return engine.Permanent(err)
	}
	return err
}

// result turns a finished process into the node's result or error.
func (r *runner) result(res *sandbox.Result) (any, error) {
	if err := res.Err(); err != nil {
		return nil, fmt.Errorf("code node (%s, %s): %w", r.language, r.backend, err)
	}
	v, err := parseResult(res.Stdout)
	if err != nil {
		return nil, fmt.Errorf("code node (%s, %s): %v%s", r.language, r.backend, err, res.StderrSuffix())
	}
	return v, nil
}
