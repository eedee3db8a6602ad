package web

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"plaita/engine/state"
	"plaita/store/sqlite"
)

// The console attacked as an outsider would: what an anonymous caller, a viewer or an editor
// can make it do, read or answer. Each test holds one of the breaks the attacks found.

// stalledBody is a request body that sends head and then nothing more until the test ends: a
// server that answers while it is stalled did not wait for the rest of the body.
func stalledBody(t *testing.T, head string) io.Reader {
	pr, pw := io.Pipe()
	go func() {
		_, _ = pw.Write([]byte(head))
		<-t.Context().Done()
		pw.Close()
	}()
	return pr
}

// postStalled posts a body that claims size bytes, sends head and stalls; it returns the
// answer, which must come without the rest of the body.
func postStalled(t *testing.T, hc *http.Client, target, contentType, head string, size int64, extra ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, target, stalledBody(t, head))
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = size
	req.Header.Set("Content-Type", contentType)
	for i := 0; i+1 < len(extra); i += 2 {
		req.Header.Set(extra[i], extra[i+1])
	}
	res, err := hc.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", target, err)
	}
	t.Cleanup(func() { res.Body.Close() })
	return res
}

// TestPagesAnswerAnAnonymousCallerOnlyTheLogin: every page, fragment and form of the UI sends a
// caller without a session to log in — before its body is read — and does no work for them
// (the attack: an anonymous POST /ui/flows/validate of a 195 KB invalid definition answered
// 200 with a 1.9 MB page; 8 MB took 11.6 s and 815 MB).
func TestPagesAnswerAnAnonymousCallerOnlyTheLogin(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	anon := newJarClient()
	seen := 0
	for _, r := range f.srv.echo.Routes() {
		if !strings.HasPrefix(r.Path, "/ui") || r.Path == uiLoginPath || strings.HasPrefix(r.Path, "/ui/static") {
			continue
		}
		path := regexp.MustCompile(`:[a-z_]+|\*`).ReplaceAllString(r.Path, "x")
		req, _ := http.NewRequest(r.Method, f.url+path, strings.NewReader("definition=%7B"))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		res, err := anon.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusSeeOther || !strings.HasPrefix(res.Header.Get("Location"), "/ui/login?next=") || len(body) > 512 {
			t.Errorf("anonymous %s %s: %d to %q, %d bytes: want a redirect to the login page", r.Method, path, res.StatusCode, res.Header.Get("Location"), len(body))
		}
		seen++
	}
	if seen < 30 {
		t.Fatalf("only %d UI routes walked", seen)
	}
	// An htmx request is told to go to the login page whole.
	req, _ := http.NewRequest(http.MethodPost, f.url+"/ui/flows/validate", strings.NewReader("definition=%7B"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("HX-Request", "true")
	res, err := anon.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(res.Header.Get("HX-Redirect"), "/ui/login") {
		t.Fatalf("anonymous htmx validate: %d %q", res.StatusCode, res.Header.Get("HX-Redirect"))
	}
	// The attack itself: an 8 MB definition whose first 195 KB are sent, then nothing. The answer
	// comes while the body is stalled: it was never read.
	bad := "definition=" + url.QueryEscape("{\n"+strings.Repeat("  \"k\": [1, 2, 3,,\n", 10000))
	res = postStalled(t, anon, f.url+"/ui/flows/validate", "application/x-www-form-urlencoded", bad[:195<<10], 8<<20)
	body, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if res.StatusCode != http.StatusSeeOther || len(body) > 512 {
		t.Fatalf("anonymous 8 MB validate: %d, %d bytes", res.StatusCode, len(body))
	}
}

// TestPagesBoundTheirBodies: a page's body is bounded as the API's are — the login page does
// not read a 24 MB multipart body whole, a body over the bound is a 413 with or without a
// Content-Length, and an editor's form over its page's bound too.
func TestPagesBoundTheirBodies(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	anon := newJarClient()
	head := "--b\r\nContent-Disposition: form-data; name=\"login\"\r\n\r\n" + strings.Repeat("x", 64<<10)
	res := postStalled(t, anon, f.url+"/ui/login", "multipart/form-data; boundary=b", head, 24<<20)
	if res.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("a 24 MB login form: %d, want 413", res.StatusCode)
	}
	// Without a Content-Length (chunked), the bound is found while the form is read.
	req, _ := http.NewRequest(http.MethodPost, f.url+"/ui/login", io.MultiReader(strings.NewReader("login="), strings.NewReader(strings.Repeat("a", 64<<10))))
	req.ContentLength = -1
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if res, err := anon.Do(req); err != nil || res.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("a 64 KB chunked login form: %v %v, want 413", res, err)
	} else {
		res.Body.Close()
	}
	ed := f.uiUser(t, "edna", "default", sqlite.RoleEditor)
	limit := uiBodyLimit("/ui/flows/validate")
	res = postStalled(t, ed.hc, f.url+"/ui/flows/validate", "application/x-www-form-urlencoded", "csrf="+ed.csrf+"&definition=", limit+1)
	if res.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("an editor's validate over %d bytes: %d, want 413", limit, res.StatusCode)
	}
	res = postStalled(t, ed.hc, f.url+"/ui/events/publish", "application/x-www-form-urlencoded", "csrf="+ed.csrf+"&data=", uiBodyLimit("/ui/events/publish")+1)
	if res.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("an event's form over its bound: %d, want 413", res.StatusCode)
	}
}

