package keys

import (
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestKeysOfTheDefaultTenant(t *testing.T) {
	s := MustFor("", "")
	exec, _ := s.Execution("ex_1")
	lease, _ := s.Mechanism(FamLease, "ex_1")
	retry, _ := s.NodeRetry("ex_1", "fetch")
	tomb, _ := s.Tombstone("ex_1")
	for got, want := range map[string]string{
		exec:                "plaita:execution:{ex_1}",
		lease:               "plaita:execution:lease:{ex_1}",
		retry:               "plaita:execution:noderetry:{ex_1}:fetch",
		tomb:                "plaita:exec_tombstone:{ex_1}",
		s.Index():           "plaita:execution:index",
		s.IndexReady():      "plaita:execution:index:ready",
		s.IndexCursor():     "plaita:execution:index:backfill:cursor",
		s.Flow("f", "3"):    "plaita:flow:f:3",
		s.TenantStatus():    "plaita:tenant_status",
		s.TenantRunning():   "plaita:tenant_running:default",
		s.FlowVersions("f"): "plaita:flow_versions:f",
	} {
		if got != want {
			t.Errorf("got %s, want %s", got, want)
		}
	}
	by, _ := s.IndexBy("order_id", `"ord-1"`)
	if !strings.HasPrefix(by, "plaita:execution:index:by:order_id:") || len(by) != len("plaita:execution:index:by:order_id:")+32 || s.ExecutionID(by) != "" {
		t.Errorf("IndexBy: %s", by)
	}
	for _, bad := range []string{"", "order.id", "a:b", "{x}", "9lives", strings.Repeat("a", 65)} {
		if _, err := s.IndexBy(bad, "1"); !errors.Is(err, ErrBadName) {
			t.Errorf("indexed field %q: %v", bad, err)
		}
	}
	if d := MustFor("plaita", "default"); d.Prefix() != "plaita:" {
		t.Errorf("explicit default tenant: %s", d.Prefix())
	}
}

func TestKeysOfAnotherTenantAndRoot(t *testing.T) {
	s := MustFor("t1", "acme")
	exec, _ := s.Execution("ex_1")
	fence, _ := s.Mechanism(FamFence, "ex_1")
	if exec != "t1:acme:execution:{ex_1}" || fence != "t1:acme:execution:fence:{ex_1}" || s.TenantStatus() != "t1:tenant_status" {
		t.Errorf("%s %s %s", exec, fence, s.TenantStatus())
	}
	if s.ExecutionID(exec) != "ex_1" || s.ExecutionID(fence) != "" || MustFor("t1", "").ExecutionID(exec) != "" {
		t.Error("ExecutionID must only accept this space's state keys")
	}
}

func TestAllKeysOfAnExecutionShareAHashTag(t *testing.T) {
	s := MustFor("", "acme")
	want := "{ex_9}"
	keys := []string{}
	k, _ := s.Execution("ex_9")
	keys = append(keys, k)
	for _, f := range MechanismFamilies() {
		k, _ := s.Mechanism(f, "ex_9")
		keys = append(keys, k)
	}
	k, _ = s.Tombstone("ex_9")
	keys = append(keys, k)
	for _, k := range keys {
		if i := strings.Index(k, "{"); i < 0 || k[i:i+len(want)] != want {
			t.Errorf("%s does not carry the hash tag %s", k, want)
		}
	}
}

// Every schedule key of every tenant carries the same hash tag (first brace pair): one script
// changes a record, its tenant's index and the due index together.
func TestScheduleKeysShareOneSlot(t *testing.T) {
	def, acme := MustFor("", ""), MustFor("", "acme")
	rec, _ := def.Schedule("nightly")
	other, _ := acme.Schedule("nightly")
	for got, want := range map[string]string{
		rec:                "plaita:schedule:{sched}:nightly",
		other:              "plaita:acme:schedule:{sched}:nightly",
		def.Schedules():    "plaita:schedules:{sched}",
		acme.Schedules():   "plaita:acme:schedules:{sched}",
		def.ScheduleDue():  "plaita:schedule_due:{sched}",
		acme.ScheduleDue(): "plaita:schedule_due:{sched}",
	} {
		if got != want {
			t.Errorf("got %s, want %s", got, want)
		}
		if i := strings.Index(got, "{"); i < 0 || !strings.HasPrefix(got[i:], ScheduleTag) {
			t.Errorf("%s does not carry the hash tag %s first", got, ScheduleTag)
		}
	}
	if _, err := def.Schedule("a:b"); !errors.Is(err, ErrBadID) {
		t.Errorf("schedule id with ':' accepted: %v", err)
	}
}

func TestBadTenantsAndIDs(t *testing.T) {
	for _, bad := range []string{"a:b", "{x}", "has space", "UPPER", strings.Repeat("a", 65), "execution", "-x", "é"} {
		if _, err := For("", bad); !errors.Is(err, ErrBadTenant) {
			t.Errorf("tenant %q: %v", bad, err)
		}
	}
	s := MustFor("", "")
	for _, bad := range []string{"", "a}b", "a{b", "a:b", "a b", "x*"} {
		if _, err := s.Execution(bad); !errors.Is(err, ErrBadID) {
			t.Errorf("id %q: %v", bad, err)
		}
	}
	if _, err := s.Mechanism("bogus", "ex_1"); err == nil {
		t.Error("unknown family accepted")
	}
	if _, err := For("a:b", ""); err == nil {
		t.Error("bad root accepted")
	}
}

func TestIsMechanismKey(t *testing.T) {
	s := MustFor("", "")
	a := MustFor("", "acme")
	var mech, state []string
	for _, sp := range []Space{s, a} {
		for _, f := range MechanismFamilies() {
			k, _ := sp.Mechanism(f, "ex_1")
			mech = append(mech, k)
		}
		r, _ := sp.NodeRetry("ex_1", "n")
		set, _ := sp.NodeRetrySet("ex_1")
		mech = append(mech, set)
		tomb, _ := sp.Tombstone("ex_1")
		by, _ := sp.IndexBy("order_id", `"ord-1"`)
		mech = append(mech, r, tomb, sp.Index(), sp.IndexReady(), sp.IndexCursor(), by)
		e, _ := sp.Execution("ex_1")
		state = append(state, e)
	}
	for _, k := range mech {
		if !IsMechanismKey("", k) {
			t.Errorf("%s is a mechanism key", k)
		}
	}
	for _, k := range append(state, "plaita:flow:f:1", "other:execution:lease:{x}", "plaita", "", "plaita:acme:flow_list") {
		if IsMechanismKey("", k) {
			t.Errorf("%s is not a mechanism key", k)
		}
	}
}

func FuzzIsMechanismKey(f *testing.F) {
	f.Add("plaita:execution:lease:{x}")
	f.Add("plaita:acme:execution:{x}")
	f.Fuzz(func(t *testing.T, key string) {
		mech := IsMechanismKey("", key)
		if id := MustFor("", "").ExecutionID(key); id != "" && mech {
			t.Fatalf("%q is both a state key and a mechanism key", key)
		}
	})
}

// FuzzIDAlphabetIsItsExpression: the byte loop accepts exactly what the id alphabet's regular
// expression does.
func FuzzIDAlphabetIsItsExpression(f *testing.F) {
	re := regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.@=+-]{0,199}$`)
	for _, s := range []string{"", "ex_1", "_", "a.", ".a", "-a", "a-b=c+d@e", "é", "a\x00", "a\n", strings.Repeat("z", 200), strings.Repeat("z", 201)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		if got, want := idAlphabet(id), re.MatchString(id); got != want {
			t.Fatalf("idAlphabet(%q) = %v, the expression says %v", id, got, want)
		}
	})
}

// FuzzValidID: an accepted id is plain ASCII from the id alphabet — it reads the same in a key
// and in the JSON of a record, cannot leave its hash tag or key segment, and is no flag.
func FuzzValidID(f *testing.F) {
	for _, s := range []string{"ex_1", "bad\xffid", "a:b", "{x}", "-rf", "evt-pay-1", "user@host=+.", strings.Repeat("a", 201)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		checkExecutionKeys(t, MustFor("", "acme"), id)
		if ValidID(id) != nil {
			return
		}
		if !utf8.ValidString(id) || len(id) == 0 || len(id) > MaxIDLen {
			t.Fatalf("accepted %q: not 1–%d bytes of valid UTF-8", id, MaxIDLen)
		}
		for _, r := range id {
			if r > unicode.MaxASCII || strings.ContainsRune("{}:*?[] \t\r\n\"\\/", r) || unicode.IsControl(r) {
				t.Fatalf("accepted %q with %q", id, r)
			}
		}
		if strings.ContainsRune(".-@=+", rune(id[0])) {
			t.Fatalf("accepted %q: starts with %q", id, id[0])
		}
		b, err := json.Marshal(id)
		var back string
		if err != nil || json.Unmarshal(b, &back) != nil || back != id {
			t.Fatalf("%q does not survive JSON: %s", id, b)
		}
		k, err := MustFor("", "acme").Event(id)
		if err != nil || k != "plaita:acme:event:"+id {
			t.Fatalf("Event(%q) = %q, %v", id, k, err)
		}
	})
}

// A correlated wait's bucket is one key segment whatever its path and value, under the
// tenant's prefix; the term (path, value) decides it, and no two terms here share one.
func TestSubscriptionBucketsAreOneSegmentPerTerm(t *testing.T) {
	s := MustFor("", "acme")
	seen := map[string]string{}
	for _, term := range [][2]string{{`["order_id"]`, `"A1"`}, {`["order_id"]`, `"A2"`}, {`["order_id"]`, "1"},
		{`["order_id"]`, `"1"`}, {`["a:b"]`, `"{x}"`}, {`["a","b"]`, `"c"`}, {`["a"]`, `"b\nc"`}, {`["a\n\"b\""]`, `c`}} {
		k, err := s.SubscriptionBucket("payment", term[0], term[1])
		if err != nil {
			t.Fatal(err)
		}
		rest, ok := strings.CutPrefix(k, "plaita:acme:subscription_bucket:payment:")
		if !ok || len(rest) != 32 || strings.ContainsAny(rest, ":{} ") {
			t.Errorf("%v: %s", term, k)
		}
		if prev, dup := seen[k]; dup {
			t.Errorf("%v and %s share %s", term, prev, k)
		}
		seen[k] = term[0] + " " + term[1]
	}
	if _, err := s.SubscriptionBucket("a:b", `["x"]`, "1"); err == nil {
		t.Error("a bad event type is accepted")
	}
	if k, _ := s.SubscriptionPaths("payment"); k != "plaita:acme:subscription_paths:payment" {
		t.Errorf("paths: %s", k)
	}
}

func TestIsOwnKey(t *testing.T) {
	sp, err := For("", "acme")
	if err != nil {
		t.Fatal(err)
	}
	own := []string{sp.Index(), "plaita:flow:queue", "plaita:tenant_status", "{plaita:flow:queue:dlq}:lettered:plaita:flow:queue:1-0", "plaita:execution:{ex_1}"}
	for _, k := range own {
		if !IsOwnKey("", k) {
			t.Errorf("%q is plaita's", k)
		}
	}
	for _, k := range []string{"plaita", "plaitax:1", "session:42", "{plaita}:x", "", "Plaita:flow:queue", "other:plaita:x"} {
		if IsOwnKey("", k) {
			t.Errorf("%q is not plaita's", k)
		}
	}
	if !IsOwnKey("t1", "t1:execution:index") || IsOwnKey("t1", "plaita:execution:index") {
		t.Error("another root")
	}
}

// ExecutionKeys builds, at once, the keys Execution, Tombstone and Mechanism build one by one,
// and refuses the ids they refuse with their error.
func TestExecutionKeysAreTheOnesBuiltOneByOne(t *testing.T) {
	ids := []string{"ex_1", "a", "9", "user@host=+.-x", strings.Repeat("z", MaxIDLen), "", "a:b", "{x}", "-rf", strings.Repeat("z", MaxIDLen+1)}
	for _, s := range []Space{MustFor("", ""), MustFor("", "acme"), MustFor("t1", "default"), MustFor("r", "b-2")} {
		for _, id := range ids {
			checkExecutionKeys(t, s, id)
		}
	}
}

func checkExecutionKeys(t *testing.T, s Space, id string) {
	t.Helper()
	got, err := s.ExecutionKeys(id)
	state, serr := s.Execution(id)
	if serr != nil {
		if err == nil || err.Error() != serr.Error() || !errors.Is(err, ErrBadID) || got != (ExecutionKeys{}) {
			t.Fatalf("%q: ExecutionKeys = %+v, %v; Execution's error is %v", id, got, err, serr)
		}
		return
	}
	if err != nil {
		t.Fatalf("%q: %v", id, err)
	}
	tomb, _ := s.Tombstone(id)
	want := ExecutionKeys{State: state, Tombstone: tomb}
	for fam, k := range map[string]*string{FamLease: &want.Lease, FamFenceGen: &want.FenceGen, FamCancel: &want.Cancel, FamNoFail: &want.NoFail} {
		*k, _ = s.Mechanism(fam, id)
	}
	if got != want {
		t.Fatalf("%q:\n got %+v\nwant %+v", id, got, want)
	}
}

func BenchmarkExecutionKeys(b *testing.B) {
	s := MustFor("", "")
	b.Run("at once", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := s.ExecutionKeys("ex_6ab8c24c0aef2bb204f9e89e"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("one by one", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = s.Execution("ex_6ab8c24c0aef2bb204f9e89e")
			_, _ = s.Tombstone("ex_6ab8c24c0aef2bb204f9e89e")
			for _, f := range []string{FamLease, FamFenceGen, FamCancel, FamNoFail} {
				_, _ = s.Mechanism(f, "ex_6ab8c24c0aef2bb204f9e89e")
			}
		}
	})
}
