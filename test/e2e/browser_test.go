//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// browser is one headless Chromium (Debian's chromium, installed by .ci/run) driven over the
// DevTools protocol: it records every request the pages make, takes screenshots, and runs
// axe-core (vendored under web/ui/testdata) on a page.
type browser struct {
	t     *testing.T
	ctx   context.Context
	base  string // the console's origin: http://127.0.0.1:PORT
	shots string

	mu       sync.Mutex
	requests []string
}

// chromiumPath is Debian's chromium; the test fails without it (.ci/run installs it).
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("no chromium on PATH: the browser tests need Debian's chromium (apt-get install -y chromium; .ci/run installs it)")
	return ""
}

// newBrowser starts a browser for pages of base; the screenshots go to $PLAITA_UI_SCREENSHOTS
// (made when missing), else to test/e2e/out/ui (git-ignored: they are looked at, not committed).
func newBrowser(t *testing.T, base string) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromiumPath(t)), chromedp.NoSandbox,
		chromedp.WindowSize(1280, 900), chromedp.Flag("disable-gpu", true), chromedp.Flag("lang", "en-US"))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	b := &browser{t: t, ctx: ctx, base: base, shots: os.Getenv("PLAITA_UI_SCREENSHOTS")}
	if b.shots == "" {
		b.shots = filepath.Join(repoRoot, "test", "e2e", "out", "ui")
	}
	if err := os.MkdirAll(b.shots, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Listen(ctx, func(ev any) {
		if e, ok := ev.(*network.EventRequestWillBeSent); ok {
			b.mu.Lock()
			b.requests = append(b.requests, e.Request.URL)
			b.mu.Unlock()
		}
	}); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	// The pages ask before a replay or a tenant's disabling (hx-confirm): the test says yes.
	// The answer is a command, so it is sent from another goroutine than the listener's.
	if err := chromedp.Listen(ctx, func(ev any) {
		if _, ok := ev.(*page.EventJavascriptDialogOpening); ok {
			go func() {
				_, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
			}()
		}
	}); err != nil {
		t.Fatalf("listen for dialogs: %v", err)
	}
	t.Logf("screenshots in %s", b.shots)
	return b
}

func (b *browser) do(steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 60*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.t.Fatalf("browser: %v (at %s)", err, b.location())
	}
}

func (b *browser) location() string {
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	l, _ := chromedp.Run(ctx, chromedp.Location())
	return l
}

// eval runs expr in the page (awaiting a promise) and decodes its value into T.
func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 60*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		b.t.Fatalf("evaluate %.80s: %v", expr, err)
	}
	return v
}

// open goes to path and waits until the page has loaded.
func (b *browser) open(path string) {
	b.t.Helper()
	b.do(chromedp.Navigate(b.base + path))
	b.until("the page "+path+" loaded", `document.readyState === "complete"`, 30*time.Second)
}

// until polls the page (from Go: the pages' policy forbids the script a page-side poll
// would compile) until expr is true.
func (b *browser) until(what, expr string, within time.Duration) {
	b.t.Helper()
	deadline := time.Now().Add(within)
	for {
		ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool]("!!("+expr+")"))
		cancel()
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			html := eval[string](b, `document.body ? document.body.innerText.slice(0, 3000) : ""`)
			b.t.Fatalf("waited %s for %s (%s): %v\n%s", within, what, expr, err, html)
		}
		time.Sleep(150 * time.Millisecond)
	}
}

func (b *browser) text(sel string) string {
	b.t.Helper()
	return eval[string](b, fmt.Sprintf(`(document.querySelector(%q) || {innerText: ""}).innerText`, sel))
}

func (b *browser) exists(sel string) bool {
	b.t.Helper()
	return eval[bool](b, fmt.Sprintf(`document.querySelector(%q) !== null`, sel))
}

func (b *browser) click(sel string) {
	b.t.Helper()
	b.until(sel+" on the page", fmt.Sprintf(`document.querySelector(%q)`, sel), 30*time.Second)
	b.do(chromedp.Click(chromedp.CSS(sel)))
}

func (b *browser) fill(sel, value string) {
	b.t.Helper()
	b.do(chromedp.SetValue(chromedp.CSS(sel), value))
}

// shot saves a screenshot of the whole page as NAME.png.
func (b *browser) shot(name string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 60*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(b.shots, name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// axe runs axe-core on the page and fails the test on any serious or critical violation.
func (b *browser) axe(page string) {
	b.t.Helper()
	src, err := os.ReadFile(filepath.Join(repoRoot, "web", "ui", "testdata", "axe-core", "axe.min.js"))
	if err != nil {
		b.t.Fatal(err)
	}
	eval[bool](b, string(src)+";true")
	raw := eval[string](b, `axe.run(document, {resultTypes: ["violations"]}).then(r => JSON.stringify(r.violations.map(v =>
		({id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.slice(0, 3).map(n => n.target.join(" "))}))))`)
	var vs []struct {
		ID, Impact, Help string
		Nodes            []string
	}
	if err := json.Unmarshal([]byte(raw), &vs); err != nil {
		b.t.Fatalf("axe on %s: %v: %s", page, err, raw)
	}
	for _, v := range vs {
		if v.Impact == "serious" || v.Impact == "critical" {
			b.t.Errorf("axe on %s: %s %s (%s) at %v", page, v.Impact, v.ID, v.Help, v.Nodes)
		} else {
			b.t.Logf("axe on %s: %s %s (%s)", page, v.Impact, v.ID, v.Help)
		}
	}
}

// foreign are the requests made to anything but the console's origin. A data: URL is no
// request to anywhere (its content is in it): chromium's own date-time picker icon is one.
func (b *browser) foreign() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, r := range b.requests {
		u, err := url.Parse(r)
		if err == nil && u.Scheme == "data" {
			continue
		}
		if err != nil || u.Scheme+"://"+u.Host != b.base {
			out = append(out, r)
		}
	}
	return out
}

func (b *browser) requestCount() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.requests)
}

