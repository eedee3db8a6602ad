// Package webtest is the console's test fixture, shared by the tests of web/api and web/ui: a
// console (web.New: the API with the web UI) served over real HTTP on a random port of
// 127.0.0.1, a SQLite file in the test's directory, the shared test Redis under a key root of
// the test's own; callers (a cookie jar, a key, the admin key) and the seeding the tests share
// (states, dead letters, approvals, registry records). No program links it.
package webtest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/redis/rueidis"
	"github.com/rs/zerolog"

	"plaita/config"
	"plaita/control"
	"plaita/engine"
	"plaita/engine/state"
	"plaita/internal/keyring"
	"plaita/internal/service"
	"plaita/queue"
	"plaita/roles"
	"plaita/store"
	"plaita/store/sqlite"
	"plaita/test/redistest"
	"plaita/test/testutil"
	"plaita/web"
	"plaita/web/api"
)

// AdminKey is the platform admin key of every fixture (X-Admin-API-Key).
const AdminKey = "test-admin-key-0123456789"

// Fixture is one console, served on a random port of 127.0.0.1, with the storage under it for
// the tests to seed and read.
type Fixture struct {
	Srv    *web.Server
	URL    string
	DB     *sqlite.DB
	C      rueidis.Client // nil without Redis
	Root   string         // the test's key root
	Redis  *store.Redis
	Plane  *control.Plane
	Q      *queue.Queue
	Events *store.Events
	Ledger *store.DispatchLedger
	// Local is local mode's runtime (WithLocal): the roles run in the test's process on DB.
	Local *roles.LocalMode
	// CredentialsKey is the master key the console's credentials are sealed under at first
	// (SetRing changes the ring the console holds).
	CredentialsKey keyring.Key
	ringMu         sync.Mutex
	ring           keyring.Ring
}

// SetRing changes the master keys the console holds (a rotation).
func (f *Fixture) SetRing(r keyring.Ring) {
	f.ringMu.Lock()
	defer f.ringMu.Unlock()
	f.ring = r
}

// Option changes how New builds the console.
type Option func(*options)

type options struct {
	settings api.Settings
	// passwords are the database's argon2id parameters (cheapPasswords unless a test measures
	// the production ones).
	passwords sqlite.PasswordParams
	epoch     string // PLAITA_DEPLOYMENT_EPOCH
	noRedis   bool
	// local runs the console in local mode (no Redis; executions on the database).
	local bool
	// globalContract is the global contract key's secret (nil: the global hook path is off).
	globalContract []byte
	// dispatch turns capacity dispatch on, shadow or applied (its ledger: f.Ledger).
	dispatch, shadow bool
	// server is a private Redis (a test that kills it), instead of the shared one.
	server *redistest.Server
	// redisErr is why Redis was unreachable at start (with noRedis or local).
	redisErr error
}

// cheapPasswords keeps argon2id fast in tests (the parameters of production are measured in
// web/api's BenchmarkLogin).
var cheapPasswords = sqlite.PasswordParams{MemoryKiB: 64, Time: 1, Threads: 1, SaltLen: 16, KeyLen: 32}

