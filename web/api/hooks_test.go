package api_test

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"plaita/control"
	"plaita/internal/keyring"
	"plaita/store/sqlite"
	"plaita/test/webtest"
	"plaita/web/api"
)

// Signed triggers over real HTTP: a start and an event signed with a tenant's contract key and
// with the global key are acted on; each way a request can be wrong gets its own answer — a bad
// signature, a stale or a future timestamp, a replayed message id (acted on once, answered as
// the first), another tenant's key, a retired key, the global key unset, a body altered by one
// byte, no signature — and every one is in the audit trail by its name.
func TestSignedTriggersOverHTTP(t *testing.T) {
	t.Parallel()
	global := []byte("global-contract-secret-0123456789")
	f := webtest.New(t, webtest.WithGlobalContract(global))
	off := webtest.New(t) // no global key
	for _, fx := range []*webtest.Fixture{f, off} {
		fx.Tenant(t, "acme")
		fx.Tenant(t, "beta")
		boss := fx.Admin("acme")
		boss.Want(t, http.StatusCreated, http.MethodPost, "/api/flows", map[string]any{"definition": map[string]any{
			"id": "order", "version": "1", "start": "done", "nodes": []any{map[string]any{"id": "done", "type": "end", "params": map[string]any{"output": "{{ INPUT.n }}"}}}}})
	}
	newKey := func(tenant string) (string, []byte) {
		t.Helper()
		var k control.ContractKeyCreated
		f.Key(f.APIKey(t, tenant, sqlite.RoleAdmin)).Want(t, http.StatusCreated, http.MethodPost, "/api/contract-keys", nil).Decode(t, &k)
		secret, err := control.ParseWebhookSecret(k.Secret)
		if err != nil {
			t.Fatal(err)
		}
		return k.ID, secret
	}
	// Contract keys are a tenant admin's: a viewer, and another tenant's admin, are refused.
	f.Key(f.APIKey(t, "acme", sqlite.RoleViewer)).Want(t, http.StatusForbidden, http.MethodPost, "/api/contract-keys", nil)
	f.Key(f.APIKey(t, "beta", sqlite.RoleAdmin)).Want(t, http.StatusForbidden, http.MethodGet, "/api/contract-keys", nil, api.HeaderTenant, "acme")
	acmeID, acme := newKey("acme")
	_, beta := newKey("beta")
	anon := f.Client(nil)
	now := time.Now()
	send := func(fx *webtest.Fixture, path, id string, at time.Time, body []byte, signature string) webtest.Resp {
		t.Helper()
		return fx.Client(nil).Do(t, http.MethodPost, path, body, "webhook-id", id, "webhook-timestamp", strconv.FormatInt(at.Unix(), 10),
			"webhook-signature", signature)
	}
	body := []byte(`{"n": 7}`)
	start := "/api/hooks/tenant/acme/start/order"

	r := send(f, start, "msg_1", now, body, control.Sign(acme, "msg_1", now, body))
	if r.Status != http.StatusOK || r.Body["execution_id"] == nil || r.Body["replayed"] != false || r.Body["key"] != acmeID {
		t.Fatalf("a valid start: %d %s", r.Status, r.Raw)
	}
	first := r.Body["execution_id"]
	// A rotation: two signatures, the first of a key nobody has; the second matches.
	r = send(f, start, "msg_2", now, body, control.Sign([]byte("not-a-key-of-anybody-00000000000"), "msg_2", now, body)+" "+control.Sign(acme, "msg_2", now, body))
	if r.Status != http.StatusOK {
		t.Fatalf("two signatures: %d %s", r.Status, r.Raw)
	}
	r = send(f, start, "msg_1", now, body, control.Sign(acme, "msg_1", now, body))
	if r.Status != http.StatusOK || r.Body["replayed"] != true || r.Body["execution_id"] != first {
		t.Fatalf("a replayed id: %d %s", r.Status, r.Raw)
	}
	r = send(f, "/api/hooks/global/acme/start/order", "msg_3", now, body, control.Sign(global, "msg_3", now, body))
	if r.Status != http.StatusOK || r.Body["key"] != "global:test" {
		t.Fatalf("the global key: %d %s", r.Status, r.Raw)
	}
	r = send(f, "/api/hooks/tenant/acme/events/paid", "msg_4", now, body, control.Sign(acme, "msg_4", now, body))
	if r.Status != http.StatusOK || r.Body["event_id"] != "hook_msg_4" {
		t.Fatalf("an event: %d %s", r.Status, r.Raw)
	}

	altered := []byte(`{"n": 8}`)
	for name, c := range map[string]struct {
		fx     *webtest.Fixture
		path   string
		at     time.Time
		body   []byte
		sig    string
		status int
		code   string
	}{
		"bad signature":    {f, start, now, body, control.Sign([]byte("wrong-secret-wrong-secret-wrong!!"), "m", now, body), 401, "hook_bad_signature"},
		"stale":            {f, start, now.Add(-10 * time.Minute), body, control.Sign(acme, "m", now.Add(-10*time.Minute), body), 401, "hook_stale"},
		"future":           {f, start, now.Add(10 * time.Minute), body, control.Sign(acme, "m", now.Add(10*time.Minute), body), 401, "hook_stale"},
		"another tenant":   {f, start, now, body, control.Sign(beta, "m", now, body), 401, "hook_bad_signature"},
		"altered body":     {f, start, now, altered, control.Sign(acme, "m", now, body), 401, "hook_bad_signature"},
		"global key off":   {off, "/api/hooks/global/acme/start/order", now, body, control.Sign(global, "m", now, body), 503, "hook_global_off"},
		"global as tenant": {f, start, now, body, control.Sign(global, "m", now, body), 401, "hook_bad_signature"},
		"malformed":        {f, start, now, body, "v1,not-base64!", 400, "hook_malformed"},
	} {
		r := send(c.fx, c.path, "m", c.at, c.body, c.sig)
		if p := r.Problem(t); r.Status != c.status || p.Code != c.code {
			t.Errorf("%s: %d %s, want %d %s", name, r.Status, r.Raw, c.status, c.code)
		}
	}
	if p := anon.Want(t, http.StatusUnauthorized, http.MethodPost, start, body).Problem(t); p.Code != "hook_unsigned" {
		t.Fatalf("no signature: %+v", p)
	}
	// A retired key signs nothing.
	f.Key(f.APIKey(t, "acme", sqlite.RoleAdmin)).Want(t, http.StatusNoContent, http.MethodDelete, "/api/contract-keys/"+acmeID, nil)
	if r := send(f, start, "msg_5", now, body, control.Sign(acme, "msg_5", now, body)); r.Status != http.StatusUnauthorized {
		t.Fatalf("a retired key: %d %s", r.Status, r.Raw)
	}
	reasons := map[string]bool{}
	for _, row := range f.AuditRows(t) {
		if row.Action == "hook.start" {
			reasons[row.Reason] = true
		}
	}
	for _, want := range []string{"", "hook_bad_signature", "hook_stale", "hook_malformed", "hook_unsigned"} {
		if !reasons[want] {
			t.Errorf("no hook.start audit row with reason %q: %v", want, reasons)
		}
	}
}

