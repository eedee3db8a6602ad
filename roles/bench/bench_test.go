package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"plaita/test/redistest"
)

// runBench runs one scenario in this process.
func runBench(t *testing.T, o Options) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	res, err := Run(ctx, o)
	if err != nil {
		t.Fatalf("bench %+v: %v", o, err)
	}
	// What --json prints is what a reader decodes.
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var back Result
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("--json output: %v\n%s", err, b)
	}
	return back
}

// text is the table `plaita bench` prints.
func text(r Result) string {
	var b bytes.Buffer
	WriteText(&b, r)
	return b.String()
}

// TestBenchE2EOnACluster: against one node of a 3-node Redis Cluster the bench runs, and its
// Redis calls are those of every primary.
func TestBenchE2EOnACluster(t *testing.T) {
	t.Parallel()
	_, servers := redistest.StartCluster(t, 3)
	res := runBench(t, Options{Scenario: "e2e", Redis: servers[2].URL(), N: 300, Concurrency: 4})
	if res.N != 300 || res.PerSecond <= 0 || res.CallsPerExecution <= 0 || res.P50Millis <= 0 {
		t.Fatalf("figures: %+v", res)
	}
	if !res.RedisCluster || res.RedisPrimaries != 3 || len(res.CallsPerNode) != 3 {
		t.Fatalf("target: cluster %v, %d primaries, calls per node %v", res.RedisCluster, res.RedisPrimaries, res.CallsPerNode)
	}
	var sum int64
	for _, s := range servers {
		n, ok := res.CallsPerNode[s.Addr()]
		if !ok || n <= 0 {
			t.Errorf("primary %s: %d calls (%v)", s.Addr(), n, res.CallsPerNode)
		}
		sum += n
	}
	if sum != res.RedisCalls {
		t.Errorf("calls per node add up to %d, redis_calls is %d", sum, res.RedisCalls)
	}
	// An execution costs a handful of commands wherever its keys are; a reading that missed a
	// node or counted one twice would be far off.
	if res.CallsPerExecution < 4 || res.CallsPerExecution > 40 {
		t.Errorf("%.2f calls per execution", res.CallsPerExecution)
	}

	// The first run left its executions: a second one on the same database needs --force.
	if _, err := Run(t.Context(), Options{Scenario: "e2e", Redis: servers[0].URL(), N: 50, Concurrency: 2}); !errors.Is(err, ErrUsage) ||
		!strings.Contains(err.Error(), "--force") {
		t.Fatalf("a bench on a database that holds keys: %v, want a refusal naming --force", err)
	}
	table := text(runBench(t, Options{Scenario: "e2e", Redis: servers[0].URL(), N: 50, Concurrency: 2, Force: true}))
	for _, want := range []string{"executions/s", "Redis Cluster, 3 primaries", "redis calls per node", servers[1].Addr()} {
		if !strings.Contains(table, want) {
			t.Errorf("the table lacks %q:\n%s", want, table)
		}
	}
}

func TestClusterPrimaries(t *testing.T) {
	// CLUSTER NODES of a cluster with a replica, a primary that serves no slot, a node without
	// address, a node that does not know its own address yet and a hostname.
	const nodes = `07c37dfeb235213a872192d90877d0cd55635b91 127.0.0.1:30004@31004,r4.example slave e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 0 1426238317239 4 connected
67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1 127.0.0.1:30002@31002 master - 0 1426238316232 2 connected 5461-10922
292f8b365bb7edb5e285caf0b7e6ddc7265d2f4f 127.0.0.1:30003@31003,r3.example master - 0 1426238318243 3 connected 10923-16383
6ec23923021cf3ffec47632106199cb7f496ce01 127.0.0.1:30005@31005 master - 0 1426238316232 5 connected
824fe116063bc5fcf9f4ffd895bc17aee7731ac3 :30006@31006 master,noaddr - 0 1426238316232 6 disconnected
e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca :30001@31001 myself,master - 0 0 1 connected 0-5460
`
	got, err := clusterPrimaries(nodes, "127.0.0.1:30002")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"127.0.0.1:30001", "127.0.0.1:30002", "127.0.0.1:30003"}; !slices.Equal(got, want) {
		t.Errorf("primaries %v, want %v", got, want)
	}
	if _, err := clusterPrimaries("garbage\n", "127.0.0.1:30002"); err == nil {
		t.Error("a malformed reply was read")
	}
	if _, err := clusterPrimaries(strings.SplitN(nodes, "\n", 2)[0], "127.0.0.1:30002"); err == nil {
		t.Error("a reply without a primary was read")
	}
}

func TestCallsBetween(t *testing.T) {
	per, total := callsBetween(map[string]int64{"a:1": 10, "b:1": 5}, map[string]int64{"a:1": 21, "b:1": 6})
	if total != 10 || per["a:1"] != 10 || per["b:1"] != 0 {
		t.Errorf("per %v total %d", per, total)
	}
	if s := callsByNode(per, total); s != "a:1 10 (100%), b:1 0 (0%)" {
		t.Errorf("callsByNode %q", s)
	}
}
