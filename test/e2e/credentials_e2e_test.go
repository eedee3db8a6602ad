//go:build e2e

package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"plaita/control"
	"plaita/internal/keyring"
	"plaita/store"
	"plaita/test/redistest"
)

// A credential from the binary (console + worker on a private Redis): created over the API, sent
// by an http node to a server that echoes it back, and found nowhere else — not in any Redis key
// or value, not in a log line of either process, not in an API answer or the live stream, not
// in the console database's files; the execution's output says "[credential NAME]".
func TestCredentialReachesItsServerAndNothingElse(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t)
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "credentials.key")
	db := filepath.Join(dir, "console.db")
	con := startModeConsole(t, db, srv.URL(), map[string]string{"PLAITA_CREDENTIALS_KEY_FILE": keyFile})
	const value = "tok_QmF6-4f1x9ZtLw0R2s7Kc3VbN8"
	var mu sync.Mutex
	var got []string
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Get("Authorization"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Seen", r.Header.Get("Authorization"))
		fmt.Fprintf(w, `{"seen": %q}`, r.Header.Get("Authorization"))
	}))
	defer echo.Close()

	code, body := con.call(t, http.MethodPost, "/api/credentials", map[string]any{"name": "api_token", "value": value})
	if code != http.StatusCreated || body["value"] != nil {
		t.Fatalf("create: %d %v", code, body)
	}
	if info, err := os.Stat(keyFile); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("the key file the console made: %v %v", info, err)
	}
	worker := spawn(t, map[string]string{"PLAITA_REDIS_URL": srv.URL(), "PLAITA_LOG_FORMAT": "json", "PLAITA_CODE_BACKEND": "subprocess",
		"PLAITA_CREDENTIALS_KEY_FILE": keyFile, "PLAITA_LOG_LEVEL": "debug"}, "worker")
	def := `{"id": "call", "version": "1", "start": "fetch", "nodes": [
	  {"id": "fetch", "type": "http", "params": {"url": "` + echo.URL + `/x",
	    "credentialHeaders": {"Authorization": {"credential": "api_token", "prefix": "Bearer "}}}, "next": "done"},
	  {"id": "done", "type": "end", "params": {"output": "{{ NODE.fetch.RESPONSE.body.seen }}"}}]}`
	if code, body := con.call(t, http.MethodPost, "/api/flows", map[string]any{"definition": jsonRaw(def)}); code != http.StatusCreated {
		t.Fatalf("publish: %d %v", code, body)
	}
	id := con.startFlow(t, "call", nil)
	st := con.waitExecution(t, id, "completed", statusOf("completed"))
	if st["output"] != "Bearer [credential api_token]" {
		t.Fatalf("output %v", st["output"])
	}
	mu.Lock()
	if len(got) != 1 || got[0] != "Bearer "+value {
		t.Fatalf("the server got %q", got)
	}
	mu.Unlock()

	forms := []string{value, base64.StdEncoding.EncodeToString([]byte(value)), base64.RawURLEncoding.EncodeToString([]byte(value))}
	leak := func(where, s string) {
		t.Helper()
		for _, f := range forms {
			if strings.Contains(s, f) {
				t.Fatalf("the value is in %s", where)
			}
		}
	}
	// Every answer a client could read about the execution and the credential.
	for _, path := range []string{"/api/executions/" + id, "/api/executions/" + id + "/timeline", "/api/executions?limit=100", "/api/credentials",
		"/api/credentials/api_token", "/api/dead-letters", "/api/audit?limit=1000", "/health"} {
		code, _ := con.call(t, http.MethodGet, path, nil)
		raw := con.raw(t, path)
		if code != http.StatusOK {
			t.Fatalf("%s: %d", path, code)
		}
		leak(path, raw)
	}
	leak("the live stream", con.raw(t, "/api/executions/"+id+"/events")) // a terminal one's stream ends by itself
	// Every key and value of Redis: the scan, and each key's DUMP.
	c := srv.Client(t)
	ctx := context.Background()
	var cursor uint64
	keys := 0
	for {
		e, err := c.Do(ctx, c.B().Scan().Cursor(cursor).Count(1000).Build()).AsScanEntry()
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range e.Elements {
			keys++
			leak("a Redis key name", k)
			dump, err := c.Do(ctx, c.B().Dump().Key(k).Build()).ToString()
			if err != nil {
				t.Fatalf("dump %s: %v", k, err)
			}
			leak("the Redis key "+k, dump)
		}
		if cursor = e.Cursor; cursor == 0 {
			break
		}
	}
	if keys == 0 {
		t.Fatal("no Redis key was read")
	}
	// The processes' logs and the console database's files.
	worker.stop(t)
	con.p.stop(t)
	leak("the worker's log", worker.stderr.String())
	leak("the console's log", con.p.stderr.String())
	files, _ := filepath.Glob(db + "*")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		leak(f, string(b))
	}
	if len(files) == 0 {
		t.Fatal("no database file was read")
	}
}