// A master key rotation over the API (a platform admin's, audited): with the new key first and
// the old one after it in the console's ring, every credential and contract key moves to the
// new key; then, with the old key dropped, the credentials still open and the contract key still
// verifies its sender's signatures.
func TestRotateKeyOverHTTP(t *testing.T) {
	t.Parallel()
	f := webtest.New(t)
	f.Tenant(t, "acme")
	admin := f.Key(f.APIKey(t, "acme", sqlite.RoleAdmin))
	admin.Want(t, http.StatusCreated, http.MethodPost, "/api/credentials", map[string]any{"name": "api", "value": "value-0123456789"})
	var k control.ContractKeyCreated
	admin.Want(t, http.StatusCreated, http.MethodPost, "/api/contract-keys", nil).Decode(t, &k)
	secret, _ := control.ParseWebhookSecret(k.Secret)
	f.Admin("acme").Want(t, http.StatusCreated, http.MethodPost, "/api/flows", map[string]any{"definition": map[string]any{
		"id": "order", "version": "1", "start": "done", "nodes": []any{map[string]any{"id": "done", "type": "end"}}}})

	next := keyring.NewKey()
	f.SetRing(keyring.Ring{Current: next, Older: []keyring.Key{f.CredentialsKey}})
	boss := f.Admin("")
	r := boss.Want(t, http.StatusOK, http.MethodPost, "/api/cluster/credentials/rotate-key?dry_run=true", nil)
	if c := r.Body["credentials"].(map[string]any); c["rewrapped"] != 1.0 || c["dry_run"] != true {
		t.Fatalf("dry run: %s", r.Raw)
	}
	r = boss.Want(t, http.StatusOK, http.MethodPost, "/api/cluster/credentials/rotate-key", nil)
	if c, ck := r.Body["credentials"].(map[string]any), r.Body["contract_keys"].(map[string]any); c["rewrapped"] != 1.0 || ck["rewrapped"] != 1.0 {
		t.Fatalf("rotation: %s", r.Raw)
	}
	if e, ok := f.Audited(t, "credentials.rotate_key"); !ok || e.Outcome != "allow" {
		t.Fatalf("audit: %+v %v", e, ok)
	}
	f.SetRing(keyring.Ring{Current: next})
	if r := admin.Want(t, http.StatusOK, http.MethodGet, "/api/credentials/api", nil); r.Body["key_id"] != next.ID() {
		t.Fatalf("after the rotation: %s", r.Raw)
	}
	now := time.Now()
	body := []byte(`{}`)
	if r := f.Client(nil).Do(t, http.MethodPost, "/api/hooks/tenant/acme/start/order", body, "webhook-id", "m1",
		"webhook-timestamp", strconv.FormatInt(now.Unix(), 10), "webhook-signature", control.Sign(secret, "m1", now, body)); r.Status != http.StatusOK {
		t.Fatalf("a signed start after the rotation: %d %s", r.Status, r.Raw)
	}
}
