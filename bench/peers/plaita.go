package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// plaitaResult is what `plaita bench e2e --json` prints.
type plaitaResult struct {
	Scenario            string  `json:"scenario"`
	N                   int     `json:"n"`
	Concurrency         int     `json:"concurrency"`
	Seconds             float64 `json:"seconds"`
	ExecutionsPerSecond float64 `json:"executions_per_second"`
	P50ms               float64 `json:"p50_ms"`
	P99ms               float64 `json:"p99_ms"`
	RedisCalls          int64   `json:"redis_calls"`
	CallsPerExecution   float64 `json:"calls_per_execution"`
	WorkerCPUMicros     float64 `json:"worker_cpu_us_per_execution"`
	RedisCPUMicros      float64 `json:"redis_cpu_us_per_execution"`
}

// runPlaita runs the plaita binary's own end-to-end benchmark on plaita's db and reads its
// JSON: the whole of stdout or, failing that, its last JSON line.
func runPlaita(ctx context.Context, t *target, bin string, o options) (plaitaResult, error) {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	var r plaitaResult
	if err := t.resetPlaita(ctx); err != nil {
		return r, err
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, "bench", "e2e", "--redis", t.plaitaURL,
		"--n", strconv.Itoa(o.n), "--concurrency", strconv.Itoa(o.concurrency), "--json")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return r, fmt.Errorf("%s: %w\n%s", bin, err, tail(stderr.String(), 2000))
	}
	line := strings.TrimSpace(stdout.String())
	if json.Unmarshal([]byte(line), &r) != nil {
		line = lastJSONLine(line)
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			return r, fmt.Errorf("reading its JSON %q: %w", tail(stdout.String(), 200), err)
		}
	}
	if r.Scenario != "e2e" || r.N != o.n || r.ExecutionsPerSecond <= 0 {
		return r, fmt.Errorf("unexpected result (want scenario e2e, n %d): %s", o.n, line)
	}
	return r, nil
}

// probePlaita fails fast, before the first asynq run, when the binary has no `bench e2e`.
func probePlaita(ctx context.Context, bin string) error {
	out, err := exec.CommandContext(ctx, bin, "bench", "--help").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "e2e") {
		return fmt.Errorf("%s has no `bench e2e` (%v):\n%s", bin, err, tail(string(out), 2000))
	}
	return nil
}

// buildPlaita builds the plaita binary from the repository root (found by walking up from the
// working directory to the go.mod of module plaita) into dir.
func buildPlaita(ctx context.Context, dir string) (string, error) {
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "plaita")
	logf("building plaita from %s", root)
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
	cmd.Dir, cmd.Stdout, cmd.Stderr = root, os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build plaita: %w", err)
	}
	return bin, nil
}

func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if mod, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && modulePath(mod) == "plaita" {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no plaita repository above the working directory: give --plaita")
		}
		dir = parent
	}
}

func modulePath(gomod []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(gomod))
	for sc.Scan() {
		if p, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(p), `"`)
		}
	}
	return ""
}

func lastJSONLine(out string) string {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); strings.HasPrefix(l, "{") {
			return l
		}
	}
	return ""
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
