//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The code node's subprocess backend against the attack that made an editor platform admin: code
// that reads /proc/<parent>/environ (and mem) of the plaita process running it, where the
// console's admin key and the Redis password live.

// peekCode reads what it can of its parent and returns it: the parent's command line (readable
// by anyone: it proves whose child the code was), its environment and whether its memory opens.
const peekCode = `import os
ppid = os.getppid()
seen = {"ppid": ppid}
with open(f"/proc/{ppid}/cmdline", "rb") as f:
    seen["parent"] = f.read().replace(b"\0", b" ").decode(errors="replace")
for name in ("environ", "mem"):
    try:
        with open(f"/proc/{ppid}/{name}", "rb") as f:
            seen[name] = f.read(1 << 16).decode("latin-1") if name == "environ" else "opened"
    except OSError as e:
        seen[name] = f"{type(e).__name__}: {e}"
result = seen
`

func peekFlow(t *testing.T) string {
	t.Helper()
	b, err := json.Marshal(map[string]any{
		"id": "peek", "start": "peek",
		"nodes": []any{
			map[string]any{"id": "peek", "type": "code", "params": map[string]any{"language": "python", "sandbox_backend": "subprocess", "code": peekCode}, "next": "done"},
			map[string]any{"id": "done", "type": "end", "params": map[string]any{"output": "{{ NODE.peek }}"}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func randomSecret(t *testing.T) string {
	t.Helper()
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return "s3cr3t" + hex.EncodeToString(b[:])
}

// secretEnv is what the attack was after: the console's admin key and password, the Redis
// password. The run needs none of it; the code must see none of it.
func secretEnv(secret string) map[string]string {
	return map[string]string{
		"PLAITA_CONSOLE_ADMIN_API_KEY":  "key-" + secret,
		"PLAITA_CONSOLE_ADMIN_PASSWORD": "pw-" + secret,
		"PLAITA_REDIS_URL":              "redis://:" + secret + "@127.0.0.1:1/0",
	}
}

// checkPeek checks a `plaita run --json` of peekFlow: the code ran under plaita, and was refused
// plaita's environment and memory.
func checkPeek(t *testing.T, r result, secret string) {
	t.Helper()
	if strings.Contains(r.stdout, secret) || strings.Contains(r.stderr, secret) {
		t.Fatalf("the code read plaita's environment: the secret is in the output")
	}
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	var st savedExecution
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
		t.Fatalf("--json output is not the state: %v\n%s", err, r.stdout)
	}
	out, _ := st.Output.(map[string]any)
	if st.Status != "completed" || out == nil {
		t.Fatalf("status %s, output %v, error %+v", st.Status, st.Output, st.Error)
	}
	// The positive signal: the code ran, as a child of `plaita run`.
	if parent, _ := out["parent"].(string); !strings.Contains(parent, "plaita") || !strings.Contains(parent, " run ") {
		t.Fatalf("the code's parent is %q, not plaita run", parent)
	}
	for _, name := range []string{"environ", "mem"} {
		if got, _ := out[name].(string); !strings.HasPrefix(got, "PermissionError") {
			if name == "environ" && !strings.Contains(got, "Error") {
				got = "the environment" // not copied into the test's log
			}
			t.Errorf("/proc/<plaita>/%s: want a PermissionError, the code got %q", name, got)
		}
	}
}

func TestCodeNodeCannotReadPlaitasEnvironment(t *testing.T) {
	t.Parallel()
	t.Run("as this user", func(t *testing.T) {
		secret := randomSecret(t)
		flow := writeFile(t, "peek.json", peekFlow(t))
		checkPeek(t, run(t, secretEnv(secret), "run", flow, "--json", "--quiet"), secret)
	})

	// When the tests run as root, the case above is a root plaita (the user namespace); this is a
	// non-root one (non-dumpable alone), as in the container image.
	t.Run("as an unprivileged user", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("the tests run as a non-root user: the case above is this one")
		}
		setpriv, err := exec.LookPath("setpriv")
		if err != nil {
			t.Skip("setpriv (util-linux) is not installed: plaita is not run as an unprivileged user here")
		}
		// The unprivileged user's PATH: a python3 under /root (pyenv) is out of its reach.
		const path = "/usr/local/bin:/usr/bin:/bin"
		if _, err := os.Stat("/usr/bin/python3"); err != nil {
			if _, err := os.Stat("/usr/local/bin/python3"); err != nil {
				t.Skipf("no python3 in %s for the unprivileged user (only the root case ran)", path)
			}
		}
		// A directory that user can enter, holding a copy of the binary (TestMain's lies in a
		// directory only root can enter) and the flow.
		dir, err := os.MkdirTemp("", "plaita-e2e-nobody-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		bin := filepath.Join(dir, "plaita")
		copyFile(t, binary, bin, 0o755)
		flow := filepath.Join(dir, "peek.json")
		if err := os.WriteFile(flow, []byte(peekFlow(t)), 0o644); err != nil {
			t.Fatal(err)
		}

		secret := randomSecret(t)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, setpriv, "--reuid", "65534", "--regid", "65534", "--clear-groups", bin, "run", flow, "--json", "--quiet")
		cmd.Env = append(processEnv(t, secretEnv(secret)), "PATH="+path, "HOME="+dir)
		cmd.Dir = dir
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err = cmd.Run()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		checkPeek(t, result{code, stdout.String(), stderr.String()}, secret)
	})
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_EXCL, mode)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}