// New starts a console (web.New: the API and the web UI) on a SQLite file in the test's
// directory and the shared test Redis under a key root of the test's own; it stops with the
// test.
func New(t testing.TB, opts ...Option) *Fixture {
	t.Helper()
	o := options{epoch: "1", passwords: cheapPasswords, settings: api.Settings{AdminAPIKey: AdminKey, Version: "test",
		Login: api.LoginThrottle{MaxFailures: 3, LockFor: time.Minute}}}
	for _, f := range opts {
		f(&o)
	}
	ctx := context.Background()
	db, err := sqlite.Open(ctx, "sqlite:///"+filepath.Join(t.TempDir(), "console.db"), sqlite.WithPasswordParams(o.passwords))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	f := &Fixture{DB: db}
	d := api.Deps{Log: zerolog.Nop(), RedisErr: o.redisErr}
	if o.local {
		f.Local = startLocal(t, db)
		f.Plane, d.Plane, d.LocalMode = f.Local.Plane, f.Local.Plane, true
		f.Redis = f.Local.Backend.Storage(store.DefaultSettings())
	} else if !o.noRedis {
		f.C = redistest.Client(t)
		if o.server != nil {
			f.C = o.server.Client(t)
		}
		f.Root = redistest.Root(t, f.C)
		stream := f.Root + ":flow:queue"
		f.Q, err = queue.New(queue.Redis(f.C), queue.Settings{Stream: stream, Group: "g", StartID: "0", Consumer: "c", DLQ: stream + ":dlq",
			ClaimMinIdle: time.Minute, MaxDeliveries: 5, DLQMaxLen: 100, TaskMaxAge: time.Hour}, metrics.NewSet(), zerolog.Nop())

		if err != nil {
			t.Fatal(err)
		}
		if err := f.Q.EnsureGroup(ctx); err != nil {
			t.Fatal(err)
		}
		delay, err := queue.NewDelay(queue.RedisDelays(f.C), f.Root+":delay:queue")
		if err != nil {
			t.Fatal(err)
		}
		f.Redis = store.NewRedis(f.C, store.DefaultSettings(), f.Root)
		f.Events = store.NewEvents(store.RedisEvents(f.C), store.EventSettings{TTL: time.Hour}, f.Root)
		var dispatch control.DispatchSettings
		if o.dispatch {
			if f.Ledger, err = store.NewDispatchLedger(f.C, f.Root+":dispatch:ledger", 0); err != nil {
				t.Fatal(err)
			}
			dispatch = control.DispatchSettings{Ledger: f.Ledger, Stale: time.Minute, Shadow: o.shadow, Actor: "console-test"}
		}
		f.Plane = control.New(control.Deps{Root: f.Root, Store: f.Redis, Flows: store.NewFlows(store.RedisFlows(f.C), f.Root).Reserve(stream, stream+":dlq"),
			Events: f.Events, Schedules: store.NewSchedules(store.RedisSchedules(f.C), f.Root),
			Registry: store.NewRegistry(store.OnRedis(f.C), f.Root), Control: store.NewControl(store.OnRedis(f.C), f.Root), Delay: delay, Queue: f.Q, Dispatch: dispatch,
			Producer: queue.NewProducer(queue.Redis(f.C), stream, queue.Generations{}, 1<<20, nil), Expr: engine.DefaultExprLimits, StateMaxBytes: 1 << 20,
			Live: store.NewLiveEvents(store.OnRedis(f.C), f.Root)})
		d.Plane = f.Plane
	}
	f.CredentialsKey = keyring.NewKey()
	f.ring = keyring.Ring{Current: f.CredentialsKey}
	keySource := func() (keyring.Ring, error) {
		f.ringMu.Lock()
		defer f.ringMu.Unlock()
		return f.ring, nil
	}
	switch {
	case f.Local != nil:
		d.Credentials = control.NewCredentials(store.NewCredentials(f.Local.Backend.Credentials, ""), keySource)
	case f.C != nil:
		d.Credentials = control.NewCredentials(store.NewCredentials(store.RedisCredentials(f.C), f.Root), keySource)
	}
	if f.Plane != nil {
		d.Hooks = control.NewHooks(db, f.Plane, keySource, control.GlobalContract{ID: "test", Secret: o.globalContract})
	}
	if f.Plane != nil {
		d.Jobs = control.NewBulk(f.Plane, db, control.BulkSettings{Runner: "test-console", Idle: 100 * time.Millisecond})
		if err := d.Jobs.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Jobs.Stop(context.Background()) })
	}
	d.Accounts = control.NewAccounts(db, f.Redis, f.Plane, control.AccountsSettings{Epoch: o.epoch, Log: zerolog.Nop()})
	if f.Plane != nil {
		d.Catalog = control.NewCatalog(db, f.Plane)
	} else {
		d.Catalog = control.NewCatalog(db, nil)
	}
	f.Srv = web.New(d, o.settings)
	svc := f.Srv.Service("127.0.0.1:0")
	if err := svc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		svc.Stop(sctx)
	})
	f.URL = "http://" + f.Srv.Addr()
	return f
}

// WithSettings changes the console's settings.
func WithSettings(fn func(*api.Settings)) Option {
	return func(o *options) { fn(&o.settings) }
}

// WithGlobalContract sets the global contract key (PLAITA_CONSOLE_SECRET_KEY).
func WithGlobalContract(secret []byte) Option { return func(o *options) { o.globalContract = secret } }

// WithoutRedis runs the console without Redis (nor local mode).
func WithoutRedis() Option { return func(o *options) { o.noRedis = true } }

