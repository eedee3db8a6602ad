package roles

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"plaita/config"
	"plaita/store/keys"
	"plaita/store/sqlite"
	"plaita/test/redistest"
)

// lockedBuffer is a log the test reads while the console writes it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startConsole runs runConsole on env until the returned stop is called; it waits for
// /readyz. The console's database is in the test's directory.
func startConsole(t *testing.T, env map[string]string) (base string, logs *lockedBuffer, stop func() error) {
	t.Helper()
	port := redistest.FreePort(t)
	env["PLAITA_CONSOLE_PORT"] = strconv.Itoa(port)
	if env["PLAITA_CONSOLE_DB_URL"] == "" {
		env["PLAITA_CONSOLE_DB_URL"] = "sqlite:///" + filepath.Join(t.TempDir(), "console.db")
	}
	cfg, err := config.Load(config.RoleConsole, true, config.WithEnv(env))
	if err != nil {
		t.Fatal(err)
	}
	logs = &lockedBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runConsole(ctx, cfg, zerolog.New(logs)) }()
	base = "http://127.0.0.1:" + strconv.Itoa(port)
	deadline := time.Now().Add(20 * time.Second)
	for {
		res, err := http.Get(base + "/readyz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case err := <-done:
			cancel()
			t.Fatalf("the console exited: %v\n%s", err, logs)
		default:
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("the console is not ready\n%s", logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	var once sync.Once
	var stopErr error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case stopErr = <-done:
			case <-time.After(30 * time.Second):
				stopErr = errors.New("the console did not stop")
			}
		})
		return stopErr
	}
	t.Cleanup(func() { _ = stop() })
	return base, logs, stop
}

func getJSON(t *testing.T, url string, header map[string]string, v any) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	for k, val := range header {
		req.Header.Set(k, val)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("%s: %v: %s", url, err, b)
		}
	}
	return res.StatusCode
}

// TestConsoleRole: plaita console on a private Redis — migrated database, the bootstrap admin,
// tenant statuses published from the database (a tenant Redis knows and the database does not
// becomes a disabled tombstone), registered as role console, and a drain that stops cleanly.
func TestConsoleRole(t *testing.T) {
	srv := redistest.StartServer(t)
	c := srv.Client(t)
	ctx := context.Background()
	sp := keys.MustFor("", "")
	if err := c.Do(ctx, c.B().Hset().Key(sp.TenantStatus()).FieldValue().FieldValue("ghost", "active").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "console.db")
	base, logs, stop := startConsole(t, map[string]string{"PLAITA_CONSOLE_REDIS_URL": srv.URL(), "PLAITA_CONSOLE_DB_URL": "sqlite:///" + db,
		"PLAITA_CONSOLE_ADMIN_PASSWORD": "bootstrap-password", "PLAITA_DEPLOYMENT_EPOCH": "42", "PLAITA_CONSOLE_ADMIN_API_KEY": "k"})

	statuses, err := c.Do(ctx, c.B().Hgetall().Key(sp.TenantStatus()).Build()).AsStrMap()
	if err != nil || statuses["default"] != "active" || statuses["ghost"] != "disabled" {
		t.Fatalf("published statuses: %v %v", statuses, err)
	}
	if epoch, _ := c.Do(ctx, c.B().Get().Key(sp.TenantStatusEpoch()).Build()).ToString(); epoch != "42" {
		t.Fatalf("epoch %q", epoch)
	}
	members, err := c.Do(ctx, c.B().Smembers().Key(sp.RegistryInstances()).Build()).AsStrSlice()
	if err != nil || len(members) != 1 || !strings.HasPrefix(members[0], "console-") {
		t.Fatalf("registry: %v %v", members, err)
	}
	var h struct {
		Status, Mode string
	}
	if code := getJSON(t, base+"/health", nil, &h); code != 200 || h.Status != "ok" || h.Mode != "redis" {
		t.Fatalf("health %d %+v", code, h)
	}
	// The bootstrap admin logs in.
	res, err := http.Post(base+"/api/login", "application/json", strings.NewReader(`{"login":"admin","password":"bootstrap-password"}`))
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("bootstrap login: %v %v", res, err)
	}
	res.Body.Close()
	if !strings.Contains(logs.String(), `"event":"console.bootstrap_admin"`) || !strings.Contains(logs.String(), `"event":"console.started"`) {
		t.Errorf("start-up events missing:\n%s", logs)
	}
	if err := stop(); err != nil {
		t.Fatalf("stop: %v\n%s", err, logs)
	}
	for _, ev := range []string{"console.draining", "console.stopped"} {
		if !strings.Contains(logs.String(), `"event":"`+ev+`"`) {
			t.Errorf("no %s event:\n%s", ev, logs)
		}
	}
	if n, _ := c.Do(ctx, c.B().Scard().Key(sp.RegistryInstances()).Build()).AsInt64(); n != 0 {
		t.Errorf("still registered after the drain: %d", n)
	}
	// The database was migrated and keeps the admin.
	d, err := sqlite.Open(ctx, "sqlite:///"+db, sqlite.MustExist())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if u, err := d.UserByLogin(ctx, BootstrapAdminLogin); err != nil || !u.PlatformAdmin {
		t.Fatalf("bootstrap admin: %+v %v", u, err)
	}
}

