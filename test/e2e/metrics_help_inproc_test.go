//go:build !e2e

package e2e

import (
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
)

// Every role's /metrics — and the console's cluster series, GET /api/metrics — gives each
// family it writes one help text, as promtool wants (.ci/run checks the roles' processes): the
// table in internal/health/help.go covers the families whose names are built at run time
// (plaita_<role>_heartbeat_timestamp_seconds …) as well as the declared ones.
func TestE2EEveryRoleMetricHasHelp(t *testing.T) {
	t.Parallel()
	// main turns the metadata lines on for the binary; this process is the test's. The switch
	// is the process's and stays on: the other tests read values, never the metadata.
	metrics.ExposeMetadata(true)
	s := newStack(t, withEnv(cliEnv()))
	procs := map[string]*proc{}
	for _, role := range []string{"worker", "filter", "schedule", "delay"} {
		procs[role] = s.start(role, nil)
	}
	c := s.startConsole(nil)
	procs["console"] = c.p
	for _, role := range slices.Sorted(maps.Keys(procs)) {
		code, body := procs[role].get("/metrics")
		if code != http.StatusOK || !strings.Contains(body, "# TYPE plaita_") {
			t.Fatalf("%s /metrics: %d\n%s", role, code, body)
		}
		if p := helpProblems(body); len(p) > 0 {
			t.Errorf("%s /metrics:\n%s", role, strings.Join(p, "\n"))
		}
	}
	req, _ := http.NewRequest(http.MethodGet, c.base+"/api/metrics", nil)
	req.Header.Set("X-Admin-API-Key", consoleAdminKey)
	res, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK || !strings.Contains(string(raw), "# TYPE plaita_instances gauge") {
		t.Fatalf("GET /api/metrics: %d\n%s", res.StatusCode, raw)
	}
	if p := helpProblems(string(raw)); len(p) > 0 {
		t.Errorf("GET /api/metrics:\n%s", strings.Join(p, "\n"))
	}
}

// helpProblems reads an exposition and says what a scraper would miss: a family with an empty
// HELP line, without one, or with its metadata written twice.
func helpProblems(text string) []string {
	var out []string
	helps, types := map[string]int{}, map[string]int{}
	for _, line := range strings.Split(text, "\n") {
		switch {
		case strings.HasPrefix(line, "# HELP "):
			name, help, _ := strings.Cut(strings.TrimPrefix(line, "# HELP "), " ")
			if helps[name]++; strings.TrimSpace(help) == "" {
				out = append(out, "no help text: "+name)
			}
		case strings.HasPrefix(line, "# TYPE "):
			name, _, _ := strings.Cut(strings.TrimPrefix(line, "# TYPE "), " ")
			if types[name]++; helps[name] == 0 {
				out = append(out, "no HELP line before its TYPE: "+name)
			}
		}
	}
	for name, n := range helps {
		if n > 1 || types[name] > 1 {
			out = append(out, "metadata written more than once: "+name)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
