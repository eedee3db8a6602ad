// Package nodes registers the node types that touch the world — http, writefile, code and
// external executables — with the security settings the configuration asks for.
package nodes

import (
	"fmt"

	"github.com/rs/zerolog"

	"plaita/config"
	"plaita/engine"
	"plaita/engine/nodes/code"
	"plaita/engine/nodes/external"
	"plaita/engine/nodes/httpnode"
	"plaita/engine/nodes/writefile"
)

// Register adds the I/O node types to reg and logs the effective gates once. An error means the
// process must not start: the writefile jail has no usable root, or the configured code backend
// is unavailable and no fallback is allowed.
func Register(reg *engine.Registry, cfg *config.Config, log zerolog.Logger) error {
	reg.Register("http", httpnode.New(cfg, log))

	root, err := writefile.ResolveRoot(writefile.HostFacts(
		config.NodesWorkspaceRoot.In(cfg), config.AllowUnrestrictedWrites.In(cfg), config.ProjectRoot.In(cfg)))
	if err != nil {
		return fmt.Errorf("writefile jail: %w", err)
	}
	if w := root.Warning(); w != "" {
		log.Warn().Str("event", root.WarningEvent()).Msg(w)
	}
	log.Info().Str("event", "writefile.jail").Str("root", root.Path).Str("rule", string(root.Rule)).Msg(root.LogLine())
	reg.Register("writefile", writefile.New(root, log))

	if config.DisableCodeNode.In(cfg) {
		reg.Remove("code")
		log.Warn().Str("event", "code_node.disabled").Msg("PLAITA_DISABLE_CODE_NODE=1: flows with code nodes are rejected at validation")
	} else {
		ct, err := code.New(cfg, log)
		if err != nil {
			return fmt.Errorf("code node: %w", err)
		}
		reg.Register("code", ct)
	}

	reg.SetFallback(external.Resolver(config.NodePath.In(cfg), log))
	return nil
}