// TestConsoleWithoutRedis: Redis unreachable, the console starts in local mode, says so loudly
// and on /health, and serves what the roles serve — from its database, the roles in its process.
func TestConsoleWithoutRedis(t *testing.T) {
	dead := "redis://127.0.0.1:" + strconv.Itoa(redistest.FreePort(t)) + "/0"
	base, logs, stop := startConsole(t, map[string]string{"PLAITA_CONSOLE_REDIS_URL": dead, "PLAITA_CONSOLE_ADMIN_API_KEY": "k"})
	if !strings.Contains(logs.String(), `"event":"console.local_mode"`) || !strings.Contains(logs.String(), `"level":"warn"`) ||
		!strings.Contains(logs.String(), "LOCAL MODE") {
		t.Errorf("no loud line:\n%s", logs)
	}
	var h struct {
		Status, Mode, Warning string
	}
	if code := getJSON(t, base+"/health", nil, &h); code != 200 || h.Mode != "local" || h.Status != "degraded" || !strings.Contains(h.Warning, "LOCAL MODE") {
		t.Fatalf("health %d %+v", code, h)
	}
	if code := getJSON(t, base+"/api/flows", map[string]string{"X-Admin-API-Key": "k"}, nil); code != 200 {
		t.Fatalf("flows in local mode: %d", code)
	}
	var cluster struct {
		Instances []struct{ Role, Status string }
	}
	if code := getJSON(t, base+"/api/cluster/instances", map[string]string{"X-Admin-API-Key": "k"}, &cluster); code != 200 {
		t.Fatalf("cluster: %d", code)
	}
	roles := map[string]bool{}
	for _, in := range cluster.Instances {
		roles[in.Role] = true
	}
	for _, r := range []string{"console", "worker", "filter", "delay", "schedule"} {
		if !roles[r] {
			t.Errorf("the cluster page lacks the %s role: %+v", r, cluster)
		}
	}
	if code := getJSON(t, base+"/api/dead-letters", map[string]string{"X-Admin-API-Key": "k"}, nil); code != 200 {
		t.Fatalf("dead letters: %d", code)
	}
	if code := getJSON(t, base+"/api/tenants", map[string]string{"X-Admin-API-Key": "k"}, nil); code != 200 {
		t.Fatalf("tenants from the database: %d", code)
	}
	if err := stop(); err != nil {
		t.Fatalf("stop: %v\n%s", err, logs)
	}
}

