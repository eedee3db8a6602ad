package settings

import (
	"math"
	"slices"
	"time"

	"plaita/config"
	"plaita/engine/nodes"
	"plaita/engine/nodes/code"
	"plaita/engine/nodes/external"
	"plaita/engine/nodes/httpnode"
	"plaita/engine/nodes/sandbox"
)

// Nodes is the one place that turns variables into the settings of the I/O node types.
// Everything is read here, once: the node packages never see the configuration, and a process's
// environment does not change from outside, so reading a variable again on every request
// would only ever find the same value.
func Nodes(cfg *config.Config) nodes.Options {
	return nodes.Options{
		HTTP: httpnode.Options{
			MaxResponseBytes: int64(config.HTTPMaxResponseBytes.In(cfg)),
			DNSTTL:           saturatingSeconds(config.HTTPDNSTTL.In(cfg)),
			ConnectorLimit:   config.HTTPConnectorLimit.In(cfg),
			Cookies:          config.HTTPCookies.In(cfg),
			BlockPrivate:     config.HTTPBlockPrivate.In(cfg),
		},
		Code: code.Options{
			AllowedLanguages:        slices.Clone(config.SandboxAllowedLanguages.In(cfg)),
			AllowedBackends:         slices.Clone(config.SandboxAllowedBackends.In(cfg)),
			DefaultBackend:          config.CodeBackend.In(cfg),
			AllowSubprocessFallback: config.AllowSubprocessFallback.In(cfg),
			Timeout:                 saturatingSeconds(float64(config.SandboxTimeout.In(cfg))),
			MemoryMB:                config.SandboxMemoryMB.In(cfg),
			NodeBin:                 config.SandboxNodeBin.In(cfg),
			DockerImage:             config.SandboxDockerImage.In(cfg),
			DockerNodeImage:         config.SandboxDockerNodeImage.In(cfg),
			DockerMemoryMB:          config.SandboxDockerMemoryMB.In(cfg),
			DockerCPUs:              config.SandboxDockerCPUs.In(cfg),
			DockerUser:              config.SandboxDockerUser.In(cfg),
			DockerTimeout:           saturatingSeconds(float64(config.SandboxDockerTimeout.In(cfg))),
		},
		External:          external.Options{Paths: slices.Clone(config.NodePath.In(cfg))},
		Sandbox:           sandbox.Options{HostEnv: hostEnv(nodes.HostVariables())},
		DisableCode:       config.DisableCodeNode.In(cfg),
		WorkspaceRoot:     config.NodesWorkspaceRoot.In(cfg),
		AllowUnrestricted: config.AllowUnrestrictedWrites.In(cfg),
		ProjectRoot:       config.ProjectRoot.In(cfg),
	}
}

// hostEnv snapshots the named host variables that are set (an empty value included).
func hostEnv(names []string) map[string]string {
	env := make(map[string]string, len(names))
	for _, k := range names {
		if v, ok := config.HostEnv(k); ok {
			env[k] = v
		}
	}
	return env
}

// saturatingSeconds converts a variable's seconds to a duration, saturating: the variables accept
// values far beyond what a time.Duration holds, and a wrapped-around negative duration would
// turn a bound off instead of making it large.
func saturatingSeconds(s float64) time.Duration {
	d := s * float64(time.Second)
	if d >= math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(d)
}
