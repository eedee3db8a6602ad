//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"plaita/config"
	"plaita/engine/state"
	"plaita/queue"
	"plaita/roles/settings"
	"plaita/store"
	"plaita/store/keys"
)

// The worker past one machine: real `plaita` processes against a local 3-node Redis Cluster,
// given the URL of one node only. Three tenants and a few dozen executions put execution keys
// on every node, so a script or pipeline whose keys span slots fails here (CROSSSLOT) while
// the task stream, one key, lives on one node.

// clusterE2E is the scenario's stack on the cluster, and its per-tenant stores.
type clusterE2E struct {
	*stack
	stores map[string]*store.TenantStore
}

// clusterTenants are the tenants of the scenario ("" is the default tenant).
var clusterTenants = []string{"", "acme", "globex"}

func newClusterE2E(t *testing.T, timeout time.Duration) *clusterE2E {
	t.Helper()
	s := newStack(t, withCluster(3), withTimeout(timeout), withEnv(map[string]string{
		"PLAITA_WORKER_CONCURRENCY": "2", "PLAITA_WORKER_DRAIN_TIMEOUT": "20"}))
	e := &clusterE2E{stack: s, stores: map[string]*store.TenantStore{}}
	r := store.NewRedis(s.c, settings.Store(s.cfg), "")
	for _, tenant := range clusterTenants {
		var err error
		if e.stores[tenant], err = r.Tenant(tenant); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// waitStored polls the store until the execution has the status.
func (e *clusterE2E) waitStored(tenant, id string, want state.Status, ws ...*proc) *state.Execution {
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
	e.cli(args...)
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

func TestE2EClusterTwoWorkers(t *testing.T) {
	t.Parallel()
	e := newClusterE2E(t, 180*time.Second)
	hs := newFlakyServer(t, "/flaky", map[string]time.Duration{"/slow": 3 * time.Second})

	// Two workers, each told one node of the cluster.
	workers := map[string]*proc{}
	for _, name := range []string{"cl-a", "cl-b"} {
		workers[name] = e.spawn("worker", map[string]string{"PLAITA_INSTANCE_ID": name})
	}
	all := []*proc{workers["cl-a"], workers["cl-b"]}
	sp := keys.MustFor("", "")
	waitFor(t, "both workers registered", 30*time.Second, func() bool {
		n, _ := e.c.Do(e.ctx, e.c.B().Scard().Key(sp.RegistryInstances()).Build()).AsInt64()
		return n == 2
	}, all...)

	// Published with the CLI (a file publishes, then starts); started by id in three tenants.
	hello := writeFile(t, "hello.json", `{"id":"hello","version":"1","start":"greet","nodes":[
		{"id":"greet","type":"set","params":{"vars":{"msg":"hello {{ INPUT.name }}"}},"next":"done"},
		{"id":"done","type":"end","params":{"output":"{{ VARS.msg }}"}}]}`)
	type started struct{ tenant, id, name string }
	var runs []started
	for _, tenant := range clusterTenants {
		name := "first-" + cmpTenant(tenant)
		runs = append(runs, started{tenant, e.startFlow(hello, tenant, `{"name":"`+name+`"}`), name})
		for i := range 8 {
			name := fmt.Sprintf("%s-%d", cmpTenant(tenant), i)
			runs = append(runs, started{tenant, e.startFlow("hello", tenant, `{"name":"`+name+`"}`), name})
		}
	}
	for _, r := range runs {
		if st := e.waitStored(r.tenant, r.id, state.Completed, all...); st.Output != "hello "+r.name {
			t.Fatalf("%s (tenant %q): output %v, want %q", r.id, r.tenant, st.Output, "hello "+r.name)
		}
	}
	if st := e.show(runs[9].id, "acme"); st.Status != state.Completed || st.Output != "hello "+runs[9].name {
		t.Fatalf("execution show --tenant acme: %s %v", st.Status, st.Output)
	}
	list := e.cli("execution", "list", "--tenant", "globex")
	if !strings.Contains(list, "9 execution(s)") {
		t.Fatalf("execution list --tenant globex:\n%s", list)
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
	order := writeFile(t, "order.json", orderFlow)
	ship := writeFile(t, "ship.json", `{"id":"ship","version":"1","start":"ask","nodes":[
		{"id":"ask","type":"approval","params":{"message":"Ship {{ INPUT.what }}?","timeout":3600},"next":"done"},
		{"id":"done","type":"end","params":{"output":{"approved":"{{ NODE.ask.approved }}"}}}]}`)
	nap := writeFile(t, "nap.json", `{"id":"nap","version":"1","start":"wait","nodes":[
		{"id":"wait","type":"delay","params":{"seconds":3600},"next":"done"},
		{"id":"done","type":"end","params":{"output":"woke"}}]}`)
	flaky := writeFile(t, "flaky.json", `{"id":"flaky","version":"1","start":"call","nodes":[
		{"id":"call","type":"http","params":{"url":"`+hs.URL+`/flaky","timeout":10},"next":"done"},
		{"id":"done","type":"end","params":{"output":"recovered"}}]}`)
	orderID := e.startFlow(order, "acme", `{"order_id":7}`)
	shipID := e.startFlow(ship, "globex", `{"what":"v2"}`)
	napID := e.startFlow(nap, "", "")
	flakyID := e.startFlow(flaky, "acme", "")
	e.waitStored("acme", orderID, state.Suspended, all...)
	e.waitStored("globex", shipID, state.Suspended, all...)
	e.waitStored("", napID, state.Suspended, all...)
	e.waitStored("acme", flakyID, state.Error, all...)

	e.resume("acme", orderID, "event", `{"type":"order.paid","order_id":7}`)
	e.resume("globex", shipID, "approval", `{"approved":true}`)
	e.resume("", napID, "continue", "")
	e.resume("acme", flakyID, "retry", "")
	e.waitStored("acme", orderID, state.Completed, all...)
	if st := e.waitStored("globex", shipID, state.Completed, all...); !strings.Contains(fmt.Sprint(st.Output), "true") {
		t.Errorf("approval output %v", st.Output)
	}
	if st := e.waitStored("", napID, state.Completed, all...); st.Output != "woke" {
		t.Errorf("delay output %v", st.Output)
	}
	if st := e.waitStored("acme", flakyID, state.Completed, all...); st.Output != "recovered" {
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
	waitFor(t, "the poisoned entry in the DLQ", 30*time.Second, func() bool { return len(e.dlqEntries()) >= 1 && e.pending() == 0 }, all...)

	// SIGTERM to the worker running a slow step: it finishes the step, acks and deregisters;
	// the other worker stays.
	slow := writeFile(t, "slow.json", `{"id":"slow","version":"1","start":"call","nodes":[
		{"id":"call","type":"http","params":{"url":"`+hs.URL+`/slow","timeout":20},"next":"done"},
		{"id":"done","type":"end","params":{"output":"slept"}}]}`)
	slowID := e.startFlow(slow, "globex", "")
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
	if st := e.show(slowID, "globex"); st.Status != state.Completed || st.Output != "slept" {
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
	waitFor(t, "queue drained", 15*time.Second, func() bool { return e.streamLen() == 0 && e.pending() == 0 }, all...)
	letters := e.dlqEntries()
	if len(letters) != 1 || letters[0]["source_id"] != poison {
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
