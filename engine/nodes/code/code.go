// Package code is the `code` node type: it runs a snippet of python or js with the node's
// input and records the JSON the snippet produces.
//
// Params:
//
//	language         python | js (default python); must be in PLAITA_SANDBOX_ALLOWED_LANGUAGES
//	code             the program text (required; taken literally, never templated: pass data through input)
//	input            any JSON value, {{ templates }} allowed; the code sees it as INPUT (null when absent)
//	sandbox_backend  docker | subprocess | restricted (default PLAITA_CODE_BACKEND); must be in
//	                 PLAITA_SANDBOX_ALLOWED_BACKENDS
//	timeout          seconds, more than 0 and at most the backend's configured limit (default: that limit)
//	credentials      object of environment variable → credential name: the tenant's credentials in
//	                 the code's environment (credentials.go; docker, or subprocess for the default tenant)
//
// The operator's settings (the PLAITA_SANDBOX_*, PLAITA_CODE_BACKEND and
// PLAITA_ALLOW_SUBPROCESS_FALLBACK variables) arrive as Options, fixed when New runs. A
// language or backend outside the allow-lists, and python on the restricted backend, are
// validation problems of the flow, not run-time errors.
//
// Result convention, the same for every language and backend: the node's result is the last
// non-empty line the code writes to stdout, parsed as JSON (earlier lines are ignored). The
// wrapper writes that line for the code when the code leaves a result behind:
//
//   - python runs at module level with INPUT bound; a global `result` left by the code is
//     printed as json.dumps(result) (NaN and infinities are errors);
//   - js is the body of an async function of INPUT (await works); a returned value other than
//     undefined is printed as JSON.stringify(value).
//
// So `result = {"n": INPUT["n"] + 1}` (python), `return {n: INPUT.n + 1}` (js) and printing the
// JSON yourself are equivalent. Output that is not JSON, a non-zero exit, a timeout or an
// uncaught exception fail the node with the reason and the last 4 KiB of stderr. These errors
// are retryable under the node's retry policy; refusals (tenant, missing interpreter) are
// permanent.
//
// Backends:
//
//   - subprocess: python3 from PATH / PLAITA_SANDBOX_NODE_BIN on the worker host, in its own
//     process group (killed as a whole on PLAITA_SANDBOX_TIMEOUT, cancellation and exit), with an
//     allow-listed environment (PATH, HOME = a fresh temporary working directory removed
//     afterwards, LANG, LC_ALL, TZ), stdout bounded to 1 MiB, and an address-space limit from
//     PLAITA_SANDBOX_MEMORY_MB: RLIMIT_AS (soft = hard) set by /bin/sh's ulimit -v in the child
//     right before it execs the interpreter; for node see nodeAddressSpaceHeadroomMB. The code
//     cannot read the environment, memory or open files of the worker (package sandbox: the
//     worker is non-dumpable, and a root worker starts the interpreter in a user namespace of
//     its own — where it cannot create one, the node fails permanently and says how to fix it).
//     Not an isolation boundary otherwise: the same user, file system and network as the worker,
//     so it is refused, before anything is spawned, for tenants other than the default one.
//   - docker: a throw-away container without network, read-only, with memory, cpu and pid
//     limits and no capabilities (see DockerArgs); code and input go through stdin; killed by
//     name on PLAITA_SANDBOX_DOCKER_TIMEOUT, which includes container start-up (pre-pull the
//     images). Fails closed without a daemon. The docker client the worker starts runs no flow
//     code: it needs no user namespace of its own (sandbox.Command.HostUserNamespace).
//   - restricted: an in-process JavaScript interpreter (goja) without host objects, interrupted
//     on PLAITA_SANDBOX_TIMEOUT. js only. Memory is NOT bounded in this backend.
package code

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"plaita/engine"
	"plaita/engine/nodes/sandbox"
	"plaita/internal/callctx"
)

// Languages and backends.
const (
	Python = "python"
	JS     = "js"

	Docker     = "docker"
	Subprocess = "subprocess"
	Restricted = "restricted"
)

var (
	knownLanguages = []string{Python, JS}
	knownBackends  = []string{Docker, Subprocess, Restricted}
)

