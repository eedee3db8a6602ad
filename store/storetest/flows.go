package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"plaita/model"
	"plaita/store"
	"plaita/store/keys"
)

// FlowsBackend is one driver of the published flows under the contract.
type FlowsBackend struct {
	Name string
	// Open makes a new, empty flow store for one case (cases run in parallel).
	Open func(t *testing.T) *store.Flows
}

// FlowsContract runs the published flows' cases against b: what the console, the CLI, the
// workers, the filter and the scheduler rely on — a version is published once with one
// definition and read back byte for byte, the latest is the most recently published, the
// flows page newest first with cursors, a reserved key is never written, a restore writes
// back only what is missing, and tenants are apart.
func FlowsContract(t *testing.T, b FlowsBackend) {
	runCases(t, b.Name, b.Open, []namedCase[*store.Flows]{
		{"PublishedThenRead", publishedThenRead},
		{"PublishedOnceWithOneDefinition", publishedOnceWithOneDefinition},
		{"LatestFollowsTheNewest", latestFollowsTheNewest},
		{"FlowsPageByCursor", flowsPageByCursor},
		{"ReservedKeyRefused", reservedKeyRefused},
		{"RestoreWritesWhatIsMissing", restoreWritesWhatIsMissing},
		{"TenantsApart", tenantsApart},
	})
}

// ft0 is the contract's publication clock.
var ft0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// sameBytes is the caller's comparison of a stored definition (the console compares flow
// hashes; the contract compares bytes).
func sameBytes(def []byte) func([]byte) (bool, error) {
	return func(stored []byte) (bool, error) { return bytes.Equal(stored, def), nil }
}

func mustPublish(t *testing.T, f *store.Flows, tenant, flowID, version string, def []byte, at time.Time) store.PublishResult {
	t.Helper()
	r, err := f.Publish(eventsCtx(t), tenant, flowID, version, def, at, sameBytes(def))
	if err != nil {
		t.Fatalf("publish %s %s: %v", flowID, version, err)
	}
	return r
}

// notFound checks err is ErrFlowNotFound and permanent.
func notFound(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, store.ErrFlowNotFound) || !errors.Is(err, store.ErrNotFound) || model.IsTransient(err) {
		t.Fatalf("%s: %v (transient %v), want ErrFlowNotFound, permanent", what, err, model.IsTransient(err))
	}
}

func versionsOf(t *testing.T, f *store.Flows, tenant, flowID string) []store.FlowVersion {
	t.Helper()
	vs, err := f.Versions(eventsCtx(t), tenant, flowID)
	if err != nil {
		t.Fatalf("versions of %s: %v", flowID, err)
	}
	return vs
}

// summary is the tenant's listing of flowID (ok false: not listed).
func summary(t *testing.T, f *store.Flows, tenant, flowID string) (store.FlowSummary, bool) {
	t.Helper()
	items, err := f.List(eventsCtx(t), tenant, store.MaxFlowList)
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range items {
		if it.FlowID == flowID {
			return it, true
		}
	}
	return store.FlowSummary{}, false
}

func publishedThenRead(t *testing.T, f *store.Flows) {
	c := eventsCtx(t)
	_, err := f.Get(c, "acme", "order", "1")
	notFound(t, "get before publishing", err)
	_, err = f.Latest(c, "acme", "order")
	notFound(t, "latest before publishing", err)
	_, err = f.Versions(c, "acme", "order")
	notFound(t, "versions before publishing", err)
	if items, err := f.List(c, "acme", 10); err != nil || len(items) != 0 {
		t.Fatalf("list before publishing: %+v %v", items, err)
	}
	// Byte for byte: spacing, key order and escapes are kept, not re-encoded.
	def := []byte("{\"version\": \"1\",  \"id\":\"order\", \"note\":\"caf\\u00e9 \xc3\xa9\"}\n")
	if r := mustPublish(t, f, "acme", "order", "1", def, ft0); r != store.Published {
		t.Fatalf("first publish: %v, want published", r)
	}
	if got, err := f.Get(c, "acme", "order", "1"); err != nil || !bytes.Equal(got, def) {
		t.Fatalf("get: %q %v, want %q", got, err, def)
	}
	if v, err := f.Latest(c, "acme", "order"); err != nil || v != "1" {
		t.Fatalf("latest: %q %v", v, err)
	}
	if vs := versionsOf(t, f, "acme", "order"); len(vs) != 1 || vs[0].Version != "1" || !vs[0].PublishedAt.Equal(ft0) {
		t.Fatalf("versions: %+v", vs)
	}
	if s, ok := summary(t, f, "acme", "order"); !ok || s.Latest != "1" || s.Versions != 1 || !s.PublishedAt.Equal(ft0) {
		t.Fatalf("listed: %+v %v", s, ok)
	}
	_, err = f.Get(c, "acme", "order", "2")
	notFound(t, "an unpublished version of a published flow", err)
	if _, err := f.Publish(c, "acme", "order", "bad:version", def, ft0, sameBytes(def)); model.ClassOf(err) != model.Invalid {
		t.Fatalf("a version with ':': %v, want an invalid name", err)
	}
	_, err = f.Get(c, "acme", "order", "bad:version")
	notFound(t, "get of the refused version", err)
}