// TestConsoleReconcilesTenantStatuses: every PLAITA_TENANT_STATUS_RECONCILE_SECONDS the console
// republishes the tenants' statuses from the database (a tenant a restore brought back into
// Redis becomes a disabled tombstone without a restart), and /health shows the last run; its
// configuration is on /api/cluster/config, secrets masked, with the generations.
func TestConsoleReconcilesTenantStatuses(t *testing.T) {
	srv := redistest.StartServer(t)
	c := srv.Client(t)
	ctx := context.Background()
	sp := keys.MustFor("", "")
	base, logs, _ := startConsole(t, map[string]string{"PLAITA_CONSOLE_REDIS_URL": srv.URL(), "PLAITA_CONSOLE_ADMIN_API_KEY": "secret-admin-key",
		"PLAITA_TENANT_STATUS_RECONCILE_SECONDS": "1", "PLAITA_DEPLOYMENT_EPOCH": "7"})
	if err := c.Do(ctx, c.B().Hset().Key(sp.TenantStatus()).FieldValue().FieldValue("restored", "active").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	var h struct {
		TenantStatus struct {
			IntervalSeconds int `json:"interval_seconds"`
			Last            struct {
				Trigger    string
				OK         bool
				Tombstoned []string
			}
		} `json:"tenant_status_reconcile"`
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := c.Do(ctx, c.B().Hget().Key(sp.TenantStatus()).Field("restored").Build()).ToString()
		if err == nil && st == "disabled" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the restored tenant is still %q (%v)\n%s", st, err, logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code := getJSON(t, base+"/health", nil, &h); code != 200 || h.TenantStatus.IntervalSeconds != 1 || h.TenantStatus.Last.Trigger != "periodic" ||
		!h.TenantStatus.Last.OK {
		t.Fatalf("health %d %+v", code, h)
	}
	var cfg struct {
		Role        string
		Generations map[string]string
		Variables   []struct {
			Name   string
			Value  any
			Secret bool
		}
	}
	if code := getJSON(t, base+"/api/cluster/config", map[string]string{"X-Admin-API-Key": "secret-admin-key"}, &cfg); code != 200 || cfg.Role != "console" ||
		!strings.HasPrefix(cfg.Generations["config_generation"], "cfg1-") {
		t.Fatalf("config %d %+v", code, cfg)
	}
	found := false
	for _, v := range cfg.Variables {
		if v.Name == "PLAITA_CONSOLE_ADMIN_API_KEY" {
			found = true
			if !v.Secret || strings.Contains(fmt.Sprint(v.Value), "secret-admin-key") {
				t.Fatalf("the admin key is shown: %+v", v)
			}
		}
	}
	if !found {
		t.Fatalf("no PLAITA_CONSOLE_ADMIN_API_KEY in %+v", cfg.Variables)
	}
}

// TestConsoleTenantStatusReconcileOff: PLAITA_TENANT_STATUS_RECONCILE_SECONDS=0 runs the
// reconcile at start only, with a warning in the log and on /health.
func TestConsoleTenantStatusReconcileOff(t *testing.T) {
	srv := redistest.StartServer(t)
	base, logs, _ := startConsole(t, map[string]string{"PLAITA_CONSOLE_REDIS_URL": srv.URL(), "PLAITA_CONSOLE_ADMIN_API_KEY": "k",
		"PLAITA_TENANT_STATUS_RECONCILE_SECONDS": "0"})
	if !strings.Contains(logs.String(), `"event":"console.tenant_status_reconcile_off"`) || !strings.Contains(logs.String(), `"level":"warn"`) {
		t.Errorf("no warning:\n%s", logs)
	}
	var h struct {
		TenantStatus struct {
			IntervalSeconds int `json:"interval_seconds"`
			Warning         string
			Last            struct{ Trigger string }
		} `json:"tenant_status_reconcile"`
	}
	if code := getJSON(t, base+"/health", nil, &h); code != 200 || h.TenantStatus.IntervalSeconds != 0 || h.TenantStatus.Last.Trigger != "start" ||
		!strings.Contains(h.TenantStatus.Warning, "off") {
		t.Fatalf("health %d %+v", code, h)
	}
}

// TestConsoleEngineSync: a console starting on a Redis that lacks a flow version its database
// recorded publishing (a new Redis, or one restored from an older snapshot) writes it back
// before it serves, logs what it did and shows it on /health as engine_sync.
func TestConsoleEngineSync(t *testing.T) {
	srv := redistest.StartServer(t)
	c := srv.Client(t)
	ctx := context.Background()
	dbURL := "sqlite:///" + filepath.Join(t.TempDir(), "console.db")
	d, err := sqlite.Open(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	def := `{"id":"order","version":"7","start":"a","nodes":[{"id":"a","type":"end"}]}`
	if _, _, err := d.RecordVersion(ctx, sqlite.FlowVersion{Tenant: "default", FlowID: "order", Version: "7", Definition: json.RawMessage(def),
		Hash: "h", HashAlgo: "a", PublishedBy: "ann"}); err != nil {
		t.Fatal(err)
	}
	d.Close()
	base, logs, _ := startConsole(t, map[string]string{"PLAITA_CONSOLE_REDIS_URL": srv.URL(), "PLAITA_CONSOLE_DB_URL": dbURL,
		"PLAITA_CONSOLE_ENGINE_SYNC_DEADLINE": "3", "PLAITA_CONSOLE_ADMIN_API_KEY": "k"})
	sp := keys.MustFor("", "")
	if got, err := c.Do(ctx, c.B().Get().Key(sp.Flow("order", "7")).Build()).ToString(); err != nil || got != def {
		t.Fatalf("order@7 in Redis: %q %v\n%s", got, err, logs)
	}
	var h struct {
		Status     string
		EngineSync struct {
			Status           string
			Versions         int
			Written, Skipped int
			Truncated        bool
		} `json:"engine_sync"`
	}
	if code := getJSON(t, base+"/health", nil, &h); code != 200 || h.Status != "ok" || h.EngineSync.Status != "ready" ||
		h.EngineSync.Versions != 1 || h.EngineSync.Written != 1 || h.EngineSync.Truncated {
		t.Fatalf("health %d %+v", code, h)
	}
	if !strings.Contains(logs.String(), `"event":"console.engine_sync"`) || !strings.Contains(logs.String(), `"written_sample":["default/order@7"]`) {
		t.Fatalf("no engine sync line:\n%s", logs)
	}
}
