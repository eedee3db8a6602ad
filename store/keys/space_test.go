package keys

import (
	"reflect"
	"strings"
	"testing"
)

// allKeys is every key and channel a Space builds, by method name, with sample arguments: the
// execution id for ids, the event type and flow names where the method takes them. Every
// exported method returning a string (or a string and an error) is called through reflection,
// so a key family added to Space is covered without editing this test.
func allKeys(t testing.TB, s Space, id, event, flow, version, node string) map[string]string {
	t.Helper()
	// ExecutionKeys: the keys of Execution, Tombstone and Mechanism (TestExecutionKeysAreTheOnesBuiltOneByOne).
	skip := map[string]bool{"Tenant": true, "Root": true, "Prefix": true, "ExecutionID": true, "ExecutionKeys": true}
	args := map[string][]string{
		"Mechanism": nil, "NodeRetry": {id, node}, "SubscriptionIndex": {event}, "SubscriptionBucket": {event, `["` + node + `"]`, id}, "SubscriptionPaths": {event}, "EventIndex": {event}, "EventIndexPrune": {event}, "Flow": {flow, version},
		"FlowVersions": {flow}, "RegistryInstance": {"inst-1"}, "IndexBy": {"order_id", id},
	}
	out := map[string]string{}
	v := reflect.ValueOf(s)
	for i := range v.NumMethod() {
		m := v.Type().Method(i)
		if skip[m.Name] {
			continue
		}
		if m.Name == "Mechanism" {
			for _, fam := range MechanismFamilies() {
				k, err := s.Mechanism(fam, id)
				if err != nil {
					t.Fatalf("Mechanism(%s): %v", fam, err)
				}
				out["Mechanism/"+fam] = k
			}
			continue
		}
		in := args[m.Name]
		if in == nil {
			for range m.Type.NumIn() - 1 {
				in = append(in, id)
			}
		}
		vals := make([]reflect.Value, len(in))
		for j, a := range in {
			vals[j] = reflect.ValueOf(a)
		}
		res := v.Method(i).Call(vals)
		if len(res) == 0 || res[0].Kind() != reflect.String {
			t.Fatalf("Space.%s returns no key: give it a case in allKeys", m.Name)
		}
		if len(res) == 2 && !res[1].IsNil() {
			t.Fatalf("Space.%s%v: %v (give it valid sample arguments in allKeys)", m.Name, in, res[1].Interface())
		}
		out[m.Name] = res[0].String()
	}
	return out
}

// Every key a Space builds belongs to a family of Families(): the segment after the prefix
// (tenant families) or the root (platform families) is a family name. A key family added
// without being listed (and so without its name being reserved as a tenant slug) fails here.
func TestEveryKeyIsInAReservedFamily(t *testing.T) {
	fams := map[string]Family{}
	for _, f := range Families() {
		fams[f.Name] = f
		if ValidTenant(f.Name) == nil {
			t.Errorf("family %q is not reserved as a tenant slug", f.Name)
		}
	}
	for _, tenant := range []string{"", "acme"} {
		s := MustFor("plaita", tenant)
		for method, k := range allKeys(t, s, "ex_1", "order.paid", "orders", "1", "n1") {
			rest, ok := strings.CutPrefix(k, s.Root()+":")
			if !ok {
				t.Fatalf("%s: %q is outside the root", method, k)
			}
			// Under another tenant, a tenant family follows the tenant's prefix and a platform
			// family follows the root.
			underTenant := false
			if r, ok := strings.CutPrefix(k, s.Prefix()); ok && tenant != "" {
				rest, underTenant = r, true
			}
			seg, _, _ := strings.Cut(rest, ":")
			f, ok := fams[seg]
			switch {
			case !ok:
				t.Errorf("%s: %q starts family %q, which Families() does not list (and no tenant slug reserves)", method, k, seg)
			case tenant != "" && f.Platform == underTenant:
				t.Errorf("%s: %q is family %q (platform %v), built under the tenant prefix: %v", method, k, seg, f.Platform, underTenant)
			}
		}
	}
}

