//go:build e2e

package stack

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// repo is the repository's root: the compose file and the Dockerfile are there.
var repo = func() string {
	dir, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		panic(err)
	}
	return dir
}()

// requireDocker fails the test when no daemon or no Compose v2 answers: these suites are the
// proof that the containers work, so a machine that cannot run them must say so, not pass.
func requireDocker(t *testing.T) {
	t.Helper()
	if out, err := exec.Command("docker", "version", "--format", "{{.Server.Version}}").CombinedOutput(); err != nil || strings.TrimSpace(string(out)) == "" {
		t.Fatalf("no Docker daemon answers (%v: %s): run `bash deploy/local-docker.sh` as root (what .ci/run does), or start your Docker", err, strings.TrimSpace(string(out)))
	}
	out, err := exec.Command("docker", "compose", "version", "--short").CombinedOutput()
	major, _, _ := strings.Cut(strings.TrimPrefix(strings.TrimSpace(string(out)), "v"), ".")
	if n, convErr := strconv.Atoi(major); err != nil || convErr != nil || n < 2 {
		t.Fatalf("no Docker Compose v2 plugin (%v: %s): run `bash deploy/local-docker.sh` as root", err, strings.TrimSpace(string(out)))
	}
}

// docker runs the docker client and returns its combined output; it fails the test when the
// command fails.
func docker(t *testing.T, limit time.Duration, args ...string) string {
	t.Helper()
	out, err := dockerErr(limit, args...)
	if err != nil {
		t.Fatalf("docker %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func dockerErr(limit time.Duration, args ...string) (string, error) {
	return dockerEnv(limit, nil, args...)
}

// dockerEnv runs the docker client in the repository with env added to the test's environment
// and returns its combined output.
func dockerEnv(limit time.Duration, env []string, args ...string) (string, error) {
	return runDocker(limit, env, true, args...)
}

// dockerStdout is dockerEnv with the standard output alone.
func dockerStdout(limit time.Duration, env []string, args ...string) (string, error) {
	return runDocker(limit, env, false, args...)
}

func runDocker(limit time.Duration, env []string, combined bool, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	c := exec.CommandContext(ctx, "docker", args...)
	c.Dir = repo
	c.Env = append(os.Environ(), env...)
	if combined {
		out, err := c.CombinedOutput()
		return string(out), err
	}
	out, err := c.Output()
	return string(out), err
}

// waitUntil polls cond every 200 ms until it holds or limit passes.
func waitUntil(t *testing.T, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, limit)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
