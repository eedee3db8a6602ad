package schedule

import (
	"strings"
	"testing"

	"plaita/store/keys"
)

// The schedule role's tenant gate decides by the worker's rule: disabled and unknown statuses
// skip a tenant's ticks (the default tenant's unknown status fires), no entry fires.
func TestTenantsGate(t *testing.T) {
	t.Parallel()
	b := setup(t)
	sp, err := keys.For(b.root, "")
	b.must(err)
	b.must(b.c.Do(tctx(t), b.c.B().Hset().Key(sp.TenantStatus()).FieldValue().
		FieldValue("acme", "disabled").FieldValue("odd", "paused").FieldValue("default", "paused").Build()).Error())
	g := Tenants(b.redis)
	for _, tc := range []struct {
		tenant string
		want   Verdict
		reason string
	}{
		{"acme", Skip, "disabled"},
		{"odd", Skip, "neither active nor disabled"},
		{"beta", Fire, "no status entry"},
		{"", Fire, "fail-open"},
	} {
		v, reason, err := g.Check(tctx(t), tc.tenant)
		if err != nil || v != tc.want || !strings.Contains(reason, tc.reason) {
			t.Errorf("Check(%q) = %v, %q, %v; want %v with %q", tc.tenant, v, reason, err, tc.want, tc.reason)
		}
	}
	if v, _, err := g.Check(tctx(t), "Bad Tenant"); err == nil || v != Hold {
		t.Errorf("bad slug: %v, %v; want Hold with an error", v, err)
	}
}