// Unreachable is why Redis was unreachable at start.
func Unreachable(err error) Option {
	return func(o *options) { o.redisErr = err }
}

// WithLocal runs the console in local mode: the roles in the test's process on the console
// database (roles.LocalMode), as a console does when Redis is unreachable at its start.
func WithLocal() Option { return func(o *options) { o.local = true } }

// startLocal builds local mode on db as the console does, and runs its roles until the test
// ends.
func startLocal(t testing.TB, db *sqlite.DB) *roles.LocalMode {
	t.Helper()
	cfg, err := config.Load(config.RoleConsole, false, config.WithEnv(map[string]string{
		"PLAITA_CONSOLE_REDIS_URL": "redis://127.0.0.1:1/0", "PLAITA_CODE_BACKEND": "subprocess",
		"PLAITA_NODES_WORKSPACE_ROOT": t.TempDir(), "PLAITA_CLAIM_MIN_IDLE_MS": "1000"}))
	if err != nil {
		t.Fatal(err)
	}
	m, err := roles.NewLocalMode(cfg, db, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	var g service.Group
	if err := g.Start(ctx, m.Services...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		m.Drain(sctx)
		g.Stop(sctx)
	})
	return m
}

// WithServer runs the console on a private Redis.
func WithServer(srv *redistest.Server) Option {
	return func(o *options) { o.server = srv }
}

// WithPasswords sets the console database's argon2id parameters (a benchmark of the login
// measures the production ones).
func WithPasswords(p sqlite.PasswordParams) Option { return func(o *options) { o.passwords = p } }

// WithDispatch turns capacity dispatch on: shadow records the decisions only.
func WithDispatch(shadow bool) Option {
	return func(o *options) { o.dispatch, o.shadow = true, shadow }
}

// Client is one caller: a cookie jar, the headers it sends on every request (a key, a
// tenant) and the CSRF token of its session.
type Client struct {
	F       *Fixture
	HC      *http.Client
	Headers map[string]string
	CSRF    string
}

// Client is a caller sending headers on every request.

func (f *Fixture) Client(headers map[string]string) *Client {
	jar, _ := cookiejar.New(nil)
	if headers == nil {
		headers = map[string]string{}
	}
	return &Client{F: f, HC: &http.Client{Jar: jar, Timeout: 30 * time.Second}, Headers: headers}
}

// ClientFrom is a client whose connections come from ip (an address of the loopback network:
// 127.0.0.0/8 is all local), so the console sees another client address.
func (f *Fixture) ClientFrom(ip string, headers map[string]string) *Client {
	c := f.Client(headers)
	c.HC.Transport = &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}).DialContext}
	return c
}

// Admin is the admin key's client in tenant ("" the default).
func (f *Fixture) Admin(tenant string) *Client {
	h := map[string]string{api.HeaderAdminKey: AdminKey}
	if tenant != "" {
		h[api.HeaderTenant] = tenant
	}
	return f.Client(h)
}

// Key is a client of an API key.
func (f *Fixture) Key(key string) *Client {
	return f.Client(map[string]string{"Authorization": "Bearer " + key})
}

// Resp is one answer: its status, headers, body, and the body decoded as a JSON object when it
// is one.
type Resp struct {
	Status int
	Header http.Header
	Raw    []byte
	Body   map[string]any
}

// Problem is the answer as a Problem (the test fails when it is none).
func (r Resp) Problem(t testing.TB) api.Problem {
	t.Helper()
	var p api.Problem
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/problem+json") {
		t.Fatalf("status %d, Content-Type %q, not a problem: %s", r.Status, ct, r.Raw)
	}
	if err := json.Unmarshal(r.Raw, &p); err != nil || p.Code == "" || p.Status != r.Status || p.RequestID == "" {
		t.Fatalf("not a problem of status %d with a code and a request id: %v %s", r.Status, err, r.Raw)
	}
	return p
}