// requestsSince are the requests made since the count from was taken (requestCount) whose
// URL contains every one of parts.
func (b *browser) requestsSince(from int, parts ...string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, r := range b.requests[from:] {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(r, p)
		}
		if ok {
			out = append(out, r)
		}
	}
	return out
}

// watchFirst records, from now on, the data-via of the first element that matches sel (what
// asked for the fragment that first showed it), read back with firstVia: a later refresh (a
// poll) cannot overwrite it.
func (b *browser) watchFirst(sel string) {
	b.t.Helper()
	eval[bool](b, fmt.Sprintf(`(() => {
		window.__first = window.__first || {};
		const sel = %q;
		delete window.__first[sel];
		const look = () => { const el = document.querySelector(sel); if (el && !(sel in window.__first)) { window.__first[sel] = el.dataset.via || "none"; } };
		new MutationObserver(look).observe(document.body, {childList: true, subtree: true, attributes: true});
		return true;
	})()`, sel))
}

// watchRows records, from now on, for each row of the executions list, the data-via of the
// list that first showed it (rows already shown: "none"), read back with rowVia.
func (b *browser) watchRows() {
	b.t.Helper()
	eval[bool](b, `(() => {
		window.__rows = {};
		const look = () => { const l = document.querySelector("#list"); if (!l) { return; }
			l.querySelectorAll("tr[data-id]").forEach(r => { if (!(r.dataset.id in window.__rows)) { window.__rows[r.dataset.id] = l.dataset.via || "none"; } }); };
		look();
		new MutationObserver(look).observe(document.body, {childList: true, subtree: true});
		return true;
	})()`)
}

// rowVia is what watchRows recorded for the row of execution id ("" while it is not shown).
func (b *browser) rowVia(id string) string {
	b.t.Helper()
	return eval[string](b, fmt.Sprintf(`(window.__rows && window.__rows[%q]) || ""`, id))
}

// firstVia is what watchFirst recorded for sel ("" while nothing matched).
func (b *browser) firstVia(sel string) string {
	b.t.Helper()
	return eval[string](b, fmt.Sprintf(`(window.__first && window.__first[%q]) || ""`, sel))
}

// switchTenant chooses the tenant the pages act in with the header's switcher.
func (b *browser) switchTenant(tenant string) {
	b.t.Helper()
	b.do(chromedp.SetValue(chromedp.CSS("#tenant-switch"), tenant))
	eval[bool](b, `window.__beforeSwitch = true`)
	b.click(`form[action="/ui/tenant"] button[type=submit]`)
	// The form posts and the page comes back: a new document, with the tenant chosen.
	b.until("tenant "+tenant, fmt.Sprintf(`!window.__beforeSwitch && document.readyState === "complete" && document.querySelector("#tenant-switch") && document.querySelector("#tenant-switch").value === %q`, tenant), 30*time.Second)
}

// login logs in through the login page.
func (b *browser) login(login, password string) {
	b.t.Helper()
	b.open("/ui/login")
	b.fill("#login", login)
	b.fill("#password", password)
	b.click(`form[action="/ui/login"] button[type=submit]`)
	b.until("logged in as "+login, fmt.Sprintf(`(document.querySelector("#whoami") || {innerText: ""}).innerText.startsWith(%q)`, login), 30*time.Second)
}

func (b *browser) logout() {
	b.t.Helper()
	b.click(`form[action="/ui/logout"] button`)
	b.until("the login page", `document.querySelector("#password") !== null`, 30*time.Second)
}

// post sends a form from the page with fetch, as a forger with the page's session would, and
// returns the answer's text; csrf says whether the session's token goes with it.
func (b *browser) post(path, form string, csrf bool) string {
	b.t.Helper()
	token := `""`
	if csrf {
		token = `document.querySelector('meta[name="csrf-token"]').content`
	}
	return eval[string](b, fmt.Sprintf(`fetch(%q, {method: "POST", headers: {"Content-Type": "application/x-www-form-urlencoded", "HX-Request": "true"},
		body: %q + "&csrf=" + encodeURIComponent(%s)}).then(r => r.text().then(t => r.status + " " + t))`, path, form, token))
}

func mustContainAll(t *testing.T, what, got string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(got, w) {
			t.Errorf("%s: no %q in %q", what, w, got)
		}
	}
}

// callIn is console.call in another tenant (X-Tenant-ID).
func (c *console) callIn(t *testing.T, tenant, method, path string, body any) (int, map[string]any) {
	t.Helper()
	raw, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(method, c.base+path, bytes.NewReader(raw))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Admin-API-Key", consoleAdminKey)
	req.Header.Set("X-Tenant-ID", tenant)
	res, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(res.Body).Decode(&out)
	return res.StatusCode, out
}
