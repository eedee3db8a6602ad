package api

import (
	"bytes"
	"context"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"plaita/control"
	"plaita/internal/health"
)

// The cluster: what the operator of the whole deployment watches — the task queue, the delay
// queue, the live instances and their generations, the console's configuration, the tenant
// statuses in Redis, the metrics. Every tenant's work shares these, so they are a platform
// admin's (the tenant routes show a tenant its own executions, events and dead letters).

type clusterStatusIn struct {
	Tenant string `query:"tenant" maxLength:"64" doc:"the tenant whose suspended executions are counted (default: the default tenant)"`
}

type clusterStatusOut struct{ Body control.ClusterStatus }

// clusterStatus is `plaita status` (control.Status): backlog, delay queue, roles, instances,
// generation mismatches and what needs attention.
func (a *API) clusterStatus(ctx context.Context, _ *Call, in *clusterStatusIn) (*clusterStatusOut, error) {
	s, err := a.d.Plane.Status(ctx, in.Tenant)
	return &clusterStatusOut{Body: s}, err
}

type clusterInstancesOut struct{ Body control.ClusterInstances }

func (a *API) clusterInstances(ctx context.Context, _ *Call, _ *struct{}) (*clusterInstancesOut, error) {
	in, err := a.d.Plane.Instances(ctx)
	return &clusterInstancesOut{Body: in}, err
}

// EffectiveConfig is the console's configuration as `plaita doctor --role console` prints it:
// every variable with its effective value (secrets masked), where the value came from, and the
// three generation hashes.
type EffectiveConfig struct {
	Role        string            `json:"role"`
	OK          bool              `json:"ok"`
	Generations ConfigGenerations `json:"generations"`
	Variables   []ConfigVariable  `json:"variables"`
	Warnings    []string          `json:"warnings"`
}

// ConfigGenerations are the configuration's generation hashes (docs/configuration.md).
type ConfigGenerations struct {
	Family string `json:"config_family"`
	Config string `json:"config_generation"`
	Budget string `json:"budget_generation"`
}

// ConfigVariable is one variable's effective value.
type ConfigVariable struct {
	Name     string   `json:"name"`
	Section  string   `json:"section"`
	Value    any      `json:"value" doc:"the effective value; a secret's is masked"`
	Default  string   `json:"default"`
	Source   string   `json:"source" enum:"default,env,flag"`
	Secret   bool     `json:"secret"`
	Effect   string   `json:"effect"`
	Warnings []string `json:"warnings"`
}

type clusterConfigOut struct{ Body EffectiveConfig }

func (a *API) clusterConfig(context.Context, *Call, *struct{}) (*clusterConfigOut, error) {
	if a.s.Config == nil {
		return nil, NewProblem(http.StatusNotFound, "no_config", "this console was started without its configuration report")
	}
	return &clusterConfigOut{Body: *a.s.Config}, nil
}

type reconcileOut struct{ Body TenantStatusReport }

// reconcileTenantStatusesNow republishes every tenant's status from the database now.
func (a *API) reconcileTenantStatusesNow(ctx context.Context, c *Call, _ *struct{}) (*reconcileOut, error) {
	rep, err := a.d.Accounts.ReconcileTenantStatuses(ctx, TriggerAPI)
	c.Note("published", len(rep.Published))
	c.Note("tombstoned", rep.Tombstoned)
	return &reconcileOut{Body: rep}, err
}

// ServiceRole is one role's live instances.
type ServiceRole struct {
	Role      string                   `json:"role"`
	Running   int                      `json:"running"`
	Instances []control.InstanceStatus `json:"instances"`
}

// Services are the registry's live instances by role, with where each serves its metrics
// and health endpoints (metrics_addr) when it does.
type Services struct {
	At    time.Time     `json:"at"`
	Roles []ServiceRole `json:"roles"`
}

type servicesOut struct{ Body Services }

func (a *API) services(ctx context.Context, _ *Call, _ *struct{}) (*servicesOut, error) {
	in, err := a.d.Plane.Instances(ctx)
	if err != nil {
		return nil, err
	}
	out := Services{At: in.At, Roles: []ServiceRole{}}
	for _, r := range in.Roles {
		sr := ServiceRole{Role: r.Role, Running: r.Running, Instances: []control.InstanceStatus{}}
		for _, i := range in.Instances {
			if i.Role == r.Role {
				sr.Instances = append(sr.Instances, i)
			}
		}
		out.Roles = append(out.Roles, sr)
	}
	return &servicesOut{Body: out}, nil
}

// ---- GET /api/metrics ----

// scrapeFailures counts the reads a scrape could not make, by part (control's Read* names);
// the parts are fixed, so the map is built once and only its counters change.
type scrapeFailures map[string]*atomic.Uint64

func newScrapeFailures() scrapeFailures {
	return scrapeFailures{control.ReadBacklog: new(atomic.Uint64), control.ReadDelay: new(atomic.Uint64), control.ReadRegistry: new(atomic.Uint64)}
}