// Do sends one request; body is a string (sent as it is), nil, or a value sent as JSON.
func (c *Client) Do(t testing.TB, method, path string, body any, extra ...string) Resp {
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
	req, err := http.NewRequest(method, c.F.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range c.Headers {
		req.Header.Set(k, v)
	}
	if c.CSRF != "" {
		req.Header.Set(api.HeaderCSRF, c.CSRF)
	}
	for i := 0; i+1 < len(extra); i += 2 {
		req.Header.Set(extra[i], extra[i+1])
	}
	res, err := c.HC.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	out := Resp{Status: res.StatusCode, Header: res.Header, Raw: raw}
	_ = json.Unmarshal(raw, &out.Body)
	if res.StatusCode >= 500 && res.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("%s %s: %d %s", method, path, res.StatusCode, raw)
	}
	// Every problem of every test: none names a storage key (the test's key root, or the default).
	if res.StatusCode >= 400 && (c.F.Root != "" && bytes.Contains(raw, []byte(c.F.Root+":")) || bytes.Contains(raw, []byte("plaita:"))) {
		t.Errorf("%s %s: the problem names a storage key: %s", method, path, raw)
	}
	return out
}

// Want is Do that fails the test unless the status is status.
func (c *Client) Want(t testing.TB, status int, method, path string, body any, extra ...string) Resp {
	t.Helper()
	r := c.Do(t, method, path, body, extra...)
	if r.Status != status {
		t.Fatalf("%s %s: %d, want %d: %s", method, path, r.Status, status, r.Raw)
	}
	return r
}

// Decode reads the answer's body into v.
func (r Resp) Decode(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Raw, v); err != nil {
		t.Fatalf("decode %s: %v", r.Raw, err)
	}
}

// User creates a user with a membership in tenant, logs them in and returns their client.
func (f *Fixture) User(t testing.TB, login, tenant string, role sqlite.Role) *Client {
	t.Helper()
	ctx := context.Background()
	u, err := f.DB.CreateUser(ctx, sqlite.NewUser{Login: login, Password: "password-" + login})
	if err != nil {
		t.Fatal(err)
	}
	if tenant != "" {
		if _, err := f.DB.SetMembership(ctx, u.ID, tenant, role); err != nil {
			t.Fatal(err)
		}
	}
	c := f.Client(map[string]string{api.HeaderTenant: tenant})
	c.Login(t, login, "password-"+login)
	return c
}

// Login logs the client in and keeps the CSRF token.
func (c *Client) Login(t testing.TB, login, password string) Resp {
	t.Helper()
	r := c.Want(t, http.StatusOK, http.MethodPost, "/api/login", map[string]string{"login": login, "password": password})
	var s api.SessionInfo
	r.Decode(t, &s)
	c.CSRF = s.CSRFToken
	return r
}

// Tenant creates a tenant through the admin key.
func (f *Fixture) Tenant(t testing.TB, slug string) {
	t.Helper()
	f.Admin("").Want(t, http.StatusCreated, http.MethodPost, "/api/tenants", map[string]string{"slug": slug})
}

// APIKey makes a key of tenant with role through the admin key.
func (f *Fixture) APIKey(t testing.TB, tenant string, role sqlite.Role) string {
	t.Helper()
	r := f.Admin(tenant).Want(t, http.StatusCreated, http.MethodPost, "/api/api-keys", map[string]string{"name": "k-" + string(role), "role": string(role)})
	var k api.APIKeyCreated
	r.Decode(t, &k)
	return k.Key
}

// Save writes an execution state straight into the store (the state a worker would leave).
func (f *Fixture) Save(t testing.TB, st *state.Execution) {
	t.Helper()
	ts, err := f.Redis.Tenant(st.TenantID)
	if err != nil {
		t.Fatal(err)
	}
	if err := ts.Save(context.Background(), st); err != nil {
		t.Fatal(err)
	}
}

// AuditRows reads the audit rows of every tenant.
func (f *Fixture) AuditRows(t testing.TB) []sqlite.AuditEntry {
	t.Helper()
	p, err := f.DB.ListAudit(context.Background(), sqlite.AuditQuery{AllTenants: true, Limit: sqlite.MaxAuditLimit})
	if err != nil {
		t.Fatal(err)
	}
	return p.Entries
}

// Audited finds the newest audit row of an action.
func (f *Fixture) Audited(t testing.TB, action string) (sqlite.AuditEntry, bool) {
	t.Helper()
	for _, e := range f.AuditRows(t) {
		if e.Action == action {
			return e, true
		}
	}
	return sqlite.AuditEntry{}, false
}

// ApprovalFlow is a flow that waits for one approval (node "ask") and ends.
const ApprovalFlow = `{"id":"ask","version":"1","start":"ask","nodes":[
	{"id":"ask","type":"approval","params":{"message":"ok?"},"next":"done"},
	{"id":"done","type":"end"}]}`