// ErrBackendUnavailable is what New returns when the default backend cannot run code and no
// fallback is allowed: the worker must not start.
var ErrBackendUnavailable = errors.New("code node: default sandbox backend unavailable")

// Defaults of Options, the same as those of the variables behind them.
const (
	DefaultTimeout         = 10 * time.Second   // PLAITA_SANDBOX_TIMEOUT
	DefaultNodeBin         = "node"             // PLAITA_SANDBOX_NODE_BIN
	DefaultDockerImage     = "python:3.12-slim" // PLAITA_SANDBOX_DOCKER_IMAGE
	DefaultDockerNodeImage = "node:20-alpine"   // PLAITA_SANDBOX_DOCKER_NODE_IMAGE
	DefaultDockerMemoryMB  = 128                // PLAITA_SANDBOX_DOCKER_MEMORY_MB
	DefaultDockerCPUs      = "0.5"              // PLAITA_SANDBOX_DOCKER_CPUS
	DefaultDockerTimeout   = 30 * time.Second   // PLAITA_SANDBOX_DOCKER_TIMEOUT
)

// Options are the operator's settings of the code node, fixed when New runs. A zero field takes
// the default noted; DefaultOptions spells every default out.
type Options struct {
	// AllowedLanguages may be used by code nodes (PLAITA_SANDBOX_ALLOWED_LANGUAGES); empty =
	// python only.
	AllowedLanguages []string
	// AllowedBackends may be named by sandbox_backend (PLAITA_SANDBOX_ALLOWED_BACKENDS); empty
	// = docker. DefaultBackend is always added.
	AllowedBackends []string
	// DefaultBackend runs nodes without sandbox_backend (PLAITA_CODE_BACKEND); "" = subprocess.
	DefaultBackend string
	// AllowSubprocessFallback lets an unavailable docker default fall back to subprocess when
	// subprocess is allow-listed (PLAITA_ALLOW_SUBPROCESS_FALLBACK=1).
	AllowSubprocessFallback bool

	// Timeout bounds subprocess and restricted code (PLAITA_SANDBOX_TIMEOUT); 0 or negative
	// = DefaultTimeout.
	Timeout time.Duration
	// MemoryMB is the RLIMIT_AS of subprocess code in MiB (PLAITA_SANDBOX_MEMORY_MB); 0 or
	// negative = unlimited.
	MemoryMB int
	// NodeBin is the host's node executable for js subprocess code (PLAITA_SANDBOX_NODE_BIN);
	// "" = DefaultNodeBin from PATH.
	NodeBin string

	// DockerImage and DockerNodeImage run python and js in the docker backend
	// (PLAITA_SANDBOX_DOCKER_IMAGE, PLAITA_SANDBOX_DOCKER_NODE_IMAGE); "" = the defaults.
	DockerImage     string
	DockerNodeImage string
	// DockerMemoryMB is docker --memory in MiB (PLAITA_SANDBOX_DOCKER_MEMORY_MB), passed as it
	// is: 0 and negative values are docker's to interpret, so 0 is not a default here
	// (DefaultOptions has DefaultDockerMemoryMB).
	DockerMemoryMB int
	// DockerCPUs is docker --cpus (PLAITA_SANDBOX_DOCKER_CPUS); "" = DefaultDockerCPUs.
	DockerCPUs string
	// DockerUser is docker --user (PLAITA_SANDBOX_DOCKER_USER); "" = the image's user.
	DockerUser string
	// DockerTimeout bounds a docker run including container start-up
	// (PLAITA_SANDBOX_DOCKER_TIMEOUT); 0 or negative = DefaultDockerTimeout.
	DockerTimeout time.Duration
}

// DefaultOptions are the settings of a worker whose environment sets none of the variables
// (a console's default backend is docker instead: the variables' defaults depend on the role).
func DefaultOptions() Options {
	return Options{
		AllowedLanguages: []string{Python},
		AllowedBackends:  []string{Docker, Subprocess},
		DefaultBackend:   Subprocess,
		Timeout:          DefaultTimeout,
		NodeBin:          DefaultNodeBin,
		DockerImage:      DefaultDockerImage,
		DockerNodeImage:  DefaultDockerNodeImage,
		DockerMemoryMB:   DefaultDockerMemoryMB,
		DockerCPUs:       DefaultDockerCPUs,
		DockerTimeout:    DefaultDockerTimeout,
	}
}