func publishedOnceWithOneDefinition(t *testing.T, f *store.Flows) {
	c := eventsCtx(t)
	v1, other := []byte(`{"id":"ship","n":1}`), []byte(`{"id":"ship","n":2}`)
	mustPublish(t, f, "acme", "ship", "1", v1, ft0)
	// The same definition again, later: nothing moves — not the version's time, not the flow's.
	if r := mustPublish(t, f, "acme", "ship", "1", v1, ft0.Add(time.Hour)); r != store.AlreadyPublished {
		t.Fatalf("the same definition again: %v, want already_published", r)
	}
	if vs := versionsOf(t, f, "acme", "ship"); len(vs) != 1 || !vs[0].PublishedAt.Equal(ft0) {
		t.Fatalf("versions after a republication: %+v, want one at %s", vs, ft0)
	}
	if s, ok := summary(t, f, "acme", "ship"); !ok || !s.PublishedAt.Equal(ft0) || s.Versions != 1 {
		t.Fatalf("listed after a republication: %+v %v, want its first publication's time", s, ok)
	}
	// Another definition under the version is refused; the caller is shown the stored one.
	var shown []byte
	_, err := f.Publish(c, "acme", "ship", "1", other, ft0.Add(2*time.Hour), func(stored []byte) (bool, error) {
		shown = stored
		return bytes.Equal(stored, other), nil
	})
	if !errors.Is(err, store.ErrVersionConflict) || !errors.Is(err, store.ErrInvalid) || model.IsTransient(err) {
		t.Fatalf("another definition: %v, want ErrVersionConflict, permanent", err)
	}
	if !bytes.Equal(shown, v1) {
		t.Fatalf("the comparison was shown %q, want the stored %q", shown, v1)
	}
	if got, err := f.Get(c, "acme", "ship", "1"); err != nil || !bytes.Equal(got, v1) {
		t.Fatalf("after the refusal: %q %v, want the first definition", got, err)
	}
	if s, ok := summary(t, f, "acme", "ship"); !ok || !s.PublishedAt.Equal(ft0) {
		t.Fatalf("listed after the refusal: %+v %v", s, ok)
	}
	// A comparison that cannot read the stored definition is its error, not a conflict.
	broken := errors.New("unreadable")
	if _, err := f.Publish(c, "acme", "ship", "1", other, ft0, func([]byte) (bool, error) { return false, broken }); !errors.Is(err, broken) ||
		errors.Is(err, store.ErrVersionConflict) {
		t.Fatalf("a failed comparison: %v, want its error", err)
	}
}