// raw is a GET with the admin key, the body as text (a stream read to its end, within 10 s).
func (c *console) raw(t *testing.T, path string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, c.base+path, nil)
	req.Header.Set("X-Admin-API-Key", consoleAdminKey)
	res, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return string(b)
}

func jsonRaw(s string) json.RawMessage { return json.RawMessage(s) }

// `plaita credentials rotate-key` from the binary, killed with kill -9 once it has gone through
// its first tenant: every credential is under one key or the other and opens with the ring of
// both; the rerun moves the rest and says none is left under the old key; with the old key
// dropped every value still opens. With a key file holding another key only, nothing opens and
// the command fails, naming why, writing nothing.
func TestCredentialsRotateKeyKilledAndRerun(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t)
	c := srv.Client(t)
	ctx := context.Background()
	oldKey, newKey := keyring.NewKey(), keyring.NewKey()
	ring := keyring.Ring{Current: oldKey}
	creds := control.NewCredentials(store.NewCredentials(store.RedisCredentials(c), ""), func() (keyring.Ring, error) { return ring, nil })
	st := store.NewRedis(c, store.DefaultSettings(), "")
	want := map[string]string{}
	tenants := []string{"default"}
	for i := range 30 {
		tenants = append(tenants, fmt.Sprintf("t%02d", i))
	}
	for _, tenant := range tenants {
		if err := st.PublishTenantStatus(ctx, tenant, "active", "1"); err != nil {
			t.Fatal(err)
		}
		for j := range 60 {
			name, value := fmt.Sprintf("c%02d", j), fmt.Sprintf("v-%s-%d", tenant, j)
			if _, err := creds.Create(ctx, tenant, name, []byte(value), "test"); err != nil {
				t.Fatal(err)
			}
			want[tenant+"/"+name] = value
		}
	}
	opensAll := func(what string, r keyring.Ring) (byKey map[string]int) {
		t.Helper()
		ring, byKey = r, map[string]int{}
		for k, v := range want {
			tenant, name, _ := strings.Cut(k, "/")
			got, err := creds.Resolve(ctx, tenant, name)
			if err != nil || string(got) != v {
				t.Fatalf("%s: %s opens to %q %v", what, k, got, err)
			}
			view, _ := creds.Get(ctx, tenant, name)
			byKey[view.KeyID]++
		}
		return byKey
	}
	keyFile := filepath.Join(t.TempDir(), "credentials.key")
	if err := os.WriteFile(keyFile, []byte(newKey.String()+"\n"+oldKey.String()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"PLAITA_REDIS_URL": srv.URL(), "PLAITA_CREDENTIALS_KEY_FILE": keyFile, "PLAITA_LOG_FORMAT": "json"}
	p := spawn(t, env, "credentials", "rotate-key")
	waitFor(t, "the rotation's first tenant", 30*time.Second, func() bool { return strings.Contains(p.stderr.String(), "tenant default done") }, p)
	p.kill9(t)
	both := keyring.Ring{Current: newKey, Older: []keyring.Key{oldKey}}
	byKey := opensAll("after the kill", both)
	if byKey[newKey.ID()] == 0 || byKey[oldKey.ID()] == 0 {
		t.Logf("the kill came at an edge (by key %v): the rerun is still checked", byKey)
	}
	r := run(t, env, "credentials", "rotate-key", "--json")
	if r.code != 0 || strings.Contains(r.stdout, "unopenable") {
		t.Fatalf("the rerun: %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if byKey := opensAll("after the rerun", both); byKey[newKey.ID()] != len(want) {
		t.Fatalf("after the rerun, by key: %v", byKey)
	}
	opensAll("with the old key dropped", keyring.Ring{Current: newKey})

	stranger := keyring.NewKey()
	if err := os.WriteFile(keyFile, []byte(stranger.String()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r = run(t, env, "credentials", "rotate-key")
	if r.code != 1 || !strings.Contains(r.stdout+r.stderr, "does not hold") {
		t.Fatalf("a rotation with another key: %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	opensAll("after the other key's rotation", keyring.Ring{Current: newKey})
}
