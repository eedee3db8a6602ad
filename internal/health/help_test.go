package health

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/VictoriaMetrics/metrics"
	"github.com/rs/zerolog"
)

// exposeMetadata turns the library's # HELP and # TYPE lines on, as main does for the binary.
// The switch is the process's: it is never turned off again, so that a test running beside
// this one never sees it flip (no test of this package depends on the lines being absent).
func exposeMetadata() { metrics.ExposeMetadata(true) }

// helpProblems reads an exposition and says what a scraper would miss: a family with an empty
// HELP line, without one, or with two.
func helpProblems(text string) []string {
	var out []string
	helps := map[string]int{}
	for _, line := range strings.Split(text, "\n") {
		switch {
		case strings.HasPrefix(line, "# HELP "):
			name, help, _ := strings.Cut(strings.TrimPrefix(line, "# HELP "), " ")
			helps[name]++
			if strings.TrimSpace(help) == "" {
				out = append(out, "no help text: "+name)
			}
		case strings.HasPrefix(line, "# TYPE "):
			name, _, _ := strings.Cut(strings.TrimPrefix(line, "# TYPE "), " ")
			if helps[name] == 0 {
				out = append(out, "no HELP line before its TYPE: "+name)
			}
		}
	}
	for name, n := range helps {
		if n > 1 {
			out = append(out, strconv.Itoa(n)+" HELP lines: "+name)
		}
	}
	slices.Sort(out)
	return out
}

// /metrics gives every family it writes a help text: plaita's (a few registered here; every
// declared one is TestEveryDeclaredMetricHasHelp's) and the library's process and Go runtime
// series, whatever this platform writes of them.
func TestMetricsHaveHelpTexts(t *testing.T) {
	t.Parallel()
	exposeMetadata()
	set := metrics.NewSet()
	set.GetOrCreateCounter(`plaita_dispatch_runs_total`).Inc()
	set.GetOrCreateCounter(`plaita_queue_acked_total{queue="q"}`).Inc()
	set.GetOrCreatePrometheusHistogram(`plaita_step_duration_seconds`).Update(0.2)
	set.GetOrCreateGauge(`plaita_worker_active_tasks`, nil).Set(1)
	base := srvStart(t, New("127.0.0.1", 9, set, nil, zerolog.Nop()))
	_, _, body := srvGet(t, base+"/metrics")
	if !strings.Contains(body, "# HELP go_goroutines") || !strings.Contains(body, "# TYPE plaita_step_duration_seconds histogram") {
		t.Fatalf("/metrics without the metadata this test reads:\n%s", body)
	}
	if p := helpProblems(body); len(p) > 0 {
		t.Fatalf("/metrics:\n%s\n\n%s", strings.Join(p, "\n"), body)
	}
}

// FillHelp leaves a family the table does not know with its empty HELP line — promtool in
// .ci/run then names it — and writes the metadata of a family once even where the writer
// repeated it for each series (metrics.WriteGaugeUint64 does, for /api/metrics).
func TestFillHelp(t *testing.T) {
	t.Parallel()
	in := "# HELP plaita_instances\n# TYPE plaita_instances gauge\nplaita_instances{role=\"worker\"} 1\n" +
		"# HELP plaita_instances\n# TYPE plaita_instances gauge\nplaita_instances{role=\"delay\"} 0\n" +
		"# HELP plaita_not_in_the_table_total\n# TYPE plaita_not_in_the_table_total counter\nplaita_not_in_the_table_total 3\n"
	help, ok := Help("plaita_instances")
	if !ok || help == "" {
		t.Fatal("plaita_instances has no help text")
	}
	want := "# HELP plaita_instances " + help + "\n# TYPE plaita_instances gauge\nplaita_instances{role=\"worker\"} 1\n" +
		"plaita_instances{role=\"delay\"} 0\n" +
		"# HELP plaita_not_in_the_table_total\n# TYPE plaita_not_in_the_table_total counter\nplaita_not_in_the_table_total 3\n"
	if got := string(FillHelp([]byte(in))); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

// Every metric family named in the repository's code has a help text in the table: a counter
// added later without one fails here, wherever it is declared and however late it is created
// (plaita_executions_total{status=…} appears only once an execution ends). A name is found as
// a string literal passed to a call — set.GetOrCreateCounter("…"), a helper c("…"),
// fmt.Sprintf(`…{status=%q}`), metrics.WriteGaugeUint64(b, series("…", …)). Families whose
// names are built at run time (internal/presence's plaita_<role>_…) are checked on each role's
// real /metrics by test/e2e's TestE2EEveryRoleMetricHasHelp.
func TestEveryDeclaredMetricHasHelp(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	name := regexp.MustCompile(`^(plaita_[a-z][a-z0-9_]*[a-z0-9])(\{.*)?$`)
	found := map[string]string{} // family → where
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || n == "testdata" || n == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			for _, arg := range call.Args {
				ast.Inspect(arg, func(n ast.Node) bool {
					lit, ok := n.(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						return true
					}
					s, err := strconv.Unquote(lit.Value)
					if m := name.FindStringSubmatch(s); err == nil && m != nil {
						found[m[1]] = fset.Position(lit.Pos()).String()
					}
					return true
				})
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The scan must see the metrics of every layer, or it proves nothing.
	for _, want := range []string{"plaita_queue_acked_total", "plaita_executions_total", "plaita_delay_fired_total",
		"plaita_filter_wakeups_total", "plaita_schedule_skipped_total", "plaita_console_scrape_degraded", "plaita_alerts_sent_total"} {
		if _, ok := found[want]; !ok {
			t.Fatalf("the scan did not find %s: found %d families", want, len(found))
		}
	}
	for _, family := range slices.Sorted(maps.Keys(found)) {
		if help, ok := Help(family); !ok || strings.TrimSpace(help) == "" {
			t.Errorf("%s (%s) has no help text: add it to helpTexts in internal/health/help.go", family, found[family])
		}
	}
}

// Every entry of the table is a valid HELP text: one line, no backslash (the format would
// need them escaped), a sentence a reader can use.
func TestHelpTextsAreOneLine(t *testing.T) {
	t.Parallel()
	for family, help := range helpTexts {
		if strings.ContainsAny(help, "\\\n\r") || len(strings.TrimSpace(help)) < 10 || help != strings.TrimSpace(help) {
			t.Errorf("%s: %q", family, help)
		}
	}
}

// The start-up line of the endpoint says when it listens on every interface (the default
// host, 0.0.0.0, unlike the console's 127.0.0.1), and does not when it listens on one.
func TestServerLogSaysAllInterfaces(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		listen string
		all    bool
	}{{"0.0.0.0:0", true}, {"127.0.0.1:0", false}} {
		var logs bytes.Buffer
		s := New("", 9, metrics.NewSet(), nil, zerolog.New(&logs))
		ln, err := net.Listen("tcp", tc.listen)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Serve(ln); err != nil {
			t.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		if code, _, _ := srvGet(t, "http://127.0.0.1:"+strconv.Itoa(port)+"/healthz"); code != http.StatusOK {
			t.Fatalf("%s: /healthz %d", tc.listen, code)
		}
		s.Stop(srvCtx(t))
		line := logs.String()
		if !strings.Contains(line, `"event":"health.listen"`) || strings.Contains(line, "all interfaces") != tc.all {
			t.Errorf("%s: the start-up line should say all interfaces: %v\n%s", tc.listen, tc.all, line)
		}
	}
}