// TestValidatePageGrowsWithItsProblems: the editor's check of a long definition shows the lines
// around its problems, not the whole text again in markup (an invalid 195 KB definition was a
// 1.9 MB page), and a definition on one long line is cut.
func TestValidatePageGrowsWithItsProblems(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ed := f.uiUser(t, "edna", "default", sqlite.RoleEditor)
	def := "{\n" + strings.Repeat("  \"padding\": \"abcdefghij\",\n", 7500) + "  \"oops\": ,\n}"
	if len(def) < 190<<10 {
		t.Fatalf("the definition is only %d bytes", len(def))
	}
	res, body := ed.post(t, "/ui/flows/validate", url.Values{"definition": {def}}, true)
	if res.StatusCode != http.StatusOK || len(body) > 32<<10 {
		t.Fatalf("validate of %d bytes: %d, a page of %d bytes", len(def), res.StatusCode, len(body))
	}
	mustHave(t, "the check", body, `id="check-problems"`, `data-goto-line="7502"`, `id="line-7502"`, `class="l gap"`)
	oneLine := `{"id": "x", "description": "` + strings.Repeat("y", 150<<10) + `", "nodes": [,]}`
	_, body = ed.post(t, "/ui/flows/validate", url.Values{"definition": {oneLine}}, true)
	if len(body) > 32<<10 || !strings.Contains(body, "not valid JSON at line 1") {
		t.Fatalf("a one-line definition of %d bytes: a page of %d bytes", len(oneLine), len(body))
	}
}

// TestLoginFormCarriesACSRFToken: a login posted without the login page's token — another
// site's form, with neither Origin nor Referer — is refused and starts no session.
func TestLoginFormCarriesACSRFToken(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	if _, err := f.db.CreateUser(context.Background(), sqlite.NewUser{Login: "sam", Password: "password-sam"}); err != nil {
		t.Fatal(err)
	}
	c := &uiClient{f: f, hc: newJarClient()}
	res, body := c.post(t, "/ui/login", url.Values{"login": {"sam"}, "password": {"password-sam"}}, false)
	if res.StatusCode != http.StatusForbidden || hasCookie(res, SessionCookie) || !strings.Contains(body, "log in again") {
		t.Fatalf("a login without the form's token: %d, cookies %v", res.StatusCode, res.Header.Values("Set-Cookie"))
	}
	// A token of another browser's page (not this browser's cookie) is refused too.
	other := &uiClient{f: f, hc: newJarClient()}
	_, page := other.get(t, "/ui/login", http.StatusOK)
	token := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(page)[1]
	fresh := &uiClient{f: f, hc: newJarClient()}
	res, _ = fresh.post(t, "/ui/login", url.Values{"login": {"sam"}, "password": {"password-sam"}, "csrf": {token}}, false)
	if res.StatusCode != http.StatusForbidden || hasCookie(res, SessionCookie) {
		t.Fatalf("a login with another browser's token: %d", res.StatusCode)
	}
	if res, _ := c.logIn(t, "sam", "password-sam"); res.StatusCode != http.StatusSeeOther || !hasCookie(res, SessionCookie) {
		t.Fatalf("a login from the page: %d", res.StatusCode)
	}
}

func hasCookie(res *http.Response, name string) bool {
	for _, c := range res.Cookies() {
		if c.Name == name && c.MaxAge >= 0 && c.Value != "" {
			return true
		}
	}
	return false
}

