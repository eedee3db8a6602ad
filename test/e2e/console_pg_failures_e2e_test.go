//go:build e2e

package e2e

import (
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"plaita/test/pgtest"
	"plaita/test/redistest"
)

// The console's PostgreSQL failing, from the binary (the runbook's PLAITA_CONSOLE_DB_URL rule):
// a black-holed address and a refused login each fail the start by name within about 5 s, the
// password never shown; a database that goes away while the console runs answers 503
// database_unavailable at once — nothing is written half — and the console serves again by
// itself once the database is back.

// consoleStartFails starts a console on dbURL and waits for it to exit: its exit status must be
// a failure within budget, its output must say want and never the URL's password.
func consoleStartFails(t *testing.T, s *stack, dbURL, want, password string, budget time.Duration) {
	t.Helper()
	port := redistest.FreePort(t)
	start := time.Now()
	p := s.spawn("console", map[string]string{"PLAITA_CONSOLE_DB_URL": dbURL, "PLAITA_CONSOLE_REDIS_URL": s.srv.URL(),
		"PLAITA_CONSOLE_PORT": strconv.Itoa(port), "PLAITA_CONSOLE_HOST": "127.0.0.1", "PLAITA_METRICS_PORT": "0"})
	if !p.wait(budget + 5*time.Second) {
		t.Fatalf("the console on %s still runs after %s:\n%s", want, budget+5*time.Second, p.stderr.String())
	}
	took := time.Since(start)
	out := p.stderr.String()
	if p.cmd.ProcessState.Success() || !strings.Contains(out, want) || strings.Contains(out, password) {
		t.Fatalf("the console on %s: exit %v, output:\n%s", want, p.cmd.ProcessState, out)
	}
	if took > budget {
		t.Fatalf("the console on %s took %s to fail (budget %s)", want, took, budget)
	}
}

func TestConsoleDatabaseFailuresOnPostgres(t *testing.T) {
	t.Parallel()
	s := newStack(t)

	// A listener that accepts and never answers.
	hole, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hole.Close()
	var held []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := hole.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	})
	consoleStartFails(t, s, "postgres://plaita:black-hole-secret@"+hole.Addr().String()+"/console?sslmode=disable",
		"the console database does not answer", "black-hole-secret", 6*time.Second)

	// A login the server refuses (no such role: the machines' server trusts every password of a
	// role it has).
	refused, _ := url.Parse(pgtest.Database(t))
	refused.User = url.UserPassword("no_such_role_here", "refused-secret")
	consoleStartFails(t, s, refused.String(), "refused the connection", "refused-secret", 6*time.Second)

	// The database going away while the console runs, through a proxy the test cuts.
	db, _ := url.Parse(pgtest.Database(t))
	proxy := startTCPProxy(t, db.Host)
	db.Host = proxy.addr
	con := s.startConsole(map[string]string{"PLAITA_CONSOLE_DB_URL": db.String(), "PLAITA_CONSOLE_ADMIN_PASSWORD": "the-admin-password"})
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Timeout: 15 * time.Second, Jar: jar}
	if code, body := replicaCall(t, hc, http.MethodPost, con.base+"/api/login", nil, map[string]string{"login": "admin", "password": "the-admin-password"}); code != http.StatusOK {
		t.Fatalf("log in: %d %v", code, body)
	}
	con.publishFlow(t, "", modeFlow)

	proxy.down()
	asked := time.Now()
	code, body := replicaCall(t, hc, http.MethodGet, con.base+"/api/session", nil, nil)
	if took := time.Since(asked); code != http.StatusServiceUnavailable || body["code"] != "database_unavailable" || took > 6*time.Second {
		t.Fatalf("the session with the database gone: %d %v after %s", code, body, took)
	}
	// A draft save needs the database: refused whole, not half written.
	if code, body := con.call(t, http.MethodPost, "/api/flows/drafts", map[string]any{"definition": map[string]any{"id": "hello"}}); code != http.StatusServiceUnavailable {
		t.Fatalf("a draft with the database gone: %d %v", code, body)
	}
	if code, body := replicaCall(t, hc, http.MethodGet, con.base+"/health", map[string]string{"X-Admin-API-Key": consoleAdminKey}, nil); code != http.StatusOK && code != http.StatusServiceUnavailable ||
		body["status"] != "degraded" {
		t.Fatalf("/health with the database gone: %d %v", code, body)
	}

	proxy.up()
	waitFor(t, "the console to serve the session again", 30*time.Second, func() bool {
		code, _ := replicaCall(t, hc, http.MethodGet, con.base+"/api/session", nil, nil)
		return code == http.StatusOK
	}, con.p)
	if code, body := con.call(t, http.MethodPost, "/api/flows/drafts", map[string]any{"definition": map[string]any{"id": "hello"}}); code != http.StatusCreated {
		t.Fatalf("a draft once the database is back: %d %v", code, body)
	}
	if code, body := con.call(t, http.MethodGet, "/api/flows/drafts/hello", nil); code != http.StatusOK {
		t.Fatalf("the draft: %d %v", code, body)
	}
}

// tcpProxy forwards a port to target until it is cut: down closes the listener and every
// connection (the database is gone: connections reset, new ones refused), up listens again on
// the same address.
type tcpProxy struct {
	t      *testing.T
	addr   string
	target string

	mu    sync.Mutex
	ln    net.Listener
	conns []net.Conn
}

func startTCPProxy(t *testing.T, target string) *tcpProxy {
	p := &tcpProxy{t: t, addr: "127.0.0.1:" + strconv.Itoa(redistest.FreePort(t)), target: target}
	p.up()
	t.Cleanup(p.down)
	return p
}

func (p *tcpProxy) up() {
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		p.t.Fatal(err)
	}
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", p.target)
			if err != nil {
				in.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, in, out)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(out, in); out.Close() }()
			go func() { _, _ = io.Copy(in, out); in.Close() }()
		}
	}()
}

func (p *tcpProxy) down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}
