package web

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/redis/rueidis"
	"github.com/rs/zerolog"

	"plaita/control"
	"plaita/engine"
	"plaita/engine/state"
	"plaita/queue"
	"plaita/store"
	"plaita/store/sqlite"
	"plaita/test/redistest"
)

// The API's tests run over real HTTP: the server on a random port of 127.0.0.1, a SQLite file
// in the test's directory, the shared test Redis under a key root of the test's own.

const testAdminKey = "test-admin-key-0123456789"

// fixture is one console.
type fixture struct {
	srv    *Server
	url    string
	db     *sqlite.DB
	c      rueidis.Client
	root   string
	redis  *store.Redis
	plane  *control.Plane
	q      *queue.Queue
	events *store.Events
	ledger *store.DispatchLedger
	local  *control.Local
}

type fixtureOptions struct {
	settings Settings
	epoch    string // PLAITA_DEPLOYMENT_EPOCH
	noRedis  bool
	// local runs the console in local mode (no Redis; executions on the database).
	local bool
	// dispatch turns capacity dispatch on, shadow or applied (its ledger: f.ledger).
	dispatch, shadow bool
	// server is a private Redis (a test that kills it), instead of the shared one.
	server *redistest.Server
	// redisErr is why Redis was unreachable at start (with noRedis or local).
	redisErr error
	// localRuns: the plane reads the console database's local executions too, as the
	// console's does.
	localRuns bool
}

// cheapPasswords keeps argon2id fast in tests (the parameters of production are measured in
// BenchmarkLogin).
var cheapPasswords = sqlite.PasswordParams{MemoryKiB: 64, Time: 1, Threads: 1, SaltLen: 16, KeyLen: 32}

func newFixture(t testing.TB, opts ...func(*fixtureOptions)) *fixture {
	t.Helper()
	o := fixtureOptions{epoch: "1", settings: Settings{AdminAPIKey: testAdminKey, Version: "test",
		Login: LoginThrottle{MaxFailures: 3, LockFor: time.Minute}}}
	for _, f := range opts {
		f(&o)
	}
	ctx := context.Background()
	db, err := sqlite.Open(ctx, "sqlite:///"+filepath.Join(t.TempDir(), "console.db"), sqlite.WithPasswordParams(cheapPasswords))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	f := &fixture{db: db}
	d := Deps{Log: zerolog.Nop(), RedisErr: o.redisErr}
	if o.local {
		f.local = control.NewLocal(control.LocalDeps{DB: db, Log: zerolog.Nop()})
		if err := f.local.Runner().Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.local.Runner().Stop(context.Background()) })
		d.Local = f.local
	} else if !o.noRedis {
		f.c = redistest.Client(t)
		if o.server != nil {
			f.c = o.server.Client(t)
		}
		f.root = redistest.Root(t, f.c)
		stream := f.root + ":flow:queue"
		f.q, err = queue.New(f.c, queue.Settings{Stream: stream, Group: "g", StartID: "0", Consumer: "c", DLQ: stream + ":dlq",
			ClaimMinIdle: time.Minute, MaxDeliveries: 5, DLQMaxLen: 100, TaskMaxAge: time.Hour}, metrics.NewSet(), zerolog.Nop())
		if err != nil {
			t.Fatal(err)
		}
		if err := f.q.EnsureGroup(ctx); err != nil {
			t.Fatal(err)
		}
		delay, err := queue.NewDelay(f.c, f.root+":delay:queue")
		if err != nil {
			t.Fatal(err)
		}
		f.redis = store.NewRedis(f.c, store.DefaultSettings(), f.root)
		f.events = store.NewEvents(f.c, store.EventSettings{TTL: time.Hour}, f.root)
		var dispatch control.DispatchSettings
		if o.dispatch {
			if f.ledger, err = store.NewDispatchLedger(f.c, f.root+":dispatch:ledger", 0); err != nil {
				t.Fatal(err)
			}
			dispatch = control.DispatchSettings{Ledger: f.ledger, Stale: time.Minute, Shadow: o.shadow, Actor: "console-test"}
		}
		f.plane = control.New(control.Deps{Root: f.root, Store: f.redis, Flows: store.NewFlows(f.c, f.root).Reserve(stream, stream+":dlq"),
			Events: f.events, Schedules: store.NewSchedules(f.c, f.root),
			Registry: store.NewRegistry(f.c, f.root), Control: store.NewControl(f.c, f.root), Delay: delay, Queue: f.q, Dispatch: dispatch,
			Producer: queue.NewProducer(f.c, stream, queue.Generations{}, 1<<20, nil), Expr: engine.DefaultExprLimits, StateMaxBytes: 1 << 20,
			Live: store.NewLiveEvents(f.c, f.root), LocalRuns: localRuns(o.localRuns, db)})
		d.Plane = f.plane
		d.Jobs = control.NewBulk(f.plane, db, control.BulkSettings{Runner: "test-console", Idle: 100 * time.Millisecond})
		if err := d.Jobs.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Jobs.Stop(context.Background()) })
	}
	d.Accounts = control.NewAccounts(db, f.redis, f.plane, control.AccountsSettings{Epoch: o.epoch, Log: zerolog.Nop()})
	switch {
	case f.plane != nil:
		d.Catalog = control.NewCatalog(db, f.plane)
	case f.local != nil:
		d.Catalog = control.NewCatalog(db, f.local)
	default:
		d.Catalog = control.NewCatalog(db, nil)
	}
	f.srv = New(d, o.settings)
	svc := f.srv.Service("127.0.0.1:0")
	if err := svc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		svc.Stop(sctx)
	})
	f.url = "http://" + f.srv.Addr()
	return f
}