// withDefaults fills the zero fields that have a default.
func (o Options) withDefaults() Options {
	o.DefaultBackend = cmp.Or(o.DefaultBackend, Subprocess)
	if len(o.AllowedLanguages) == 0 {
		o.AllowedLanguages = []string{Python}
	}
	if len(o.AllowedBackends) == 0 {
		o.AllowedBackends = []string{Docker}
	}
	if !slices.Contains(o.AllowedBackends, o.DefaultBackend) {
		// A flow may always name the backend it would get without naming one.
		o.AllowedBackends = append(slices.Clone(o.AllowedBackends), o.DefaultBackend)
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.DockerTimeout <= 0 {
		o.DockerTimeout = DefaultDockerTimeout
	}
	o.NodeBin = cmp.Or(o.NodeBin, DefaultNodeBin)
	o.DockerImage = cmp.Or(o.DockerImage, DefaultDockerImage)
	o.DockerNodeImage = cmp.Or(o.DockerNodeImage, DefaultDockerNodeImage)
	o.DockerCPUs = cmp.Or(o.DockerCPUs, DefaultDockerCPUs)
	return o
}

// Option adjusts New; tests use them to avoid depending on the machine.
type Option func(*Type)

// WithDockerProbe replaces the docker daemon probe (default: `docker version --format
// {{.Server.Version}}` with a 15 s limit). It returns nil when the daemon is usable.
func WithDockerProbe(probe func(ctx context.Context) error) Option {
	return func(t *Type) { t.probe = probe }
}

// WithDockerBinary replaces the docker client executable (default "docker" from PATH).
func WithDockerBinary(path string) Option { return func(t *Type) { t.docker.Bin = path } }

// Type is the code node type (engine.NodeType).
type Type struct {
	log            zerolog.Logger
	languages      []string
	backends       []string
	defaultBackend string
	fellBack       bool

	subprocTimeout time.Duration
	memoryMB       int
	nodeBin        string
	python         string
	docker         DockerConfig
	sandbox        sandbox.Options
	probe          func(ctx context.Context) error
}

// New builds the code node type from o; subprocess runs and the docker client take their host
// variables from sb. When the default backend is docker, the daemon is probed: unavailable →
// ErrBackendUnavailable (logged as event=code_node.registration_refused), unless
// o.AllowSubprocessFallback and subprocess is allow-listed, in which case subprocess becomes the
// default with a WARNING (event=code_node.subprocess_fallback).
func New(o Options, sb sandbox.Options, log zerolog.Logger, opts ...Option) (*Type, error) {
	o = o.withDefaults()
	t := &Type{
		log:            log,
		languages:      slices.Clone(o.AllowedLanguages),
		backends:       slices.Clone(o.AllowedBackends),
		defaultBackend: o.DefaultBackend,
		subprocTimeout: o.Timeout,
		memoryMB:       o.MemoryMB,
		nodeBin:        o.NodeBin,
		python:         "python3",
		docker: DockerConfig{
			Bin:       "docker",
			Image:     o.DockerImage,
			NodeImage: o.DockerNodeImage,
			MemoryMB:  o.DockerMemoryMB,
			CPUs:      o.DockerCPUs,
			User:      o.DockerUser,
			PidsLimit: DefaultPidsLimit,
			Timeout:   o.DockerTimeout,
		},
		sandbox: sb,
	}
	for _, opt := range opts {
		opt(t)
	}
	if t.probe == nil {
		t.probe = t.dockerProbe
	}
	if t.defaultBackend == Docker {
		ctx, cancel := callctx.Within(context.Background(), callctx.Probe)
		err := t.probe(ctx)
		cancel()
		if err != nil {
			fallback := o.AllowSubprocessFallback
			if !fallback || !slices.Contains(t.backends, Subprocess) {
				why := "PLAITA_ALLOW_SUBPROCESS_FALLBACK is not 1"
				if fallback {
					why = "PLAITA_ALLOW_SUBPROCESS_FALLBACK=1 but subprocess is not in PLAITA_SANDBOX_ALLOWED_BACKENDS"
				}
				log.Error().Str("event", "code_node.registration_refused").Str("backend", Docker).
					Strs("allowed_backends", t.backends).Err(err).
					Msg("code node not registered: the default sandbox backend (PLAITA_CODE_BACKEND=docker) is unavailable and no fallback is allowed (" + why + ")")
				return nil, fmt.Errorf("%w: PLAITA_CODE_BACKEND=docker but the docker daemon is unavailable (%v); "+
					"refusing to start (to fall back to subprocess set both PLAITA_ALLOW_SUBPROCESS_FALLBACK=1 and subprocess in PLAITA_SANDBOX_ALLOWED_BACKENDS; %s)",
					ErrBackendUnavailable, err, why)
			}
			log.Warn().Str("event", "code_node.subprocess_fallback").Str("configured_backend", Docker).
				Str("backend", Subprocess).Err(err).
				Msg("docker daemon unavailable: code nodes without sandbox_backend run in the subprocess backend (PLAITA_ALLOW_SUBPROCESS_FALLBACK=1); subprocess is not an isolation boundary")
			t.defaultBackend, t.fellBack = Subprocess, true
		}
	}
	log.Info().Str("event", "code_node.registered").Str("default_backend", t.defaultBackend).
		Strs("allowed_backends", t.backends).Strs("allowed_languages", t.languages).Msg("code node registered")
	return t, nil
}

// DefaultBackend is the backend of nodes without sandbox_backend (after any fallback).
func (t *Type) DefaultBackend() string { return t.defaultBackend }

// FellBack reports whether the default backend fell back from docker to subprocess.
func (t *Type) FellBack() bool { return t.fellBack }

// AllowedLanguages is the effective language allow-list.
func (t *Type) AllowedLanguages() []string { return slices.Clone(t.languages) }

// AllowedBackends is the effective backend allow-list.
func (t *Type) AllowedBackends() []string { return slices.Clone(t.backends) }

func (t *Type) dockerProbe(ctx context.Context) error {
	c := exec.CommandContext(ctx, t.docker.Bin, "version", "--format", "{{.Server.Version}}")
	c.Env = t.dockerClientEnv()
	out, err := c.CombinedOutput()
	if err != nil {
		return fmt.Errorf("docker version: %v: %s", err, strings.TrimSpace(sandbox.Truncate(string(out), 512)))
	}
	if strings.TrimSpace(string(out)) == "" {
		return errors.New("docker version: no server version")
	}
	return nil
}

// timeoutOf is the configured limit of a backend.
func (t *Type) timeoutOf(backend string) (time.Duration, string) {
	if backend == Docker {
		return t.docker.Timeout, "PLAITA_SANDBOX_DOCKER_TIMEOUT"
	}
	return t.subprocTimeout, "PLAITA_SANDBOX_TIMEOUT"
}

type runner struct {
	t        *Type
	language string
	backend  string
	code     string
	input    *engine.Value
	timeout  time.Duration
	creds    []credentialEnv // the credentials param (credentials.go)
}

// Prepare validates the params against the allow-lists fixed in New.
func (t *Type) Prepare(n *engine.Node, pc *engine.PrepareContext) engine.Runner {
	p := pc.Params("language", "code", "input", "sandbox_backend", "timeout", "credentials")
	r := &runner{t: t}
	ok := true

	r.language = p.String("language", false)
	if !p.Has("language") {
		r.language = Python
	}
	switch {
	case !slices.Contains(knownLanguages, r.language):
		pc.Problem(pc.ParamsPath("language"), "%q: use python or js", r.language)
		ok = false
	case !slices.Contains(t.languages, r.language):
		pc.Problem(pc.ParamsPath("language"), "language %q is not allowed by the operator (PLAITA_SANDBOX_ALLOWED_LANGUAGES allows: %s)",
			r.language, strings.Join(t.languages, ", "))
		ok = false
	}

	r.backend = p.String("sandbox_backend", false)
	explicit := p.Has("sandbox_backend")
	if !explicit {
		r.backend = t.defaultBackend
	}
	switch {
	case !slices.Contains(knownBackends, r.backend):
		pc.Problem(pc.ParamsPath("sandbox_backend"), "%q: use docker, subprocess or restricted", r.backend)
		ok = false
	case explicit && !slices.Contains(t.backends, r.backend):
		pc.Problem(pc.ParamsPath("sandbox_backend"), "sandbox_backend %q is not allowed by the operator (PLAITA_SANDBOX_ALLOWED_BACKENDS allows: %s)",
			r.backend, strings.Join(t.backends, ", "))
		ok = false
	case ok && r.backend == Restricted && r.language != JS:
		if explicit {
			pc.Problem(pc.ParamsPath("sandbox_backend"), "the restricted backend has no %s implementation (it runs js only): use docker or subprocess for %s", r.language, r.language)
		} else {
			pc.Problem(pc.ParamsPath("language"), "the default backend restricted (PLAITA_CODE_BACKEND) has no %s implementation (it runs js only): set sandbox_backend to docker or subprocess", r.language)
		}
		ok = false
	}

	r.code = p.String("code", true)
	if r.code == "" {
		ok = false
	}
	var credsOK bool
	if r.creds, credsOK = prepareCredentials(p, pc, r.backend); !credsOK {
		ok = false
	}
	if p.Has("input") {
		r.input = pc.Value(pc.ParamsPath("input"), p.Raw("input", false))
		if r.input == nil {
			ok = false
		}
	}
	if slices.Contains(knownBackends, r.backend) {
		limit, variable := t.timeoutOf(r.backend)
		r.timeout = limit
		if p.Has("timeout") {
			secs, isNum := p.Raw("timeout", false).(float64)
			d := time.Duration(secs * float64(time.Second))
			switch {
			case !isNum || secs <= 0:
				pc.Problem(pc.ParamsPath("timeout"), "must be a number of seconds, more than 0")
				ok = false
			case d > limit:
				pc.Problem(pc.ParamsPath("timeout"), "%g s is over the %s backend's limit of %s (%s)", secs, r.backend, limit, variable)
				ok = false
			default:
				r.timeout = d
			}
		}
	}
	if !ok {
		return nil
	}
	return r
}

// request is what the wrappers read on stdin.
type request struct {
	Code  string `json:"code"`
	Input any    `json:"input"`
}

// Run evaluates the input and runs the code in its backend.
func (r *runner) Run(ctx context.Context, call *engine.Call) (engine.Outcome, error) {
	var input any
	if r.input != nil {
		v, err := r.input.Eval(call.Env(), call.Limits())
		if err != nil {
			return engine.Outcome{}, err
		}
		input = v
	}
	var (
		out any
		err error
	)
	switch r.backend {
	case Subprocess:
		out, err = r.runSubprocess(ctx, call, input)
	case Docker:
		out, err = r.runDocker(ctx, call, input)
	case Restricted:
		out, err = r.runRestricted(ctx, input)
	default:
		err = engine.Permanent(fmt.Errorf("code node: unknown sandbox backend %q", r.backend))
	}
	if err != nil {
		return engine.Outcome{}, err
	}
	return engine.Outcome{Output: out}, nil
}

func (r *runner) stdin(input any) ([]byte, error) {
	b, err := json.Marshal(request{Code: r.code, Input: input})
	if err != nil {
		return nil, engine.Permanent(fmt.Errorf("code node: input cannot be encoded as JSON: %w", err))
	}
	return b, nil
}

// parseResult reads the last non-empty stdout line as JSON.
func parseResult(stdout []byte) (any, error) {
	lines := strings.Split(strings.ReplaceAll(string(stdout), "\r\n", "\n"), "\n")
	last := ""
	for i := len(lines) - 1; i >= 0; i-- {
		if s := strings.TrimSpace(lines[i]); s != "" {
			last = s
			break
		}
	}
	if last == "" {
		return nil, errors.New("the code printed nothing: print the result as JSON on the last stdout line (python: set `result`; js: return a value)")
	}
	var v any
	if err := json.Unmarshal([]byte(last), &v); err != nil {
		return nil, fmt.Errorf("the last stdout line is not JSON (%v): %q", err, sandbox.Truncate(last, 200))
	}
	return v, nil
}
