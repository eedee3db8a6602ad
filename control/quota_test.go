package control

import (
	"context"
	"strings"
	"testing"
	"time"

	"plaita/store"
	"plaita/store/keys"
)

// A start of a tenant whose running slots are at its limit is refused before anything is
// written (Limited, with a retry delay, the limit and the count); the limit is the worker's
// rule: the tenant's override when present (0 there = unlimited), else the default.
func TestStartRefusedAtTheRunningQuota(t *testing.T) {
	f := newFixture(t, func(d *Deps) { d.Quota = QuotaSettings{MaxRunning: 1} })
	ctx := context.Background()
	for _, tenant := range []string{"", "acme"} {
		if _, err := f.p.PublishFlow(ctx, tenant, []byte(askFlow), ""); err != nil {
			t.Fatal(err)
		}
	}
	queued := func() int64 {
		t.Helper()
		n, err := f.c.Do(ctx, f.c.B().Xlen().Key(f.root+":flow:queue").Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	slot := func(tenant, id string) {
		t.Helper()
		if _, err := f.store.AdmitRunning(ctx, store.RunningAdmit{Tenant: tenant, ExecutionID: id, Now: time.Now(), TTL: time.Hour, Limit: 0}); err != nil {
			t.Fatal(err)
		}
	}
	override := func(tenant, v string) {
		t.Helper()
		if err := f.c.Do(ctx, f.c.B().Hset().Key(keys.MustFor(f.root, "").TenantQuota()).FieldValue().FieldValue(tenant, v).Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.p.Start(ctx, StartRequest{FlowID: "ask"}); err != nil {
		t.Fatalf("a start under the limit: %v", err)
	}
	slot("", "ex_running")
	before := queued()
	_, err := f.p.Start(ctx, StartRequest{FlowID: "ask"})
	r := refusal(t, "a start at the default limit", err, Limited, "tenant_quota")
	if r.RetryAfter <= 0 || r.Fields["limit"] != 1 || r.Fields["running"] != 1 || !strings.Contains(r.Message, "PLAITA_TENANT_MAX_RUNNING=1") ||
		!strings.Contains(r.Unblock, "HSET") {
		t.Fatalf("refusal: %+v", r)
	}
	_, err = f.p.Start(ctx, StartRequest{Definition: []byte(strings.Replace(askFlow, `"version":"1"`, `"version":"2"`, 1))})
	refusal(t, "a start of a definition at the limit", err, Limited, "tenant_quota")
	if _, _, err := f.p.PublishedFlow(ctx, "", "ask", "2"); err == nil {
		t.Fatal("a refused start published its definition")
	}
	if n := queued(); n != before {
		t.Fatalf("refused starts enqueued %d task(s)", n-before)
	}
	_, err = f.p.Start(ctx, StartRequest{FlowID: "nosuch"})
	refusal(t, "an unknown flow at the limit", err, NotFound, "flow_not_found")

	// acme's override: 2 admits a second, 0 makes it unlimited (never the default).
	slot("acme", "ex_a")
	override("acme", "2")
	if _, err := f.p.Start(ctx, StartRequest{Tenant: "acme", FlowID: "ask"}); err != nil {
		t.Fatalf("under acme's override: %v", err)
	}
	slot("acme", "ex_b")
	_, err = f.p.Start(ctx, StartRequest{Tenant: "acme", FlowID: "ask"})
	if r := refusal(t, "at acme's override", err, Limited, "tenant_quota"); !strings.Contains(r.Message, "tenant_quota[acme]") {
		t.Fatalf("refusal: %+v", r)
	}
	override("acme", "0")
	if q, err := f.p.Quota(ctx, "acme"); err != nil || q.Full || q.Limit.Limit != 0 || q.Limit.Ignored == "" {
		t.Fatalf("quota with a 0 override: %+v %v", q, err)
	}
	if _, err := f.p.Start(ctx, StartRequest{Tenant: "acme", FlowID: "ask"}); err != nil {
		t.Fatalf("with a 0 override: %v", err)
	}
}
