// Package redistest gives tests a real Redis: the shared test server (PLAITA_TEST_REDIS_URL,
// default redis://127.0.0.1:6379/15) with a private key root per test, or private
// redis-server processes (single or a small cluster) for tests that stop, kill or cluster
// Redis. Never FLUSHDB the shared server: packages run in parallel against it.
package redistest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

// URL is the shared test server.
func URL() string {
	if u := os.Getenv("PLAITA_TEST_REDIS_URL"); u != "" {
		return u
	}
	return "redis://127.0.0.1:6379/15"
}

// Client connects to the shared test server; the test fails (never skips) when none answers.
func Client(t testing.TB) rueidis.Client {
	t.Helper()
	return connect(t, URL())
}

func connect(t testing.TB, url string) rueidis.Client {
	t.Helper()
	opt, err := rueidis.ParseURL(url)
	if err != nil {
		t.Fatalf("redis url %q: %v", url, err)
	}
	opt.DisableCache = true
	c, err := rueidis.NewClient(opt)
	if err != nil {
		t.Fatalf("no Redis at %s (%v): start one or set PLAITA_TEST_REDIS_URL; `bash .ci/run` starts one", url, err)
	}
	t.Cleanup(c.Close)
	return c
}

// Root returns a key root no other test uses, and deletes every key under it when the test
// ends.
func Root(t testing.TB, c rueidis.Client) string {
	t.Helper()
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	root := "plaitatest_" + hex.EncodeToString(b[:])
	t.Cleanup(func() { DeleteRoot(t, c, root) })
	return root
}

// DeleteRoot removes every key under root (on every master of a cluster), and the keys that
// carry a root key as their hash tag ({<root>:…}: the dead-letter stream's markers).
func DeleteRoot(t testing.TB, c rueidis.Client, root string) {
	t.Helper()
	for _, pattern := range []string{root + ":*", "{" + root + ":*"} {
		deleteMatching(c, pattern)
	}
}

func deleteMatching(c rueidis.Client, pattern string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, node := range c.Nodes() {
		var cursor uint64
		for {
			e, err := node.Do(ctx, node.B().Scan().Cursor(cursor).Match(pattern).Count(1000).Build()).AsScanEntry()
			if err != nil {
				// A replica or a node that went away; the masters are what matter.
				break
			}
			for _, k := range e.Elements {
				node.Do(ctx, node.B().Unlink().Key(k).Build())
			}
			if cursor = e.Cursor; cursor == 0 {
				break
			}
		}
	}
}

// Server is a private redis-server process.
type Server struct {
	t    testing.TB
	Port int
	dir  string
	args []string
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited (its Wait returned)
}

// FreePort returns a TCP port nobody listens on right now.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// StartServer starts a private redis-server on a free port (extra args are appended) and stops
// it when the test ends.
func StartServer(t testing.TB, args ...string) *Server {
	t.Helper()
	s := &Server{t: t, Port: FreePort(t), dir: t.TempDir(), args: args}
	t.Cleanup(s.Kill)
	// The free port is free when FreePort looked; another process may take it before the
	// server binds it, and then the server exits at once: a new port is tried.
	for try := 0; ; try++ {
		err := s.launch()
		if err == nil {
			return s
		}
		if try == 2 {
			t.Fatal(err)
		}
		t.Logf("%v; trying another port", err)
		s.Port = FreePort(t)
	}
}

func (s *Server) start() {
	s.t.Helper()
	if err := s.launch(); err != nil {
		s.t.Fatal(err)
	}
}

// launch starts the server on s.Port and waits until it answers: an error when it exits
// first (with what it said) or does not answer in time.
func (s *Server) launch() error {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return fmt.Errorf("redis-server is not installed (apt-get install redis-server; .ci/run does it): %w", err)
	}
	args := append([]string{"--port", strconv.Itoa(s.Port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", s.dir, "--daemonize", "no"}, s.args...)
	cmd := exec.Command(bin, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start redis-server: %w", err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	s.cmd, s.done = cmd, done
	deadline := time.Now().Add(10 * time.Second)
	for !ping(s.Addr()) {
		select {
		case <-done:
			s.cmd = nil
			return fmt.Errorf("redis-server on port %d exited before it answered: %s", s.Port, lastLine(out.String()))
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis-server on port %d did not answer in 10 s", s.Port)
		}
	}
	// An answer from a server that is not ours (another test's took the port): ours has exited.
	select {
	case <-done:
		s.cmd = nil
		return fmt.Errorf("redis-server on port %d exited: the port was taken (%s)", s.Port, lastLine(out.String()))
	case <-time.After(50 * time.Millisecond):
	}
	return nil
}

// lastLine is the last non-empty line of a process's output (why redis-server stopped).
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// Addr is host:port.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.Port) }

// URL is the server's redis:// URL.
func (s *Server) URL() string { return "redis://" + s.Addr() + "/0" }

// Client connects to this server.
func (s *Server) Client(t testing.TB) rueidis.Client { return connect(t, s.URL()) }

// Kill stops the server at once (SIGKILL); safe to call twice.
func (s *Server) Kill() {
	if s.cmd != nil && s.cmd.Process != nil {
		s.cmd.Process.Kill()
		<-s.done
		s.cmd = nil
	}
}

// Restart starts the server again on the same port (its data is gone unless the server was
// started with persistence, e.g. --appendonly yes).
func (s *Server) Restart() {
	s.Kill()
	s.start()
}

// Start starts a killed server again on the same port and directory (for a restart after a
// pause: Kill, wait, Start). It is a no-op while the server runs.
func (s *Server) Start() {
	if s.cmd != nil {
		return
	}
	s.start()
}

func ping(addr string) bool {
	conn, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return false
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(time.Second))
	// A RESP array, not an inline command: every server speaks it (embedded ones too).
	if _, err := conn.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	return err == nil && strings.HasPrefix(line, "+PONG")
}

// StartCluster starts n cluster-enabled servers, joins them into a cluster without replicas,
// waits until it is healthy and returns a client for it.
func StartCluster(t testing.TB, n int) (rueidis.Client, []*Server) {
	t.Helper()
	var servers []*Server
	var addrs []string
	for range n {
		s := StartServer(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "2000")
		servers = append(servers, s)
		addrs = append(addrs, s.Addr())
	}
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Fatalf("redis-cli is not installed: %v", err)
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	deadline := time.Now().Add(20 * time.Second)
	for _, s := range servers { // every node must see the cluster healthy, not just one
		for {
			out, _ := exec.Command(cli, "-p", strconv.Itoa(s.Port), "cluster", "info").Output()
			if strings.Contains(string(out), "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("cluster not ok on %s:\n%s", s, out)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: addrs, DisableCache: true})
	if err != nil {
		t.Fatalf("cluster client: %v", err)
	}
	t.Cleanup(c.Close)
	return c, servers
}

// Describe names a server in failure messages.
func (s *Server) String() string { return fmt.Sprintf("redis-server :%d", s.Port) }