// DeadLetters enqueues one start per tenant given and dead-letters them, as a worker that gave
// up on them would; it returns the dead letters' ids by tenant, newest last.
func (f *Fixture) DeadLetters(t testing.TB, tenants ...string) map[string][]string {
	t.Helper()
	ctx := context.Background()
	stream := f.Root + ":flow:queue"
	p := queue.NewProducer(queue.Redis(f.C), stream, queue.Generations{}, 1<<20, nil)
	for _, tenant := range tenants {
		if _, err := p.Enqueue(ctx, queue.Envelope{Kind: queue.KindStart, TenantID: tenant, FlowID: "f", FlowVersion: "1",
			ExecutionID: engine.NewExecutionID(), Input: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	ds, err := f.Q.Read(ctx, "c", len(tenants), 0)
	if err != nil || len(ds) != len(tenants) {
		t.Fatalf("read %d of %d: %v", len(ds), len(tenants), err)
	}
	for _, d := range ds {
		if err := f.Q.DeadLetter(ctx, d, "test"); err != nil {
			t.Fatal(err)
		}
	}
	es, err := f.Q.ListDLQ(ctx, 1000)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for i := len(es) - 1; i >= 0; i-- {
		out[es[i].TenantID] = append(out[es[i].TenantID], es[i].ID)
	}
	return out
}

// DeadLetter enqueues a start of flow for the default tenant and dead-letters it with reason.
func (f *Fixture) DeadLetter(t testing.TB, flow, reason string) {
	t.Helper()
	ctx := context.Background()
	p := queue.NewProducer(queue.Redis(f.C), f.Root+":flow:queue", queue.Generations{}, 1<<20, nil)
	if _, err := p.Enqueue(ctx, queue.Envelope{Kind: queue.KindStart, TenantID: "default", FlowID: flow, FlowVersion: "1",
		ExecutionID: engine.NewExecutionID(), Input: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	ds, err := f.Q.Read(ctx, "c", 1, 0)
	if err != nil || len(ds) != 1 {
		t.Fatalf("read: %v %v", ds, err)
	}
	if err := f.Q.DeadLetter(ctx, ds[0], reason); err != nil {
		t.Fatal(err)
	}
}

// StreamEntries is the task stream's entries (the replays).
func (f *Fixture) StreamEntries(t testing.TB) []queue.Envelope {
	t.Helper()
	es, err := f.C.Do(context.Background(), f.C.B().Xrange().Key(f.Root+":flow:queue").Start("-").End("+").Build()).AsXRange()
	if err != nil {
		t.Fatal(err)
	}
	var out []queue.Envelope
	for _, e := range es {
		var env queue.Envelope
		if err := json.Unmarshal([]byte(e.FieldValues[queue.PayloadField]), &env); err != nil {
			t.Fatal(err)
		}
		out = append(out, env)
	}
	return out
}

// WaitForApproval leaves execution id of tenant suspended at ApprovalFlow's node, with its
// approval record, as a worker would.
func (f *Fixture) WaitForApproval(t testing.TB, tenant, id string, since time.Time) {
	t.Helper()
	def, err := engine.Parse([]byte(ApprovalFlow), engine.NewRegistry(), engine.DefaultExprLimits)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Plane.PublishFlow(context.Background(), tenant, []byte(ApprovalFlow), ""); err != nil {
		t.Fatal(err)
	}
	f.Save(t, &state.Execution{ExecutionID: id, TenantID: tenant, FlowID: "ask", FlowVersion: "1", FlowHash: def.Hash, FlowHashAlgo: def.HashAlgo,
		Status: state.Suspended, CurrentNode: "ask", Context: map[string]any{}, StartTime: since, LastUpdate: since,
		Suspend: &state.Suspend{Kind: state.SuspendApproval, Node: "ask", Since: since, Message: "ok?"}})
	ts, err := f.Redis.Tenant(tenant)
	if err != nil {
		t.Fatal(err)
	}
	if err := ts.PutApproval(context.Background(), store.Approval{ExecutionID: id, FlowID: "ask", FlowVersion: "1", Node: "ask",
		Message: "ok?", Since: since}, time.Hour); err != nil {
		t.Fatal(err)
	}
}

// Answers are the approval resumes in the task stream, by execution: who answered, and how.
func (f *Fixture) Answers(t testing.TB) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, env := range f.StreamEntries(t) {
		if env.ResumeType != engine.ResumeApproval {
			continue
		}
		var data map[string]any
		if err := json.Unmarshal(env.ResumeData, &data); err != nil {
			t.Fatal(err)
		}
		out[env.ExecutionID] = data
	}
	return out
}

// RegisterInstance writes a live registry record, as a role's heartbeat does.
func (f *Fixture) RegisterInstance(t testing.TB, rec store.InstanceRecord) {
	t.Helper()
	if rec.HeartbeatAt.IsZero() {
		rec.HeartbeatAt = time.Now().UTC()
	}
	if err := store.NewRegistry(store.OnRedis(f.C), f.Root).Register(context.Background(), rec, time.Minute); err != nil {
		t.Fatal(err)
	}
}

// PublishLive publishes a live event of execution id, as a worker's step does.
func (f *Fixture) PublishLive(t testing.TB, tenant, id string, seq int, ev string, status state.Status) {
	t.Helper()
	b, _ := json.Marshal(store.LiveEvent{ExecutionID: id, TenantID: tenant, FlowID: "ask", Status: status, Seq: seq, Event: ev})
	if err := store.NewLiveEvents(store.OnRedis(f.C), f.Root).Publish(context.Background(), tenant, id, b); err != nil {
		t.Fatal(err)
	}
}

// WaitJob polls the bulk job until it is finished (its status is the positive signal).
func (c *Client) WaitJob(t testing.TB, id string) api.JobView {
	t.Helper()
	var v api.JobView
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		v = api.JobView{}
		c.Want(t, http.StatusOK, http.MethodGet, "/api/jobs/"+id+"?failures_limit=1", nil).Decode(t, &v)
		if sqlite.JobStatus(v.Job.Status).Finished() {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s did not finish: %+v", id, v.Job)
		}
	}
}

// Stream opens a live stream (Server-Sent Events) as the client.
func (c *Client) Stream(t testing.TB, path string, extra ...string) (*testutil.SSEStream, Resp) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, c.F.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	for k, v := range c.Headers {
		req.Header.Set(k, v)
	}
	for i := 0; i+1 < len(extra); i += 2 {
		req.Header.Set(extra[i], extra[i+1])
	}
	s, status, body := testutil.OpenSSE(t, req)
	r := Resp{Status: status, Raw: body}
	_ = json.Unmarshal(body, &r.Body)
	return s, r
}

// Latencies collects request durations for a benchmark's p50 and p99.
type Latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

// Add records one request's duration (safe from many goroutines).
func (l *Latencies) Add(d time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
}

// Report reports the p50 and p99 in milliseconds as the benchmark's metrics.
func (l *Latencies) Report(b *testing.B) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.d) == 0 {
		return
	}
	slices.Sort(l.d)
	p := func(q float64) float64 {
		return float64(l.d[min(len(l.d)-1, int(q*float64(len(l.d))))].Microseconds()) / 1000
	}
	b.ReportMetric(p(0.50), "p50-ms")
	b.ReportMetric(p(0.99), "p99-ms")
}