// TestCookiesAndHeaders: behind a TLS proxy every cookie is Secure (the tenant cookie was not);
// every API answer says nosniff and no-store; the static files list no directory.
func TestCookiesAndHeaders(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	if _, err := f.db.CreateUser(context.Background(), sqlite.NewUser{Login: "sam", Password: "password-sam"}); err != nil {
		t.Fatal(err)
	}
	hc := newJarClient()
	get := func(path string) *http.Response {
		req, _ := http.NewRequest(http.MethodGet, f.url+path, nil)
		req.Header.Set("X-Forwarded-Proto", "https")
		res, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res
	}
	page := get("/ui/login")
	var token string
	for _, ck := range page.Cookies() {
		token = ck.Value
		if !ck.Secure {
			t.Errorf("behind https, the login page's cookie %s is not Secure", ck.Name)
		}
	}
	form := url.Values{"login": {"sam"}, "password": {"password-sam"}, "csrf": {token}}
	req, _ := http.NewRequest(http.MethodPost, f.url+"/ui/login", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Forwarded-Proto", "https")
	res, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	names := map[string]bool{}
	for _, ck := range res.Cookies() {
		names[ck.Name] = true
		if !ck.Secure {
			t.Errorf("behind https, the login's cookie %s is not Secure", ck.Name)
		}
	}
	if !names[uiTenantCookie] || !names[SessionCookie] {
		t.Fatalf("the login set %v", names)
	}

	boss := f.admin("")
	for _, path := range []string{"/api/session", "/api/flows", "/api/tenants", "/health", "/readyz", "/api/openapi.json", "/api/no-such-route"} {
		for _, c := range []*client{f.client(nil), boss} {
			r := c.do(t, http.MethodGet, path, nil)
			if r.header.Get("X-Content-Type-Options") != "nosniff" || r.header.Get("Cache-Control") != "no-store" {
				t.Errorf("GET %s (%d): X-Content-Type-Options %q, Cache-Control %q", path, r.status,
					r.header.Get("X-Content-Type-Options"), r.header.Get("Cache-Control"))
			}
		}
	}
	for path, want := range map[string]int{"/ui/static/": 404, "/ui/static/htmx/": 404, "/ui/static/htmx": 404, "/ui/static/app.js": 200} {
		if res := get(path); res.StatusCode != want {
			t.Errorf("GET %s: %d, want %d", path, res.StatusCode, want)
		}
	}
}

// TestPublicHealthNamesNoTenantHostOrPath: GET /health answers anyone, so it names no tenant (it
// listed every one, undoing the uniform not_a_member), no Redis host or port; the admin key
// reads the whole report.
func TestPublicHealthNamesNoTenantHostOrPath(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.tenant(t, "secret-acme")
	f.admin("").want(t, http.StatusOK, http.MethodPost, "/api/cluster/tenant-status/reconcile", nil)
	r := f.client(nil).want(t, http.StatusOK, http.MethodGet, "/health", nil)
	if strings.Contains(string(r.raw), "secret-acme") {
		t.Fatalf("the public /health names a tenant: %s", r.raw)
	}
	var h HealthReport
	r.decode(t, &h)
	if h.TenantStatus == nil || h.TenantStatus.Last == nil || h.TenantStatus.Last.PublishedCount < 2 || !h.TenantStatus.Last.OK {
		t.Fatalf("the public /health lost the reconcile's counts: %s", r.raw)
	}
	if r := f.admin("").want(t, http.StatusOK, http.MethodGet, "/health", nil); !strings.Contains(string(r.raw), "secret-acme") {
		t.Fatalf("the admin's /health lacks the tenants: %s", r.raw)
	}

	down := errors.New("connect to redis at 10.9.8.7:6390: dial tcp 10.9.8.7:6390: connect: connection refused")
	for name, opt := range map[string]func(*fixtureOptions){"local": withLocal(), "no-redis": withoutRedis()} {
		f := newFixture(t, opt, unreachable(down))
		r := f.client(nil).want(t, http.StatusOK, http.MethodGet, "/health", nil)
		for _, leak := range []string{"10.9.8.7", "6390", f.db.Location().Path} {
			if strings.Contains(string(r.raw), leak) {
				t.Errorf("%s: the public /health names %q: %s", name, leak, r.raw)
			}
		}
		if r := f.admin("").want(t, http.StatusOK, http.MethodGet, "/health", nil); !strings.Contains(string(r.raw), "10.9.8.7:6390") {
			t.Errorf("%s: the admin's /health lacks why Redis was unreachable: %s", name, r.raw)
		}
	}
}

// TestStreamSlotsPerTenant: one tenant's viewers cannot hold every live stream of the console
// (the bound was global: tenant B got 503 too_many_streams while A's viewer held them all).
func TestStreamSlotsPerTenant(t *testing.T) {
	t.Parallel()
	f := newFixture(t, withSettings(func(s *Settings) { s.Live = LiveSettings{MaxStreams: 3, MaxPerTenant: 2, Heartbeat: time.Minute} }))
	f.tenant(t, "ta")
	f.tenant(t, "tb")
	f.save(t, liveState("ta", "ex_a", 1, state.Suspended))
	f.save(t, liveState("tb", "ex_b", 1, state.Suspended))
	va, vb := f.key(f.apiKey(t, "ta", sqlite.RoleViewer)), f.key(f.apiKey(t, "tb", sqlite.RoleViewer))
	for i := range 2 {
		s, r := va.stream(t, "/api/executions/ex_a/events")
		if s == nil {
			t.Fatalf("tenant ta's stream %d: %d %s", i, r.status, r.raw)
		}
		s.Next(t, eventWait)
	}
	if _, r := va.stream(t, "/api/executions/ex_a/events"); r.status != http.StatusServiceUnavailable || r.body["code"] != "too_many_streams" ||
		!strings.Contains(fmt.Sprint(r.body["detail"]), "PLAITA_CONSOLE_MAX_STREAMS_PER_TENANT") {
		t.Fatalf("tenant ta's third stream: %d %s", r.status, r.raw)
	}
	s, r := vb.stream(t, "/api/executions/ex_b/events")
	if s == nil {
		t.Fatalf("tenant tb's stream while ta holds its share: %d %s", r.status, r.raw)
	}
	s.Next(t, eventWait)
}

// TestRefusalsAreAuditedInTheCallersTrail: a request for another tenant is recorded in the
// caller's own trail (the platform's for a person, the key's tenant's for a key), not in the
// trail of the tenant asked for, whose admins would learn another tenant's logins from it.
func TestRefusalsAreAuditedInTheCallersTrail(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.tenant(t, "ta")
	f.tenant(t, "tb")
	alice := f.user(t, "alice-of-ta", "ta", sqlite.RoleAdmin)
	alice.want(t, http.StatusForbidden, http.MethodGet, "/api/flows", nil, HeaderTenant, "tb")
	key := f.key(f.apiKey(t, "ta", sqlite.RoleAdmin))
	key.want(t, http.StatusForbidden, http.MethodGet, "/api/flows", nil, HeaderTenant, "tb")
	admin := f.user(t, "bob-of-tb", "tb", sqlite.RoleAdmin)
	var trail sqlite.AuditPage
	admin.want(t, http.StatusOK, http.MethodGet, "/api/audit?limit=1000", nil, HeaderTenant, "tb").decode(t, &trail)
	for _, e := range trail.Entries {
		if strings.Contains(e.Actor, "alice") || strings.HasPrefix(e.Actor, "plk_") {
			t.Fatalf("tenant tb's trail records a caller of ta: %+v", e)
		}
	}
	found := map[string]string{}
	for _, e := range f.auditRows(t) {
		if e.Action == "flow-list.denied" {
			found[e.Actor] = e.Tenant
			if !strings.Contains(string(e.Details), `"asked_tenant":"tb"`) {
				t.Errorf("the denial does not say which tenant was asked for: %+v", e)
			}
		}
	}
	if tenant, ok := found["alice-of-ta"]; !ok || tenant != "" {
		t.Errorf("alice's refusal: recorded %t in tenant %q, want the platform's trail", ok, tenant)
	}
	var keyTenant string
	for actor, tenant := range found {
		if strings.HasPrefix(actor, "plk_") {
			keyTenant = tenant
		}
	}
	if keyTenant != "ta" {
		t.Errorf("the key's refusal is in tenant %q's trail, want ta's (%v)", keyTenant, found)
	}
}

// TestProblemsNameNoStorageKey: a problem says what is wrong without the key space's names
// ("no versions in plaita:tb:flow_versions:nope" told a caller the root and other tenants'
// prefixes). The helper's check (client.do) holds every test's problems to it as well.
func TestProblemsNameNoStorageKey(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.tenant(t, "tb")
	boss := f.admin("tb")
	for _, call := range []struct {
		method, path string
		body         any
	}{
		{http.MethodGet, "/api/flows/nope", nil},
		{http.MethodGet, "/api/flows/nope?version=3", nil},
		{http.MethodPost, "/api/executions", map[string]any{"flow_id": "nope"}},
		{http.MethodGet, "/api/executions/ex_nope", nil},
	} {
		r := boss.do(t, call.method, call.path, call.body)
		if r.status < 400 || strings.Contains(string(r.raw), f.root) {
			t.Errorf("%s %s: %d %s", call.method, call.path, r.status, r.raw)
		}
	}
}

// TestSessionTTLSetting: a login lasts SessionTTL (PLAITA_CONSOLE_SESSION_TTL), not a fixed 12 h.
func TestSessionTTLSetting(t *testing.T) {
	t.Parallel()
	f := newFixture(t, withSettings(func(s *Settings) { s.SessionTTL = 90 * time.Second }))
	if _, err := f.db.CreateUser(context.Background(), sqlite.NewUser{Login: "sam", Password: "password-sam"}); err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	r := f.client(nil).login(t, "sam", "password-sam")
	var s SessionInfo
	r.decode(t, &s)
	if !strings.Contains(r.header.Get("Set-Cookie"), "Max-Age=90") || s.ExpiresAt.Before(before.Add(89*time.Second)) || s.ExpiresAt.After(time.Now().Add(91*time.Second)) {
		t.Fatalf("a 90 s session: cookie %q, expires %s", r.header.Get("Set-Cookie"), s.ExpiresAt)
	}
}