func withSettings(fn func(*Settings)) func(*fixtureOptions) {
	return func(o *fixtureOptions) { fn(&o.settings) }
}

func withoutRedis() func(*fixtureOptions) { return func(o *fixtureOptions) { o.noRedis = true } }

// unreachable is why Redis was unreachable at start.
func unreachable(err error) func(*fixtureOptions) {
	return func(o *fixtureOptions) { o.redisErr = err }
}

// withLocal runs the console in local mode.
func withLocal() func(*fixtureOptions) { return func(o *fixtureOptions) { o.local = true } }

// withServer runs the console on a private Redis.
func withServer(srv *redistest.Server) func(*fixtureOptions) {
	return func(o *fixtureOptions) { o.server = srv }
}

// withLocalRuns makes the plane list and show the console database's local executions.
func withLocalRuns() func(*fixtureOptions) { return func(o *fixtureOptions) { o.localRuns = true } }

func localRuns(on bool, db *sqlite.DB) *sqlite.Executions {
	if !on {
		return nil
	}
	return db.Executions()
}

// withDispatch turns capacity dispatch on: shadow records the decisions only.
func withDispatch(shadow bool) func(*fixtureOptions) {
	return func(o *fixtureOptions) { o.dispatch, o.shadow = true, shadow }
}

// client is one caller: a cookie jar, the headers it sends on every request (a key, a tenant)
// and the CSRF token of its session.
type client struct {
	f       *fixture
	hc      *http.Client
	headers map[string]string
	csrf    string
}

func (f *fixture) client(headers map[string]string) *client {
	jar, _ := cookiejar.New(nil)
	if headers == nil {
		headers = map[string]string{}
	}
	return &client{f: f, hc: &http.Client{Jar: jar, Timeout: 30 * time.Second}, headers: headers}
}

// clientFrom is a client whose connections come from ip (an address of the loopback network:
// 127.0.0.0/8 is all local), so the console sees another client address.
func (f *fixture) clientFrom(ip string, headers map[string]string) *client {
	c := f.client(headers)
	c.hc.Transport = &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}).DialContext}
	return c
}

// admin is the admin key's client in tenant ("" the default).
func (f *fixture) admin(tenant string) *client {
	h := map[string]string{HeaderAdminKey: testAdminKey}
	if tenant != "" {
		h[HeaderTenant] = tenant
	}
	return f.client(h)
}

// key is a client of an API key.
func (f *fixture) key(key string) *client {
	return f.client(map[string]string{"Authorization": "Bearer " + key})
}

// resp is one answer.
type resp struct {
	status int
	header http.Header
	raw    []byte
	body   map[string]any
}

// problem is the answer as a Problem (the test fails when it is none).
func (r resp) problem(t testing.TB) Problem {
	t.Helper()
	var p Problem
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/problem+json") {
		t.Fatalf("status %d, Content-Type %q, not a problem: %s", r.status, ct, r.raw)
	}
	if err := json.Unmarshal(r.raw, &p); err != nil || p.Code == "" || p.Status != r.status || p.RequestID == "" {
		t.Fatalf("not a problem of status %d with a code and a request id: %v %s", r.status, err, r.raw)
	}
	return p
}