// scrapeWarnEvery spaces the warnings of degraded scrapes (Prometheus scrapes every few
// seconds; one line a minute says enough).
const scrapeWarnEvery = time.Minute

// clusterMetrics is the cluster as Prometheus text: each part read on its own (control.Read),
// so a part that fails leaves its series out and sets plaita_console_scrape_degraded instead
// of failing the scrape — alert on a 0 only where degraded is 0. Nothing readable is a 503.
func (a *API) clusterMetrics(ctx context.Context, _ *Call, _ *struct{}) (*textOut, error) {
	r := a.d.Plane.Read(ctx)
	if r.Queue == nil && r.Delay == nil && r.Instances == nil {
		return nil, NewProblem(http.StatusServiceUnavailable, "redis_unavailable", "no part of the cluster could be read: %v", r.Failed[control.ReadBacklog]).
			WithRetryAfter(5 * time.Second)
	}
	var b bytes.Buffer
	writeClusterSeries(&b, r)
	degraded := uint64(0)
	for _, part := range slices.Sorted(maps.Keys(a.scrapes)) {
		if err, failed := r.Failed[part]; failed {
			a.scrapes[part].Add(1)
			degraded = 1
			a.warnDegraded(part, err)
		}
		metrics.WriteCounterUint64(&b, series("plaita_console_scrape_failed_commands_total", "command", part), a.scrapes[part].Load())
	}
	metrics.WriteGaugeUint64(&b, "plaita_console_scrape_degraded", degraded)
	// The help texts come from the one table of every role's /metrics (internal/health/help.go);
	// FillHelp also keeps one HELP and TYPE line per family, which these writers repeat per series.
	return &textOut{Status: http.StatusOK, ContentType: "text/plain; version=0.0.4; charset=utf-8", Body: health.FillHelp(b.Bytes())}, nil
}

func (a *API) warnDegraded(part string, err error) {
	now := a.d.Now().Unix()
	last := a.scrapeWarnAt.Load()
	if now-last < int64(scrapeWarnEvery/time.Second) || !a.scrapeWarnAt.CompareAndSwap(last, now) {
		return
	}
	a.d.Log.Warn().Str("event", "console.scrape_degraded").Str("command", part).Err(err).
		Msg("GET /api/metrics could not read part of the cluster: its series are missing and plaita_console_scrape_degraded is 1")
}

// writeClusterSeries writes the series of what was read.
func writeClusterSeries(b *bytes.Buffer, r control.ClusterReading) {
	if q := r.Queue; q != nil {
		metrics.WriteGaugeUint64(b, series("plaita_queue_stream_length", "queue", q.Stream), nonNeg(q.Length))
		metrics.WriteGaugeUint64(b, series("plaita_queue_pending", "queue", q.Stream, "group", q.Group), nonNeg(q.Pending))
		metrics.WriteGaugeUint64(b, series("plaita_queue_lag", "queue", q.Stream, "group", q.Group), nonNeg(q.Lag))
		metrics.WriteGaugeUint64(b, series("plaita_queue_residue", "queue", q.Stream), nonNeg(q.Residue))
		metrics.WriteGaugeUint64(b, series("plaita_queue_dlq_length", "queue", q.Stream, "dlq", q.DLQ), nonNeg(q.DLQLength))
	}
	if d := r.Delay; d != nil {
		metrics.WriteGaugeUint64(b, series("plaita_delay_scheduled", "key", d.Key), nonNeg(d.Scheduled))
		metrics.WriteGaugeUint64(b, series("plaita_delay_due", "key", d.Key), nonNeg(d.Due))
		metrics.WriteGaugeUint64(b, series("plaita_delay_dead", "key", d.Key), nonNeg(d.Dead))
	}
	if in := r.Instances; in != nil {
		workers := 0
		for _, role := range in.Roles {
			for _, st := range []struct {
				status string
				n      int
			}{{"running", role.Running}, {"draining", role.Draining}, {"stopping", role.Stopping}} {
				metrics.WriteGaugeUint64(b, series("plaita_instances", "role", role.Role, "status", st.status), uint64(st.n))
			}
			if role.Role == "worker" || role.Role == "dev" {
				workers += role.Running
			}
		}
		metrics.WriteGaugeUint64(b, "plaita_workers_registered_total", uint64(workers))
		metrics.WriteGaugeUint64(b, "plaita_generation_mismatches", uint64(len(in.Mismatches)))
	}
}

// series is a metric name with its labels, each value escaped as the Prometheus text format
// wants (a queue name is an operator's string: it must not break the line).
func series(name string, labels ...string) string {
	var b strings.Builder
	b.WriteString(name)
	for i := 0; i+1 < len(labels); i += 2 {
		if i == 0 {
			b.WriteByte('{')
		} else {
			b.WriteByte(',')
		}
		b.WriteString(labels[i])
		b.WriteString(`="`)
		b.WriteString(labelEscaper.Replace(labels[i+1]))
		b.WriteByte('"')
	}
	if len(labels) > 1 {
		b.WriteByte('}')
	}
	return b.String()
}

var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

func nonNeg(n int64) uint64 { return uint64(max(n, 0)) }