func latestFollowsTheNewest(t *testing.T, f *store.Flows) {
	c := eventsCtx(t)
	mustPublish(t, f, "acme", "bill", "1", []byte(`{"v":1}`), ft0)
	mustPublish(t, f, "acme", "bill", "2", []byte(`{"v":2}`), ft0.Add(time.Second))
	if v, err := f.Latest(c, "acme", "bill"); err != nil || v != "2" {
		t.Fatalf("latest after 2: %q %v", v, err)
	}
	// Republishing an old version does not make it the latest.
	mustPublish(t, f, "acme", "bill", "1", []byte(`{"v":1}`), ft0.Add(time.Hour))
	if v, err := f.Latest(c, "acme", "bill"); err != nil || v != "2" {
		t.Fatalf("latest after republishing 1: %q %v", v, err)
	}
	// The latest is the newest publication time, not the last call: a version published with
	// an earlier time (a clock behind) is not the latest.
	mustPublish(t, f, "acme", "bill", "0.9", []byte(`{"v":0.9}`), ft0.Add(time.Second/2))
	if v, err := f.Latest(c, "acme", "bill"); err != nil || v != "2" {
		t.Fatalf("latest after an earlier-dated version: %q %v", v, err)
	}
	// Two versions of the same millisecond: the greater name (byte order) is the newer.
	at := ft0.Add(time.Minute)
	mustPublish(t, f, "acme", "bill", "3a", []byte(`{"v":"3a"}`), at)
	mustPublish(t, f, "acme", "bill", "3B", []byte(`{"v":"3B"}`), at)
	if v, err := f.Latest(c, "acme", "bill"); err != nil || v != "3a" {
		t.Fatalf("latest of a tie: %q %v, want 3a (\"3a\" > \"3B\" in byte order)", v, err)
	}
	var got []string
	for _, v := range versionsOf(t, f, "acme", "bill") {
		got = append(got, v.Version+"@"+v.PublishedAt.Sub(ft0).String())
	}
	if want := []string{"3a@1m0s", "3B@1m0s", "2@1s", "0.9@500ms", "1@0s"}; !slices.Equal(got, want) {
		t.Fatalf("versions %v, want %v", got, want)
	}
	if s, ok := summary(t, f, "acme", "bill"); !ok || s.Latest != "3a" || s.Versions != 5 || !s.PublishedAt.Equal(at) {
		t.Fatalf("listed: %+v %v", s, ok)
	}
}

func flowsPageByCursor(t *testing.T, f *store.Flows) {
	c := eventsCtx(t)
	// f0..f4 in the same millisecond, then f5 and f6 later; f6 has two versions.
	for i, at := range []time.Time{ft0, ft0, ft0, ft0, ft0, ft0.Add(time.Second), ft0.Add(2 * time.Second)} {
		id := fmt.Sprintf("f%d", i)
		mustPublish(t, f, "acme", id, "1", []byte(`{"id":"`+id+`"}`), at)
	}
	mustPublish(t, f, "acme", "f6", "2", []byte(`{"id":"f6","v":2}`), ft0.Add(3*time.Second))
	pages := func() ([]string, int) {
		var seen []string
		cursor, n := "", 0
		for ; n < 10; n++ {
			p, err := f.Page(c, "acme", cursor, 2)
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Items) > 2 {
				t.Fatalf("a page of 2 has %d items", len(p.Items))
			}
			for _, it := range p.Items {
				seen = append(seen, fmt.Sprintf("%s:%s/%d", it.FlowID, it.Latest, it.Versions))
			}
			if cursor = p.NextCursor; cursor == "" {
				return seen, n + 1
			}
		}
		t.Fatalf("no last page after %d: %v", n, seen)
		return nil, 0
	}
	seen, n := pages()
	if want := []string{"f6:2/2", "f5:1/1", "f4:1/1", "f3:1/1", "f2:1/1", "f1:1/1", "f0:1/1"}; !slices.Equal(seen, want) || n != 4 {
		t.Fatalf("%d pages %v, want 4 pages %v", n, seen, want)
	}
	// A new version moves its flow to the front.
	mustPublish(t, f, "acme", "f2", "2", []byte(`{"id":"f2","v":2}`), ft0.Add(time.Hour))
	if seen, _ = pages(); !slices.Equal(seen, []string{"f2:2/2", "f6:2/2", "f5:1/1", "f4:1/1", "f3:1/1", "f1:1/1", "f0:1/1"}) {
		t.Fatalf("pages after f2 was published again: %v", seen)
	}
	// A cursor goes on after its flow: one taken in the tie (after f4) gives f3 next.
	first, err := f.Page(c, "acme", "", 4)
	if err != nil || len(first.Items) != 4 || first.Items[3].FlowID != "f4" || first.NextCursor == "" {
		t.Fatalf("first page of 4: %+v %v", first, err)
	}
	rest, err := f.Page(c, "acme", first.NextCursor, 10)
	if err != nil || len(rest.Items) != 3 || rest.Items[0].FlowID != "f3" || rest.NextCursor != "" {
		t.Fatalf("the rest: %+v %v", rest, err)
	}
	if items, err := f.List(c, "acme", 3); err != nil || len(items) != 3 || items[0].FlowID != "f2" || !items[0].PublishedAt.Equal(ft0.Add(time.Hour)) {
		t.Fatalf("list of 3: %+v %v", items, err)
	}
	if _, err := f.Page(c, "acme", "forged", 2); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("a forged cursor: %v, want ErrInvalid", err)
	}
}

