// Package nodes registers the node types that touch the world — http, writefile, code and
// external executables — with the security settings the operator chose. The settings arrive
// as Options of plain values: this package and the node packages never read the configuration
// or the environment themselves.
package nodes

import (
	"fmt"
	"slices"

	"github.com/rs/zerolog"

	"plaita/engine"
	"plaita/engine/nodes/code"
	"plaita/engine/nodes/external"
	"plaita/engine/nodes/httpnode"
	"plaita/engine/nodes/sandbox"
	"plaita/engine/nodes/writefile"
)

// Options are the settings of every I/O node type, read once at start by the caller.
type Options struct {
	HTTP     httpnode.Options
	Code     code.Options
	External external.Options
	// Sandbox is the host environment the code node's subprocess runs, its docker client and
	// external executables take their allow-listed variables from (see HostVariables).
	Sandbox sandbox.Options

	// DisableCode leaves the code node type out: flows with code nodes are rejected at
	// validation (PLAITA_DISABLE_CODE_NODE).
	DisableCode bool

	// The writefile jail's inputs; see writefile.ResolveRoot for how they choose the root.
	WorkspaceRoot     string // PLAITA_NODES_WORKSPACE_ROOT; "" = derived
	AllowUnrestricted bool   // PLAITA_ALLOW_UNRESTRICTED_WRITES=1: no jail
	ProjectRoot       string // PLAITA_PROJECT_ROOT; "" = unset
}

// HostVariables are the host variables the node types may pass on to the programs they run:
// what a caller puts in Options.Sandbox.HostEnv. The node types take no other name from it.
func HostVariables() []string {
	names := code.HostVariables()
	for _, k := range sandbox.HostVariables() {
		if !slices.Contains(names, k) {
			names = append(names, k)
		}
	}
	return names
}

// Register adds the I/O node types to reg and logs the effective gates once. An error means the
// process must not start: the writefile jail has no usable root, or the configured code backend
// is unavailable and no fallback is allowed.
func Register(reg *engine.Registry, opts Options, log zerolog.Logger) error {
	reg.Register("http", httpnode.New(opts.HTTP, log))

	root, err := writefile.ResolveRoot(writefile.HostFacts(opts.WorkspaceRoot, opts.AllowUnrestricted, opts.ProjectRoot))
	if err != nil {
		return fmt.Errorf("writefile jail: %w", err)
	}
	if w := root.Warning(); w != "" {
		log.Warn().Str("event", root.WarningEvent()).Msg(w)
	}
	log.Info().Str("event", "writefile.jail").Str("root", root.Path).Str("rule", string(root.Rule)).Msg(root.LogLine())
	reg.Register("writefile", writefile.New(root, log))

	if opts.DisableCode {
		reg.Remove("code")
		log.Warn().Str("event", "code_node.disabled").Msg("PLAITA_DISABLE_CODE_NODE=1: flows with code nodes are rejected at validation")
	} else {
		ct, err := code.New(opts.Code, opts.Sandbox, log)
		if err != nil {
			return fmt.Errorf("code node: %w", err)
		}
		reg.Register("code", ct)
	}

	reg.SetFallback(external.Resolver(opts.External, opts.Sandbox, log))
	return nil
}