// ListedIDs pages GET /api/executions?q through to the end.
func ListedIDs(t testing.TB, c *Client, q url.Values) []string {
	t.Helper()
	var ids []string
	for pages := 0; ; pages++ {
		var page api.ExecutionList
		c.Want(t, http.StatusOK, http.MethodGet, "/api/executions?"+q.Encode(), nil).Decode(t, &page)
		for _, it := range page.Items {
			ids = append(ids, it.ExecutionID)
		}
		if page.NextCursor == "" || pages > 100 {
			slices.Sort(ids)
			return ids
		}
		q.Set("cursor", page.NextCursor)
	}
}

// LiveState is a state with the timeline entries 1…last.
func LiveState(tenant, id string, last int, status state.Status) *state.Execution {
	now := time.Now().UTC()
	st := &state.Execution{ExecutionID: id, TenantID: tenant, FlowID: "ask", FlowVersion: "1", Status: status, CurrentNode: "ask",
		StartTime: now, LastUpdate: now}
	for seq := 1; seq <= last; seq++ {
		ev := "step"
		if seq == last && status.Terminal() {
			ev = string(status)
		}
		st.Timeline = append(st.Timeline, state.TimelineEntry{Seq: seq, Time: state.Stamp(now), Node: "ask", Event: ev})
	}
	return st
}