func reservedKeyRefused(t *testing.T, f *store.Flows) {
	c := eventsCtx(t)
	sp, err := keys.For(f.Root(), "")
	if err != nil {
		t.Fatal(err)
	}
	// PLAITA_QUEUE_NAME=<root>:flow:jobs puts its dead letters at the key of flow jobs, version dlq.
	f.Reserve(sp.Flow("jobs", "dlq"))
	def := []byte(`{"id":"jobs"}`)
	_, err = f.Publish(c, "", "jobs", "dlq", def, ft0, sameBytes(def))
	if !errors.Is(err, store.ErrReservedFlowKey) || !errors.Is(err, store.ErrInvalid) || model.IsTransient(err) {
		t.Fatalf("publish at a reserved key: %v, want ErrReservedFlowKey, permanent", err)
	}
	_, err = f.Get(c, "", "jobs", "dlq")
	notFound(t, "get of the refused version", err)
	_, err = f.Latest(c, "", "jobs")
	notFound(t, "latest of the refused flow", err)
	out := f.Restore(c, []store.FlowRestore{{Tenant: "", FlowID: "jobs", Version: "dlq", Definition: def, PublishedAt: ft0}})
	if len(out) != 1 || out[0].Written || !errors.Is(out[0].Err, store.ErrReservedFlowKey) {
		t.Fatalf("restore at a reserved key: %+v", out)
	}
	_, err = f.Get(c, "", "jobs", "dlq")
	notFound(t, "get after the refused restore", err)
	if items, err := f.List(c, "", 10); err != nil || len(items) != 0 {
		t.Fatalf("list after the refusals: %+v %v", items, err)
	}
	// Only the reserved key is refused: another version of the flow, and the same version in
	// another tenant (other keys), are published.
	if r := mustPublish(t, f, "", "jobs", "v1", def, ft0); r != store.Published {
		t.Fatalf("another version: %v", r)
	}
	if r := mustPublish(t, f, "acme", "jobs", "dlq", def, ft0); r != store.Published {
		t.Fatalf("the version in another tenant: %v", r)
	}
}

