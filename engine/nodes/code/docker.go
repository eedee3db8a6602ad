package code

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"plaita/engine"
	"plaita/engine/nodes/sandbox"
)

// DefaultPidsLimit is docker --pids-limit of code containers.
const DefaultPidsLimit = 64

// DockerConfig is what the docker backend runs with (PLAITA_SANDBOX_DOCKER_*).
type DockerConfig struct {
	Bin       string // docker client
	Image     string // python image
	NodeImage string // js image
	MemoryMB  int    // --memory <n>m; 0 and negative values are passed as they are
	CPUs      string // --cpus
	User      string // --user; "" = the image's user
	PidsLimit int
	Timeout   time.Duration
}

// DockerArgs is the docker client's argument list (without the program name) for one run of
// language in a container called name. The code and the input are not in it: they go through
// stdin (-i) as {"code": …, "input": …}; the command is the fixed wrapper.
func DockerArgs(c DockerConfig, language, name string, envNames ...string) []string {
	args := []string{
		"run", "--rm", "-i",
		"--name", name,
		"--network", "none",
		"--read-only",
		"--tmpfs", "/tmp",
		"--memory", strconv.Itoa(c.MemoryMB) + "m",
		"--cpus", c.CPUs,
		"--pids-limit", strconv.Itoa(c.PidsLimit),
	}
	if c.User != "" {
		args = append(args, "--user", c.User)
	}
	args = append(args, "--security-opt", "no-new-privileges", "--cap-drop", "ALL")
	for _, e := range envNames {
		args = append(args, "-e", e) // the value comes from the client's environment
	}
	switch language {
	case JS:
		args = append(args, c.NodeImage, "node", "-e", jsWrapper)
	default:
		args = append(args, c.Image, "python3", "-I", "-c", pythonWrapper)
	}
	return args
}

// dockerClientVariables are what the docker client needs of the host to reach the daemon.
func dockerClientVariables() []string {
	return []string{"PATH", "HOME", "DOCKER_HOST", "DOCKER_CONTEXT", "DOCKER_CONFIG", "DOCKER_CERT_PATH",
		"DOCKER_TLS_VERIFY", "DOCKER_API_VERSION", "XDG_RUNTIME_DIR", "LANG", "LC_ALL", "TZ"}
}

// HostVariables are the names the code node takes from sandbox.Options.HostEnv (its subprocess
// runs and its docker client): a caller that snapshots the environment needs no more than these.
func HostVariables() []string {
	names := sandbox.HostVariables()
	for _, k := range dockerClientVariables() {
		if !slices.Contains(names, k) {
			names = append(names, k)
		}
	}
	return names
}

// dockerClientEnv is the docker client's environment: what it needs to reach the daemon, and
// nothing of the worker's secrets (the container gets none of it: docker run passes no host
// variable without -e).
func (t *Type) dockerClientEnv() []string {
	path := t.sandbox.HostEnv["PATH"]
	if path == "" {
		path = "/usr/local/bin:/usr/bin:/bin"
	}
	env := []string{"PATH=" + path}
	for _, k := range dockerClientVariables() {
		if v, ok := t.sandbox.HostEnv[k]; ok && k != "PATH" {
			env = append(env, k+"="+v)
		}
	}
	return env
}

func containerName() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "plaita-code-" + hex.EncodeToString(b[:])
}

func (r *runner) runDocker(ctx context.Context, call *engine.Call, input any) (any, error) {
	stdin, err := r.stdin(input)
	if err != nil {
		return nil, err
	}
	creds, red, err := r.openCredentials(ctx, call)
	if err != nil {
		return nil, err
	}
	d := r.t.docker
	name := containerName()
	env := r.t.dockerClientEnv()
	// The client passes each credential with -e NAME from its own environment: the value is on
	// no command line.
	clientEnv := append(slices.Clone(env), creds...)
	res, err := r.t.sandbox.Run(ctx, sandbox.Command{
		Path:    d.Bin,
		Args:    DockerArgs(d, r.language, name, r.envNames()...),
		Stdin:   stdin,
		Timeout: r.timeout,
		Env:     clientEnv,
		// The client is trusted and runs no flow code (the code runs in the container, out of
		// the worker's reach): it needs no user namespace of its own, and so keeps working
		// where a root worker may not create one.
		HostUserNamespace: true,
		// Killing the client does not stop the container: kill it by name. A container that
		// was still being created when the client died is caught by the second, later rm -f.
		OnKill: func() {
			dockerCmd(d.Bin, env, 10*time.Second, "kill", name)
			go func() {
				time.Sleep(2 * time.Second)
				dockerCmd(d.Bin, env, 10*time.Second, "rm", "-f", name)
			}()
		},
	})
	if err != nil {
		return nil, startFailure(fmt.Errorf("code node (%s, docker): cannot start the docker client %q: %w", r.language, d.Bin, err))
	}
	if err := containerLimit(d, res); err != nil {
		return redacted(red)(nil, fmt.Errorf("code node (%s, docker): %w%s", r.language, err, res.StderrSuffix()))
	}
	return redacted(red)(r.result(res))
}

// The container's limits, named when one ended the run: otherwise the node would fail with a
// bare "exited with status 137" or an interpreter's traceback.
var (
	ErrContainerMemory    = errors.New("the container reached its memory limit")
	ErrContainerProcesses = errors.New("the container reached its process limit")
)

// containerLimit tells which limits of the container ended a failed run, or nil. docker run
// exits 137 when the container's process was killed with SIGKILL: past a timeout (which the
// sandbox reports itself) that is the kernel's OOM killer at the --memory limit. A fork that
// --pids-limit refused fails with EAGAIN, which python words "Resource temporarily
// unavailable" and node "EAGAIN". A fork bomb of python meets both: the processes it could
// make fill the memory.
func containerLimit(d DockerConfig, res *sandbox.Result) error {
	if res.TimedOut || res.Cancelled || res.StdoutOverflow || res.ExitCode == 0 {
		return nil
	}
	var met []error
	if strings.Contains(res.Stderr, "Resource temporarily unavailable") || strings.Contains(res.Stderr, "EAGAIN") {
		met = append(met, fmt.Errorf("%w of %d processes (docker --pids-limit): a fork or a thread was refused", ErrContainerProcesses, d.PidsLimit))
	}
	if res.ExitCode == 137 {
		met = append(met, fmt.Errorf("%w of %d MiB (PLAITA_SANDBOX_DOCKER_MEMORY_MB): killed by the kernel (exit 137)", ErrContainerMemory, d.MemoryMB))
	}
	switch len(met) {
	case 0:
		return nil
	case 1:
		return met[0]
	default:
		return fmt.Errorf("%w; then %w", met[0], met[1])
	}
}

func dockerCmd(bin string, env []string, limit time.Duration, args ...string) {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	c := exec.CommandContext(ctx, bin, args...)
	c.Env = env
	_ = c.Run()
}