// The two attacks that once worked: an event type that spells another family, and a tenant
// named after a family.
func TestEventTypesAndTenantsCannotSpellOtherKeys(t *testing.T) {
	for _, tenant := range []string{"subscription_index", "approval", "approval_index", "execution_events", "event"} {
		if ValidTenant(tenant) == nil {
			t.Errorf("tenant %q accepted", tenant)
		}
	}
	s := MustFor("", "")
	for _, ev := range []string{"execution:{ex_1}", "execution:index", "a b", "x{y}", "", ":x", "*"} {
		if _, err := s.SubscriptionIndex(ev); err == nil {
			t.Errorf("event type %q accepted", ev)
		}
	}
	for _, ev := range []string{"order.approved", "payment", "billing/invoice.paid", "a_b-c"} {
		if _, err := s.SubscriptionIndex(ev); err != nil {
			t.Errorf("event type %q: %v", ev, err)
		}
	}
}

// No two tenants' keys can be equal, and within one tenant no two families' keys can be equal,
// for any valid tenant slugs, execution ids, event types, flow names and node ids.
func FuzzKeySpaceHasNoOverlap(f *testing.F) {
	f.Add("", "acme", "ex_1", "ex_2", "order.paid", "execution", "1", "n1")
	f.Add("subscription", "acme", "ex_1", "index", "x", "flow", "queue", "#nodes")
	f.Add("a", "b", "lease", "fence", "index", "flow_list", "dlq", "ready")
	f.Add("", "subscription_index", "ex_1", "ex_1", "flow_list", "f", "1", "n1") // the tenant is reserved: skipped
	f.Fuzz(func(t *testing.T, ta, tb, ida, idb, event, flow, version, node string) {
		if ValidTenant(ta) != nil || ValidTenant(tb) != nil || validID(ida) != nil || validID(idb) != nil ||
			ValidName("event type", event) != nil || ValidName("flow id", flow) != nil || ValidName("version", version) != nil ||
			node == "" || strings.ContainsAny(node, "{}: \t\r\n#") {
			return
		}
		norm := func(x string) string {
			if x == "" {
				return DefaultTenant
			}
			return x
		}
		sa, sb := MustFor("", ta), MustFor("", tb)
		ka := allKeys(t, sa, ida, event, flow, version, node)
		kb := allKeys(t, sb, idb, event, flow, version, node)
		// A method builds an id-free key when another id gives the same key.
		probe := "ex_probe"
		if ida == probe {
			probe = "ex_probe2"
		}
		idFree := map[string]bool{}
		for m, k := range allKeys(t, sa, probe, event, flow, version, node) {
			idFree[m] = ka[m] == k
		}
		owner := map[string]string{}
		for m, k := range ka {
			if prev, ok := owner[k]; ok && prev != m {
				t.Fatalf("tenant %q: %s and %s are both %q", ta, prev, m, k)
			}
			owner[k] = m
		}
		for m, k := range kb {
			prev, ok := owner[k]
			if !ok {
				continue
			}
			// Platform keys are shared by design; tenant keys of one tenant may meet themselves
			// only for the same method with the same arguments.
			platform := strings.HasPrefix(m, "Tenant") || strings.HasPrefix(m, "Registry") || m == "ScheduleDue" || strings.HasPrefix(m, "EventBus")
			if platform && m == prev {
				if m == "TenantRunning" && norm(ta) != norm(tb) {
					t.Fatalf("TenantRunning of %q and %q are both %q", ta, tb, k)
				}
				continue
			}
			if norm(ta) == norm(tb) && m == prev && ida == idb {
				continue
			}
			if norm(ta) == norm(tb) && m == prev && idFree[m] {
				continue // a key without the execution id: the same for both ids
			}
			t.Fatalf("tenant %q %s and tenant %q %s are both %q", ta, prev, tb, m, k)
		}
	})
}
