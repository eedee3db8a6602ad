package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"plaita/config"
	"plaita/engine/state"
	"plaita/internal/redistest"
	"plaita/queue"
	"plaita/roles/settings"
	"plaita/store"
	"plaita/store/keys"
)

// The worker past one machine: real `plaita` processes against a local 3-node Redis Cluster,
// given the URL of one node only. Three tenants and a few dozen executions put execution keys
// on every node, so a script or pipeline whose keys span slots fails here (CROSSSLOT) while
// the task stream, one key, lives on one node.

// clusterE2E is the scenario's cluster, configuration and per-tenant stores.
type clusterE2E struct {
	t      *testing.T
	c      rueidis.Client
	ctx    context.Context
	env    map[string]string
	cfg    *config.Config
	stores map[string]*store.TenantStore
}

// clusterTenants are the tenants of the scenario ("" is the default tenant).
var clusterTenants = []string{"", "acme", "globex"}

func newClusterE2E(t *testing.T, timeout time.Duration) *clusterE2E {
	t.Helper()
	c, servers := redistest.StartCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	env := map[string]string{"PLAITA_REDIS_URL": servers[1].URL(), "PLAITA_NODES_WORKSPACE_ROOT": t.TempDir(),
		"PLAITA_WORKER_CONCURRENCY": "2", "PLAITA_WORKER_DRAIN_TIMEOUT": "20"}
	cfg, err := config.Load(config.RoleWorker, true, config.WithEnv(env))
	if err != nil {
		t.Fatal(err)
	}
	e := &clusterE2E{t: t, c: c, ctx: ctx, env: env, cfg: cfg, stores: map[string]*store.TenantStore{}}
	r := store.NewRedis(c, settings.Store(cfg), "")
	for _, tenant := range clusterTenants {
		if e.stores[tenant], err = r.Tenant(tenant); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// cli runs the binary against the cluster and fails the test unless it exits with want.
func (e *clusterE2E) cli(want int, args ...string) result {
	e.t.Helper()
	r := run(e.t, e.env, append(args, "--quiet")...)
	if r.code != want {
		e.t.Fatalf("plaita %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.code, want, r.stdout, r.stderr)
	}
	return r
}

// start runs `plaita start` (a file publishes first) with --json and returns the execution id.
func (e *clusterE2E) start(tenant, flow, input string) string {
	e.t.Helper()
	args := []string{"start", flow, "--json"}
	if tenant != "" {
		args = append(args, "--tenant", tenant)
	}
	if input != "" {
		args = append(args, "--input", input)
	}
	var out startJSON
	r := e.cli(0, args...)
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || out.ExecutionID == "" {
		e.t.Fatalf("start --json: %v\n%s", err, r.stdout)
	}
	return out.ExecutionID
}

// resume runs `plaita execution resume` for an execution of tenant.
func (e *clusterE2E) resume(tenant, id, typ, data string) {
	e.t.Helper()
	args := []string{"execution", "resume", id, "--type", typ}
	if tenant != "" {
		args = append(args, "--tenant", tenant)
	}
	if data != "" {
		args = append(args, "--data", data)
	}
	e.cli(0, args...)
}

// show reads an execution through `plaita execution show --json`.
func (e *clusterE2E) show(tenant, id string) state.Execution {
	e.t.Helper()
	args := []string{"execution", "show", id, "--json"}
	if tenant != "" {
		args = append(args, "--tenant", tenant)
	}
	var st state.Execution
	if r := e.cli(0, args...); json.Unmarshal([]byte(r.stdout), &st) != nil {
		e.t.Fatalf("show --json does not parse:\n%s", r.stdout)
	}
	return st
}

// waitStatus polls the store until the execution has the status.
func (e *clusterE2E) waitStatus(tenant, id string, want state.Status, ws ...*e2eWorker) *state.Execution {
	e.t.Helper()
	var st *state.Execution
	var err error
	for deadline := time.Now().Add(45 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		st, err = e.stores[tenant].Load(e.ctx, id)
		if err == nil && st.Status == want {
			return st
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("execution %s (tenant %q) is %v (%v), want %s\n%s", id, tenant, st, err, want, logs(ws))
		}
	}
}

func (e *clusterE2E) streamLen(key string) int64 {
	e.t.Helper()
	n, err := e.c.Do(e.ctx, e.c.B().Xlen().Key(key).Build()).AsInt64()
	if err != nil {
		e.t.Fatalf("xlen %s: %v", key, err)
	}
	return n
}

func (e *clusterE2E) pending() int64 {
	e.t.Helper()
	arr, err := e.c.Do(e.ctx, e.c.B().Xpending().Key(config.QueueName.In(e.cfg)).Group(config.ConsumerGroup.In(e.cfg)).Build()).ToArray()
	if err != nil || len(arr) == 0 {
		e.t.Fatalf("xpending: %v", err)
	}
	n, _ := arr[0].AsInt64()
	return n
}

func (e *clusterE2E) dlq() []rueidis.XRangeEntry {
	e.t.Helper()
	rs, err := e.c.Do(e.ctx, e.c.B().Xrange().Key(config.DLQKey.In(e.cfg)).Start("-").End("+").Build()).AsXRange()
	if err != nil && !rueidis.IsRedisNil(err) {
		e.t.Fatalf("xrange dlq: %v", err)
	}
	return rs
}

// statesPerNode counts, on each primary, the execution states of the scenario's tenants.
func (e *clusterE2E) statesPerNode() map[string]int {
	e.t.Helper()
	out := map[string]int{}
	for addr, node := range e.c.Nodes() {
		out[addr] = 0
		for cursor := uint64(0); ; {
			se, err := node.Do(e.ctx, node.B().Scan().Cursor(cursor).Match(keys.DefaultRoot+":*").Count(1000).Build()).AsScanEntry()
			if err != nil {
				e.t.Fatalf("scan %s: %v", addr, err)
			}
			for _, k := range se.Elements {
				for _, ts := range e.stores {
					if ts.Space().ExecutionID(k) != "" {
						out[addr]++
					}
				}
			}
			if cursor = se.Cursor; cursor == 0 {
				break
			}
		}
	}
	return out
}

// flakyServer fails the first request of every path with 500 and sleeps per path.
type flakyServer struct {
	*httptest.Server
	mu     sync.Mutex
	counts map[string]int
	seen   chan string
}

func newFlakyServer(t *testing.T, failFirst string, delays map[string]time.Duration) *flakyServer {
	s := &flakyServer{counts: map[string]int{}, seen: make(chan string, 100)}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.counts[r.URL.Path]++
		n := s.counts[r.URL.Path]
		s.mu.Unlock()
		select {
		case s.seen <- r.URL.Path:
		default:
		}
		select {
		case <-time.After(delays[r.URL.Path]):
		case <-r.Context().Done():
			return
		}
		if r.URL.Path == failFirst && n == 1 {
			http.Error(w, "try again", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"ok":true}`)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *flakyServer) count(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts[path]
}

func TestE2EClusterTwoWorkers(t *testing.T) {
	e := newClusterE2E(t, 180*time.Second)
	hs := newFlakyServer(t, "/flaky", map[string]time.Duration{"/slow": 3 * time.Second})

	// Two workers, each told one node of the cluster.
	workers := map[string]*e2eWorker{}
	for _, name := range []string{"cl-a", "cl-b"} {
		env := map[string]string{}
		for k, v := range e.env {
			env[k] = v
		}
		env["PLAITA_INSTANCE_ID"] = name
		workers[name] = spawnWorker(t, env)
	}
	all := []*e2eWorker{workers["cl-a"], workers["cl-b"]}
	sp := keys.MustFor("", "")
	waitFor(t, "both workers registered", 30*time.Second, func() bool {
		n, _ := e.c.Do(e.ctx, e.c.B().Scard().Key(sp.RegistryInstances()).Build()).AsInt64()
		return n == 2
	}, all...)

	// Published with the CLI (a file publishes, then starts); started by id in three tenants.
	hello := writeCLIFlow(t, "hello.json", `{"id":"hello","version":"1","start":"greet","nodes":[
		{"id":"greet","type":"set","params":{"vars":{"msg":"hello {{ INPUT.name }}"}},"next":"done"},
		{"id":"done","type":"end","params":{"output":"{{ VARS.msg }}"}}]}`)
	type started struct{ tenant, id, name string }
	var runs []started
	for _, tenant := range clusterTenants {
		name := "first-" + cmpTenant(tenant)
		runs = append(runs, started{tenant, e.start(tenant, hello, `{"name":"`+name+`"}`), name})
		for i := range 8 {
			name := fmt.Sprintf("%s-%d", cmpTenant(tenant), i)
			runs = append(runs, started{tenant, e.start(tenant, "hello", `{"name":"`+name+`"}`), name})
		}
	}
	for _, r := range runs {
		if st := e.waitStatus(r.tenant, r.id, state.Completed, all...); st.Output != "hello "+r.name {
			t.Fatalf("%s (tenant %q): output %v, want %q", r.id, r.tenant, st.Output, "hello "+r.name)
		}
	}
	if st := e.show("acme", runs[9].id); st.Status != state.Completed || st.Output != "hello "+runs[9].name {
		t.Fatalf("execution show --tenant acme: %s %v", st.Status, st.Output)
	}
	r := e.cli(0, "execution", "list", "--tenant", "globex")
	if !strings.Contains(r.stdout, "9 execution(s)") {
		t.Fatalf("execution list --tenant globex:\n%s", r.stdout)
	}
	// The states are spread over every node: the scripts ran on all three.
	perNode := e.statesPerNode()
	for addr, n := range perNode {
		if n == 0 {
			t.Fatalf("no execution state on %s (%v): the keys do not span the cluster", addr, perNode)
		}
	}
	t.Logf("execution states per node: %v", perNode)

	// Suspensions resumed with the CLI: an event wait (acme), an approval (globex), a delay
	// (default tenant), and a retry of a failed step (acme).
	order := writeCLIFlow(t, "order.json", orderFlow)
	ship := writeCLIFlow(t, "ship.json", `{"id":"ship","version":"1","start":"ask","nodes":[
		{"id":"ask","type":"approval","params":{"message":"Ship {{ INPUT.what }}?","timeout":3600},"next":"done"},
		{"id":"done","type":"end","params":{"output":{"approved":"{{ NODE.ask.approved }}"}}}]}`)
	nap := writeCLIFlow(t, "nap.json", `{"id":"nap","version":"1","start":"wait","nodes":[
		{"id":"wait","type":"delay","params":{"seconds":3600},"next":"done"},
		{"id":"done","type":"end","params":{"output":"woke"}}]}`)
	flaky := writeCLIFlow(t, "flaky.json", `{"id":"flaky","version":"1","start":"call","nodes":[
		{"id":"call","type":"http","params":{"url":"`+hs.URL+`/flaky","timeout":10},"next":"done"},
		{"id":"done","type":"end","params":{"output":"recovered"}}]}`)
	orderID := e.start("acme", order, `{"order_id":7}`)
	shipID := e.start("globex", ship, `{"what":"v2"}`)
	napID := e.start("", nap, "")
	flakyID := e.start("acme", flaky, "")
	e.waitStatus("acme", orderID, state.Suspended, all...)
	e.waitStatus("globex", shipID, state.Suspended, all...)
	e.waitStatus("", napID, state.Suspended, all...)
	e.waitStatus("acme", flakyID, state.Error, all...)

	e.resume("acme", orderID, "event", `{"type":"order.paid","order_id":7}`)
	e.resume("globex", shipID, "approval", `{"approved":true}`)
	e.resume("", napID, "continue", "")
	e.resume("acme", flakyID, "retry", "")
	e.waitStatus("acme", orderID, state.Completed, all...)
	if st := e.waitStatus("globex", shipID, state.Completed, all...); !strings.Contains(fmt.Sprint(st.Output), "true") {
		t.Errorf("approval output %v", st.Output)
	}
	if st := e.waitStatus("", napID, state.Completed, all...); st.Output != "woke" {
		t.Errorf("delay output %v", st.Output)
	}
	if st := e.waitStatus("acme", flakyID, state.Completed, all...); st.Output != "recovered" {
		t.Errorf("retry output %v", st.Output)
	}
	if n := hs.count("/flaky"); n != 2 {
		t.Errorf("the flaky step ran %d times, want 2 (the failure, then the retry)", n)
	}

	// A poisoned entry is dead-lettered, once.
	queueName := config.QueueName.In(e.cfg)
	poison, err := e.c.Do(e.ctx, e.c.B().Xadd().Key(queueName).Id("*").FieldValue().FieldValue(queue.PayloadField, "not json").Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the poisoned entry in the DLQ", 30*time.Second, func() bool { return len(e.dlq()) >= 1 && e.pending() == 0 }, all...)

	// SIGTERM to the worker running a slow step: it finishes the step, acks and deregisters;
	// the other worker stays.
	slow := writeCLIFlow(t, "slow.json", `{"id":"slow","version":"1","start":"call","nodes":[
		{"id":"call","type":"http","params":{"url":"`+hs.URL+`/slow","timeout":20},"next":"done"},
		{"id":"done","type":"end","params":{"output":"slept"}}]}`)
	slowID := e.start("globex", slow, "")
	deadline := time.After(30 * time.Second)
	for seen := false; !seen; {
		select {
		case p := <-hs.seen:
			seen = p == "/slow"
		case <-deadline:
			t.Fatalf("the slow step never started\n%s", logs(all))
		}
	}
	leaseKey, err := keys.MustFor("", "globex").Mechanism(keys.FamLease, slowID)
	if err != nil {
		t.Fatal(err)
	}
	lease, err := e.c.Do(e.ctx, e.c.B().Get().Key(leaseKey).Build()).ToString()
	if err != nil {
		t.Fatalf("lease of the running execution: %v", err)
	}
	holder, _, _ := strings.Cut(lease, "|")
	drained, other := workers[holder], workers["cl-a"]
	if holder == "cl-a" {
		other = workers["cl-b"]
	}
	if drained == nil {
		t.Fatalf("lease %q names no worker of the test", lease)
	}
	if err := drained.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if !drained.wait(30 * time.Second) {
		t.Fatalf("%s did not drain and exit\n%s", holder, drained.stderr.String())
	}
	if drained.err != nil {
		t.Fatalf("%s exited with %v\n%s", holder, drained.err, drained.stderr.String())
	}
	if st := e.show("globex", slowID); st.Status != state.Completed || st.Output != "slept" {
		t.Fatalf("after the drain the slow execution is %s (%v)\n%s", st.Status, st.Output, drained.stderr.String())
	}
	if n := hs.count("/slow"); n != 1 {
		t.Errorf("the slow step ran %d times, want 1", n)
	}
	for _, ev := range []string{`"event":"worker.draining"`, `"event":"worker.stopped"`} {
		if !strings.Contains(drained.stderr.String(), ev) {
			t.Errorf("no %s in the drained worker's log", ev)
		}
	}
	members, err := e.c.Do(e.ctx, e.c.B().Smembers().Key(sp.RegistryInstances()).Build()).AsStrSlice()
	if err != nil {
		t.Fatal(err)
	}
	otherName := "cl-a"
	if holder == "cl-a" {
		otherName = "cl-b"
	}
	if len(members) != 1 || members[0] != otherName {
		t.Errorf("registry members %v after draining %s, want [%s]", members, holder, otherName)
	}
	if n, _ := e.c.Do(e.ctx, e.c.B().Exists().Key(sp.RegistryInstance(holder)).Build()).AsInt64(); n != 0 {
		t.Errorf("the registry key of %s is still there", holder)
	}

	// Nothing left: the stream is empty, nothing pending, the DLQ holds the poisoned entry once.
	waitFor(t, "queue drained", 15*time.Second, func() bool { return e.streamLen(queueName) == 0 && e.pending() == 0 }, all...)
	letters := e.dlq()
	if len(letters) != 1 || letters[0].FieldValues["source_id"] != poison {
		t.Errorf("DLQ %v, want the poisoned entry %s once", letters, poison)
	}
	if err := other.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if !other.wait(30*time.Second) || other.err != nil {
		t.Fatalf("%s did not drain cleanly: %v\n%s", otherName, other.err, other.stderr.String())
	}
	for _, w := range all {
		if l := w.stderr.String(); strings.Contains(l, "CROSSSLOT") || strings.Contains(l, "panic") {
			t.Errorf("a worker log shows a cross-slot error or a panic:\n%s", tail(l, 50))
		}
	}
}

// cmpTenant names the default tenant in test data.
func cmpTenant(tenant string) string {
	if tenant == "" {
		return keys.DefaultTenant
	}
	return tenant
}
