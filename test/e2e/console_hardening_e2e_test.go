//go:build e2e

package e2e

import (
	"io"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"plaita/test/redistest"
)

// The console from the binary, attacked as an outsider would: the pages do no work for an
// anonymous caller, the public health names no tenant and no Redis address, and failed logins
// from one network do not lock the account's owner out.

// from is an HTTP client whose connections come from ip (127.0.0.0/8 is all local), that
// follows no redirect.
func from(ip string) *http.Client {
	return &http.Client{Timeout: 10 * time.Second,
		Transport:     &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}).DialContext},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func TestConsoleHoldsAgainstAnOutsider(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	con := s.startConsole(map[string]string{"PLAITA_CONSOLE_ADMIN_PASSWORD": "the-admin-password"})
	if code, body := con.call(t, http.MethodPost, "/api/tenants", map[string]string{"slug": "secret-acme"}); code != http.StatusCreated {
		t.Fatalf("create a tenant: %d %v", code, body)
	}

	// An anonymous validate of an invalid 195 KB definition: sent to log in, nothing rendered.
	def := "{\n" + strings.Repeat("  \"k\": [1, 2,,],\n", 12000) + "}"
	res, err := from("127.0.0.2").PostForm(con.base+"/ui/flows/validate", url.Values{"definition": {def}})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther || !strings.HasPrefix(res.Header.Get("Location"), "/ui/login") || len(body) > 512 {
		t.Fatalf("anonymous validate of %d bytes: %d %q, %d bytes", len(def), res.StatusCode, res.Header.Get("Location"), len(body))
	}

	// The public health names no tenant; the admin's does.
	res, err = from("127.0.0.2").Get(con.base + "/health")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || strings.Contains(string(body), "secret-acme") || !strings.Contains(string(body), `"published_count"`) {
		t.Fatalf("public /health: %d %s", res.StatusCode, body)
	}

	// Six wrong passwords of the platform admin from one address: that address is held back,
	// the admin logs in from another.
	login := func(c *http.Client, password string) int {
		res, err := c.Post(con.base+"/api/login", "application/json",
			strings.NewReader(`{"login": "admin", "password": `+strconv.Quote(password)+`}`))
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	attacker := from("127.0.0.3")
	for i := range 6 {
		login(attacker, "guess-"+strconv.Itoa(i))
	}
	if code := login(attacker, "the-admin-password"); code != http.StatusTooManyRequests {
		t.Fatalf("the attacker's address after 6 failures: %d, want 429", code)
	}
	if code := login(from("127.0.0.4"), "the-admin-password"); code != http.StatusOK {
		t.Fatalf("the admin from another address: %d, want 200 (locked out by someone else's guesses)", code)
	}

	// In local mode (no Redis at start), the public health does not name the Redis address it
	// could not reach.
	redisPort := strconv.Itoa(redistest.FreePort(t))
	local := startLocalConsole(t, filepath.Join(t.TempDir(), "local.db"), map[string]string{"PLAITA_CONSOLE_REDIS_URL": "redis://127.0.0.1:" + redisPort + "/0"})
	res, err = from("127.0.0.2").Get(local.base + "/health")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || strings.Contains(string(body), redisPort) || !strings.Contains(string(body), `"mode":"local"`) {
		t.Fatalf("public /health in local mode names the Redis address (port %s): %s", redisPort, body)
	}
}