// do sends one request; body is a string (sent as it is), nil, or a value sent as JSON.
func (c *client) do(t testing.TB, method, path string, body any, extra ...string) resp {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, c.f.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range c.headers {
		req.Header.Set(k, v)
	}
	if c.csrf != "" {
		req.Header.Set(HeaderCSRF, c.csrf)
	}
	for i := 0; i+1 < len(extra); i += 2 {
		req.Header.Set(extra[i], extra[i+1])
	}
	res, err := c.hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	out := resp{status: res.StatusCode, header: res.Header, raw: raw}
	_ = json.Unmarshal(raw, &out.body)
	if res.StatusCode >= 500 && res.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("%s %s: %d %s", method, path, res.StatusCode, raw)
	}
	// Every problem of every test: none names a storage key (the test's key root, or the default).
	if res.StatusCode >= 400 && (c.f.root != "" && bytes.Contains(raw, []byte(c.f.root+":")) || bytes.Contains(raw, []byte("plaita:"))) {
		t.Errorf("%s %s: the problem names a storage key: %s", method, path, raw)
	}
	return out
}

// want is do that fails the test unless the status is status.
func (c *client) want(t testing.TB, status int, method, path string, body any, extra ...string) resp {
	t.Helper()
	r := c.do(t, method, path, body, extra...)
	if r.status != status {
		t.Fatalf("%s %s: %d, want %d: %s", method, path, r.status, status, r.raw)
	}
	return r
}

// decode reads the answer's body into v.
func (r resp) decode(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.raw, v); err != nil {
		t.Fatalf("decode %s: %v", r.raw, err)
	}
}

// user creates a user with a membership in tenant, logs them in and returns their client.
func (f *fixture) user(t testing.TB, login, tenant string, role sqlite.Role) *client {
	t.Helper()
	ctx := context.Background()
	u, err := f.db.CreateUser(ctx, sqlite.NewUser{Login: login, Password: "password-" + login})
	if err != nil {
		t.Fatal(err)
	}
	if tenant != "" {
		if _, err := f.db.SetMembership(ctx, u.ID, tenant, role); err != nil {
			t.Fatal(err)
		}
	}
	c := f.client(map[string]string{HeaderTenant: tenant})
	c.login(t, login, "password-"+login)
	return c
}

// login logs the client in and keeps the CSRF token.
func (c *client) login(t testing.TB, login, password string) resp {
	t.Helper()
	r := c.want(t, http.StatusOK, http.MethodPost, "/api/login", map[string]string{"login": login, "password": password})
	var s SessionInfo
	r.decode(t, &s)
	c.csrf = s.CSRFToken
	return r
}

// tenant creates a tenant through the admin key.
func (f *fixture) tenant(t testing.TB, slug string) {
	t.Helper()
	f.admin("").want(t, http.StatusCreated, http.MethodPost, "/api/tenants", map[string]string{"slug": slug})
}

// apiKey makes a key of tenant with role through the admin key.
func (f *fixture) apiKey(t testing.TB, tenant string, role sqlite.Role) string {
	t.Helper()
	r := f.admin(tenant).want(t, http.StatusCreated, http.MethodPost, "/api/api-keys", map[string]string{"name": "k-" + string(role), "role": string(role)})
	var k APIKeyCreated
	r.decode(t, &k)
	return k.Key
}

// save writes an execution state straight into the store (the state a worker would leave).
func (f *fixture) save(t testing.TB, st *state.Execution) {
	t.Helper()
	ts, err := f.redis.Tenant(st.TenantID)
	if err != nil {
		t.Fatal(err)
	}
	if err := ts.Save(context.Background(), st); err != nil {
		t.Fatal(err)
	}
}

// auditRows reads the audit rows of every tenant.
func (f *fixture) auditRows(t testing.TB) []sqlite.AuditEntry {
	t.Helper()
	p, err := f.db.ListAudit(context.Background(), sqlite.AuditQuery{AllTenants: true, Limit: sqlite.MaxAuditLimit})
	if err != nil {
		t.Fatal(err)
	}
	return p.Entries
}

// audited finds the newest audit row of an action.
func (f *fixture) audited(t testing.TB, action string) (sqlite.AuditEntry, bool) {
	t.Helper()
	for _, e := range f.auditRows(t) {
		if e.Action == action {
			return e, true
		}
	}
	return sqlite.AuditEntry{}, false
}

const approvalFlow = `{"id":"ask","version":"1","start":"ask","nodes":[
	{"id":"ask","type":"approval","params":{"message":"ok?"},"next":"done"},
	{"id":"done","type":"end"}]}`