func restoreWritesWhatIsMissing(t *testing.T, f *store.Flows) {
	c := eventsCtx(t)
	if out := f.Restore(c, nil); len(out) != 0 {
		t.Fatalf("an empty restore: %+v", out)
	}
	stored := []byte(`{"id":"pay","v":1}`)
	mustPublish(t, f, "acme", "pay", "1", stored, ft0.Add(time.Minute))
	items := []store.FlowRestore{
		// 0: missing, in an existing flow, older than its last publication.
		{Tenant: "acme", FlowID: "pay", Version: "0", Definition: []byte(`{"id":"pay","v":0}`), PublishedAt: ft0},
		// 1: stored: left as it is, another definition or not, its time kept.
		{Tenant: "acme", FlowID: "pay", Version: "1", Definition: []byte(`{"id":"pay","v":"other"}`), PublishedAt: ft0},
		// 2: refused before anything is sent: the version is not a key name.
		{Tenant: "acme", FlowID: "pay", Version: "a:b", Definition: []byte(`{}`), PublishedAt: ft0},
		// 3: refused: the tenant is not a slug.
		{Tenant: "Not A Slug", FlowID: "pay", Version: "1", Definition: []byte(`{}`), PublishedAt: ft0},
		// 4: missing, a flow of its own, in another tenant.
		{Tenant: "globex", FlowID: "ask", Version: "7", Definition: []byte(`{"id":"ask"}`), PublishedAt: ft0.Add(2 * time.Minute)},
		// 5: refused: the flow id is not a key name.
		{Tenant: "acme", FlowID: "a b", Version: "1", Definition: []byte(`{}`), PublishedAt: ft0},
	}
	out := f.Restore(c, items)
	if len(out) != len(items) {
		t.Fatalf("%d outcomes for %d items", len(out), len(items))
	}
	for i, want := range []bool{true, false, false, false, true, false} {
		if out[i].Written != want {
			t.Errorf("item %d written %v, want %v (%v)", i, out[i].Written, want, out[i].Err)
		}
	}
	for _, i := range []int{0, 1, 4} {
		if out[i].Err != nil {
			t.Errorf("item %d: %v", i, out[i].Err)
		}
	}
	for _, i := range []int{2, 3, 5} {
		if model.ClassOf(out[i].Err) != model.Invalid {
			t.Errorf("item %d: %v, want an invalid name, permanent", i, out[i].Err)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	if got, err := f.Get(c, "acme", "pay", "0"); err != nil || string(got) != `{"id":"pay","v":0}` {
		t.Fatalf("the restored version: %q %v", got, err)
	}
	if got, err := f.Get(c, "acme", "pay", "1"); err != nil || !bytes.Equal(got, stored) {
		t.Fatalf("the stored version after a restore: %q %v, want it unchanged", got, err)
	}
	// The restored version takes its own time; the older restore keeps the flow's place and
	// its latest.
	var got []string
	for _, v := range versionsOf(t, f, "acme", "pay") {
		got = append(got, v.Version+"@"+v.PublishedAt.Sub(ft0).String())
	}
	if want := []string{"1@1m0s", "0@0s"}; !slices.Equal(got, want) {
		t.Fatalf("versions after the restore %v, want %v", got, want)
	}
	if s, ok := summary(t, f, "acme", "pay"); !ok || !s.PublishedAt.Equal(ft0.Add(time.Minute)) || s.Latest != "1" || s.Versions != 2 {
		t.Fatalf("listed after the restore: %+v %v, want its place kept", s, ok)
	}
	if s, ok := summary(t, f, "globex", "ask"); !ok || !s.PublishedAt.Equal(ft0.Add(2*time.Minute)) || s.Latest != "7" {
		t.Fatalf("the restored flow: %+v %v", s, ok)
	}
	// A restore newer than the flow's last publication moves the flow, and is its latest.
	late := store.FlowRestore{Tenant: "acme", FlowID: "pay", Version: "2", Definition: []byte(`{"id":"pay","v":2}`), PublishedAt: ft0.Add(time.Hour)}
	if out := f.Restore(c, []store.FlowRestore{late}); len(out) != 1 || !out[0].Written || out[0].Err != nil {
		t.Fatalf("a newer restore: %+v", out)
	}
	if s, ok := summary(t, f, "acme", "pay"); !ok || !s.PublishedAt.Equal(ft0.Add(time.Hour)) || s.Latest != "2" || s.Versions != 3 {
		t.Fatalf("listed after a newer restore: %+v %v", s, ok)
	}
	// Restoring it again writes nothing.
	if out := f.Restore(c, []store.FlowRestore{late}); len(out) != 1 || out[0].Written || out[0].Err != nil {
		t.Fatalf("the same restore again: %+v", out)
	}
}

func tenantsApart(t *testing.T, f *store.Flows) {
	c := eventsCtx(t)
	a, g := []byte(`{"id":"order","tenant":"acme"}`), []byte(`{"id":"order","tenant":"globex"}`)
	mustPublish(t, f, "acme", "order", "1", a, ft0)
	for _, tenant := range []string{"", "default", "globex"} {
		_, err := f.Get(c, tenant, "order", "1")
		notFound(t, "get in "+tenant, err)
		_, err = f.Latest(c, tenant, "order")
		notFound(t, "latest in "+tenant, err)
		_, err = f.Versions(c, tenant, "order")
		notFound(t, "versions in "+tenant, err)
		if items, err := f.List(c, tenant, 10); err != nil || len(items) != 0 {
			t.Fatalf("list in %q: %+v %v", tenant, items, err)
		}
	}
	// The same flow and version in another tenant is another publication, not a conflict.
	if r := mustPublish(t, f, "globex", "order", "1", g, ft0.Add(time.Second)); r != store.Published {
		t.Fatalf("globex's publication: %v", r)
	}
	mustPublish(t, f, "globex", "order", "2", g, ft0.Add(2*time.Second))
	mustPublish(t, f, "", "refund", "1", a, ft0)
	for tenant, want := range map[string][]byte{"acme": a, "globex": g} {
		if got, err := f.Get(c, tenant, "order", "1"); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s's definition: %q %v", tenant, got, err)
		}
	}
	if v, err := f.Latest(c, "acme", "order"); err != nil || v != "1" {
		t.Fatalf("acme's latest: %q %v (globex's version 2 leaked?)", v, err)
	}
	if s, ok := summary(t, f, "acme", "order"); !ok || s.Versions != 1 || !s.PublishedAt.Equal(ft0) {
		t.Fatalf("acme's listing: %+v %v", s, ok)
	}
	for tenant, want := range map[string]string{"acme": "order", "globex": "order", "default": "refund"} {
		items, err := f.List(c, tenant, 10)
		if err != nil || len(items) != 1 || items[0].FlowID != want {
			t.Fatalf("%s's list: %+v %v, want only %s", tenant, items, err, want)
		}
	}
	if _, err := f.Get(c, "Not A Slug", "order", "1"); !errors.Is(err, keys.ErrBadTenant) {
		t.Fatalf("a bad tenant: %v", err)
	}
}
