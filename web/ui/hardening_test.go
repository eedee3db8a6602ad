package ui_test

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"plaita/store/sqlite"
	"plaita/test/webtest"
	"plaita/web/api"
	"plaita/web/ui"

	"github.com/labstack/echo/v4"
)

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
	f := webtest.New(t)
	anon := newJarClient()
	seen := 0
	for _, r := range f.Srv.Handler().(*echo.Echo).Routes() {
		if !strings.HasPrefix(r.Path, "/ui") || r.Path == ui.LoginPath || strings.HasPrefix(r.Path, "/ui/static") {
			continue
		}
		path := regexp.MustCompile(`:[a-z_]+|\*`).ReplaceAllString(r.Path, "x")
		req, _ := http.NewRequest(r.Method, f.URL+path, strings.NewReader("definition=%7B"))
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
	req, _ := http.NewRequest(http.MethodPost, f.URL+"/ui/flows/validate", strings.NewReader("definition=%7B"))
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
	res = postStalled(t, anon, f.URL+"/ui/flows/validate", "application/x-www-form-urlencoded", bad[:195<<10], 8<<20)
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
	f := webtest.New(t)
	anon := newJarClient()
	head := "--b\r\nContent-Disposition: form-data; name=\"login\"\r\n\r\n" + strings.Repeat("x", 64<<10)
	res := postStalled(t, anon, f.URL+"/ui/login", "multipart/form-data; boundary=b", head, 24<<20)
	if res.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("a 24 MB login form: %d, want 413", res.StatusCode)
	}
	// Without a Content-Length (chunked), the bound is found while the form is read.
	req, _ := http.NewRequest(http.MethodPost, f.URL+"/ui/login", io.MultiReader(strings.NewReader("login="), strings.NewReader(strings.Repeat("a", 64<<10))))
	req.ContentLength = -1
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if res, err := anon.Do(req); err != nil || res.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("a 64 KB chunked login form: %v %v, want 413", res, err)
	} else {
		res.Body.Close()
	}
	ed := uiUser(t, f, "edna", "default", sqlite.RoleEditor)
	limit := ui.BodyLimit("/ui/flows/validate")
	res = postStalled(t, ed.HC, f.URL+"/ui/flows/validate", "application/x-www-form-urlencoded", "csrf="+ed.CSRF+"&definition=", limit+1)
	if res.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("an editor's validate over %d bytes: %d, want 413", limit, res.StatusCode)
	}
	res = postStalled(t, ed.HC, f.URL+"/ui/events/publish", "application/x-www-form-urlencoded", "csrf="+ed.CSRF+"&data=", ui.BodyLimit("/ui/events/publish")+1)
	if res.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("an event's form over its bound: %d, want 413", res.StatusCode)
	}
}

// TestValidatePageGrowsWithItsProblems: the editor's check of a long definition shows the lines
// around its problems, not the whole text again in markup (an invalid 195 KB definition was a
// 1.9 MB page), and a definition on one long line is cut.
func TestValidatePageGrowsWithItsProblems(t *testing.T) {
	t.Parallel()
	f := webtest.New(t)
	ed := uiUser(t, f, "edna", "default", sqlite.RoleEditor)
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
	f := webtest.New(t)
	if _, err := f.DB.CreateUser(context.Background(), sqlite.NewUser{Login: "sam", Password: "password-sam"}); err != nil {
		t.Fatal(err)
	}
	c := &uiClient{F: f, HC: newJarClient()}
	res, body := c.post(t, "/ui/login", url.Values{"login": {"sam"}, "password": {"password-sam"}}, false)
	if res.StatusCode != http.StatusForbidden || hasCookie(res, api.SessionCookie) || !strings.Contains(body, "log in again") {
		t.Fatalf("a login without the form's token: %d, cookies %v", res.StatusCode, res.Header.Values("Set-Cookie"))
	}
	// A token of another browser's page (not this browser's cookie) is refused too.
	other := &uiClient{F: f, HC: newJarClient()}
	_, page := other.get(t, "/ui/login", http.StatusOK)
	token := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(page)[1]
	fresh := &uiClient{F: f, HC: newJarClient()}
	res, _ = fresh.post(t, "/ui/login", url.Values{"login": {"sam"}, "password": {"password-sam"}, "csrf": {token}}, false)
	if res.StatusCode != http.StatusForbidden || hasCookie(res, api.SessionCookie) {
		t.Fatalf("a login with another browser's token: %d", res.StatusCode)
	}
	if res, _ := c.logIn(t, "sam", "password-sam"); res.StatusCode != http.StatusSeeOther || !hasCookie(res, api.SessionCookie) {
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
	f := webtest.New(t)
	if _, err := f.DB.CreateUser(context.Background(), sqlite.NewUser{Login: "sam", Password: "password-sam"}); err != nil {
		t.Fatal(err)
	}
	hc := newJarClient()
	get := func(path string) *http.Response {
		req, _ := http.NewRequest(http.MethodGet, f.URL+path, nil)
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
	req, _ := http.NewRequest(http.MethodPost, f.URL+"/ui/login", strings.NewReader(form.Encode()))
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
	if !names[ui.TenantCookie] || !names[api.SessionCookie] {
		t.Fatalf("the login set %v", names)
	}

	boss := f.Admin("")
	for _, path := range []string{"/api/session", "/api/flows", "/api/tenants", "/health", "/readyz", "/api/openapi.json", "/api/no-such-route"} {
		for _, c := range []*webtest.Client{f.Client(nil), boss} {
			r := c.Do(t, http.MethodGet, path, nil)
			if r.Header.Get("X-Content-Type-Options") != "nosniff" || r.Header.Get("Cache-Control") != "no-store" {
				t.Errorf("GET %s (%d): X-Content-Type-Options %q, Cache-Control %q", path, r.Status,
					r.Header.Get("X-Content-Type-Options"), r.Header.Get("Cache-Control"))
			}
		}
	}
	for path, want := range map[string]int{"/ui/static/": 404, "/ui/static/htmx/": 404, "/ui/static/htmx": 404, "/ui/static/app.js": 200} {
		if res := get(path); res.StatusCode != want {
			t.Errorf("GET %s: %d, want %d", path, res.StatusCode, want)
		}
	}
}
