package httpnode

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"plaita/engine"
	"plaita/engine/state"
)

// echo answers with a JSON description of the request.
func echo(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Add("X-Multi", "a")
	w.Header().Add("X-Multi", "b")
	json.NewEncoder(w).Encode(map[string]any{
		"method": r.Method, "path": r.URL.Path, "query": r.URL.Query(), "host": r.Host,
		"token": r.Header.Get("X-Token"), "ctype": r.Header.Get("Content-Type"),
		"ua": r.Header.Get("User-Agent"), "body": string(body), "cookie": r.Header.Get("Cookie"),
		"auth": r.Header.Get("Authorization"),
	})
}

func TestGetJSONWithTemplates(t *testing.T) {
	_, hs, port := serve(t, echo)
	h := newHarness(t, DefaultOptions())
	st := h.run(map[string]any{
		"url":     "http://127.0.0.1:{{ INPUT.port }}/items/{{ INPUT.id }}",
		"headers": map[string]any{"X-Token": "t-{{ INPUT.id }}"},
		"query":   map[string]any{"q": "{{ INPUT.name }}", "tag": []any{"a", "{{ INPUT.name }}"}, "n": "{{ INPUT.id }}"},
	}, map[string]any{"port": port, "id": 7, "name": "x y"})
	resp := response(t, st)
	if resp["status"] != float64(200) {
		t.Errorf("status %v", resp["status"])
	}
	body := resp["body"].(map[string]any)
	if body["method"] != "GET" || body["path"] != "/items/7" || body["token"] != "t-7" || body["ua"] != "plaita-http/1" {
		t.Errorf("request seen by the server: %v", body)
	}
	q := body["query"].(map[string]any)
	if fmt.Sprint(q["q"]) != "[x y]" || fmt.Sprint(q["tag"]) != "[a x y]" || fmt.Sprint(q["n"]) != "[7]" {
		t.Errorf("query %v", q)
	}
	headers := resp["headers"].(map[string]any)
	if headers["Content-Type"] != "application/json; charset=utf-8" || fmt.Sprint(headers["X-Multi"]) != "[a b]" {
		t.Errorf("headers %v", headers)
	}
	if !strings.HasPrefix(resp["url"].(string), "http://127.0.0.1:"+port+"/items/7?") {
		t.Errorf("url %v", resp["url"])
	}
	if st.Output != float64(200) {
		t.Errorf("flow output %v: NODE.fetch.RESPONSE.status", st.Output)
	}
	if hs.count() != 1 {
		t.Errorf("%d requests", hs.count())
	}
}

func TestPostBodies(t *testing.T) {
	_, _, port := serve(t, echo)
	h := newHarness(t, DefaultOptions())
	base := "http://127.0.0.1:" + port + "/"

	st := h.run(map[string]any{"method": "POST", "url": base,
		"body": map[string]any{"n": "{{ INPUT.n }}", "list": []any{1, "{{ INPUT.s }}"}}},
		map[string]any{"n": 5, "s": "<&>"})
	body := response(t, st)["body"].(map[string]any)
	if body["method"] != "POST" || body["ctype"] != "application/json" || body["body"] != `{"list":[1,"<&>"],"n":5}` {
		t.Errorf("json body: %v", body)
	}

	st = h.run(map[string]any{"method": "put", "url": base, "body": "hello {{ INPUT.name }}"}, map[string]any{"name": "ann"})
	body = response(t, st)["body"].(map[string]any)
	if body["method"] != "PUT" || body["ctype"] != "text/plain; charset=utf-8" || body["body"] != "hello ann" {
		t.Errorf("text body: %v", body)
	}

	// A whole-template body keeps the type of the expression: an object goes as JSON.
	st = h.run(map[string]any{"method": "PATCH", "url": base, "body": "{{ INPUT.obj }}",
		"headers": map[string]any{"Content-Type": "application/merge-patch+json"}},
		map[string]any{"obj": map[string]any{"a": true}})
	body = response(t, st)["body"].(map[string]any)
	if body["ctype"] != "application/merge-patch+json" || body["body"] != `{"a":true}` {
		t.Errorf("template object body: %v", body)
	}
}

func TestStatusHandling(t *testing.T) {
	_, _, port := serve(t, func(w http.ResponseWriter, r *http.Request) {
		code, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/"))
		w.WriteHeader(code)
		io.WriteString(w, "status text")
	})
	h := newHarness(t, DefaultOptions())
	// 4xx is a result, not an error.
	resp := response(t, h.run(map[string]any{"url": "http://127.0.0.1:" + port + "/404"}, nil))
	if resp["status"] != float64(404) || resp["body"] != "status text" {
		t.Errorf("404: %v", resp)
	}
	// 5xx is a retryable error.
	failed(t, h.run(map[string]any{"url": "http://127.0.0.1:" + port + "/503"}, nil), false, "503")
}

func TestServerErrorIsRetried(t *testing.T) {
	var n atomic.Int32
	_, _, port := serve(t, func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) < 3 {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		io.WriteString(w, "ok")
	})
	h := newHarness(t, DefaultOptions())
	def := fmt.Sprintf(`{"id": "retry", "start": "fetch", "nodes": [
		{"id": "fetch", "type": "http", "params": {"url": "http://127.0.0.1:%s/"}, "next": "done",
		 "retry": {"max_attempts": 3}},
		{"id": "done", "type": "end"}]}`, port)
	f, err := engine.Parse([]byte(def), h.reg, engine.DefaultExprLimits)
	if err != nil {
		t.Fatal(err)
	}
	st := h.start(context.Background(), f, nil)
	if resp := response(t, st); resp["body"] != "ok" || n.Load() != 3 {
		t.Errorf("after %d requests: %v", n.Load(), resp)
	}
}

// ---- blockPrivateNetworks / PLAITA_HTTP_BLOCK_PRIVATE ----

func TestBlockPrivate(t *testing.T) {
	_, hs, port := serve(t, echo)
	h := newHarness(t, DefaultOptions())
	loop := "http://127.0.0.1:" + port + "/"
	want := "blocked: 127.0.0.1 is a loopback address (blockPrivateNetworks / PLAITA_HTTP_BLOCK_PRIVATE)"

	// Neither switch: allowed.
	response(t, h.run(map[string]any{"url": loop}, nil))

	// The node's own switch: the operator's switch being off does not loosen it.
	failed(t, h.run(map[string]any{"url": loop, "blockPrivateNetworks": true}, nil), true, want)

	// The operator switch blocks every node; a node cannot loosen it.
	op := newHarness(t, with(func(o *Options) { o.BlockPrivate = true }))
	failed(t, op.run(map[string]any{"url": loop}, nil), true, want)
	failed(t, op.run(map[string]any{"url": loop, "blockPrivateNetworks": false}, nil), true, want)

	// One node's switch leaves the next node of the same Type alone.
	response(t, h.run(map[string]any{"url": loop}, nil))

	if hs.count() != 2 {
		t.Errorf("%d requests reached the server, want 2 (the unblocked ones)", hs.count())
	}
}

func TestBlockPrivateResolvedAndLiterals(t *testing.T) {
	_, hs, port := serve(t, echo)
	h := newHarness(t, with(func(o *Options) { o.BlockPrivate = true }))
	h.dns.set("loop.test", []string{"127.0.0.1"})
	h.dns.set("meta.test", []string{"169.254.169.254"})
	h.dns.set("mixed.test", []string{"93.184.216.34", "10.1.2.3"})
	h.dns.set("v6.test", []string{"fd00::1"})
	h.dns.set("mapped.test", []string{"::ffff:192.168.1.1"})
	cases := []struct{ url, want string }{
		{"http://loop.test:" + port + "/", `host "loop.test" resolves to 127.0.0.1, a loopback address (blockPrivateNetworks / PLAITA_HTTP_BLOCK_PRIVATE)`},
		{"http://meta.test/latest/meta-data", `resolves to 169.254.169.254, a link-local address (169.254.0.0/16, cloud metadata)`},
		{"http://mixed.test/", `resolves to 10.1.2.3, a private address (RFC 1918 10.0.0.0/8)`},
		{"http://v6.test/", `resolves to fd00::1, a unique local address (fc00::/7)`},
		{"http://mapped.test/", `resolves to 192.168.1.1, a private address`},
		{"http://[::ffff:127.0.0.1]:" + port + "/", `blocked: ::ffff:127.0.0.1 is an IPv4-mapped address of 127.0.0.1, a loopback address`},
		{"http://[::1]:" + port + "/", `blocked: ::1 is a loopback address`},
		{"http://0.0.0.0:" + port + "/", `blocked: 0.0.0.0 is a "this network" address`},
		{"http://100.64.0.1/", `blocked: 100.64.0.1 is a carrier-grade NAT address`},
		{"http://LOOP.test.:" + port + "/", `resolves to 127.0.0.1, a loopback address`},
	}
	for _, c := range cases {
		msg := failed(t, h.run(map[string]any{"url": c.url}, nil), true, c.want, "(blockPrivateNetworks / PLAITA_HTTP_BLOCK_PRIVATE)")
		t.Logf("%s → %s", c.url, msg)
	}
	if hs.count() != 0 || len(h.fence.addrs()) != 0 {
		t.Errorf("requests %d, dials %v: a blocked target was contacted", hs.count(), h.fence.addrs())
	}
	// An unknown name is a retryable network error, not a policy decision.
	failed(t, h.run(map[string]any{"url": "http://nowhere.test/"}, nil), false, "no such host")
}

func TestAllowedAndDeniedHosts(t *testing.T) {
	_, hs, port := serve(t, echo)
	h := newHarness(t, DefaultOptions())
	for _, n := range []string{"api.good.test", "deep.api.good.test", "good.test", "other.test", "bad.test", "alias.test"} {
		h.dns.set(n, []string{"127.0.0.1"})
	}
	u := func(host string) string { return "http://" + host + ":" + port + "/" }
	allow := []any{"*.good.test"}

	for _, host := range []string{"api.good.test", "deep.api.good.test", "API.Good.Test"} {
		resp := response(t, h.run(map[string]any{"url": u(host), "allowedHosts": allow}, nil))
		if got := resp["body"].(map[string]any)["host"]; !strings.EqualFold(got.(string), host+":"+port) {
			t.Errorf("Host header %v, want %s:%s", got, host, port)
		}
	}
	failed(t, h.run(map[string]any{"url": u("good.test"), "allowedHosts": allow}, nil), true,
		`blocked: host "good.test" is not in allowedHosts (allowedHosts)`)
	failed(t, h.run(map[string]any{"url": u("other.test"), "allowedHosts": allow}, nil), true,
		`host "other.test" is not in allowedHosts (allowedHosts)`)
	failed(t, h.run(map[string]any{"url": u("127.0.0.1"), "allowedHosts": allow}, nil), true,
		`host "127.0.0.1" is not in allowedHosts (allowedHosts)`)

	failed(t, h.run(map[string]any{"url": u("bad.test"), "deniedHosts": []any{"bad.test"}}, nil), true,
		`blocked: host "bad.test" matches deniedHosts entry "bad.test" (deniedHosts)`)
	failed(t, h.run(map[string]any{"url": u("api.good.test"), "deniedHosts": []any{"*.good.test"}}, nil), true,
		`matches deniedHosts entry "*.good.test" (deniedHosts)`)
	// An IP entry refuses the literal and any name resolving to it.
	failed(t, h.run(map[string]any{"url": u("alias.test"), "deniedHosts": []any{"127.0.0.1"}}, nil), true,
		`host "alias.test" resolves to 127.0.0.1, which matches deniedHosts entry "127.0.0.1" (deniedHosts)`)
	failed(t, h.run(map[string]any{"url": u("[::ffff:127.0.0.1]"), "deniedHosts": []any{"127.0.0.1"}}, nil), true,
		`matches deniedHosts entry "127.0.0.1" (deniedHosts)`)
	// Denied wins over allowed.
	failed(t, h.run(map[string]any{"url": u("api.good.test"), "allowedHosts": allow, "deniedHosts": []any{"api.good.test"}}, nil), true,
		`(deniedHosts)`)
	// Not denied: goes through.
	response(t, h.run(map[string]any{"url": u("other.test"), "deniedHosts": []any{"bad.test"}}, nil))

	if hs.count() != 4 {
		t.Errorf("%d requests, want 4", hs.count())
	}
}

// ---- DNS rebinding: check and connect use the same answer ----

func TestDNSRebindingPublicThenLoopback(t *testing.T) {
	_, hs, port := serve(t, echo)
	h := newHarness(t, with(func(o *Options) { o.BlockPrivate, o.DNSTTL = true, 0 }))
	// First answer public (passes the check), every later answer loopback.
	h.dns.set("rebind.test", []string{"93.184.216.34"}, []string{"127.0.0.1"})

	st := h.run(map[string]any{"url": "http://rebind.test:" + port + "/secret"}, nil)
	// The fence refuses 93.184.216.34 (nothing outside loopback is ever contacted), so the
	// request fails as a network error; what matters is where it tried to go.
	failed(t, st, false, "test fence: refusing to dial 93.184.216.34:"+port)
	if n := h.dns.count("rebind.test"); n != 1 {
		t.Errorf("%d lookups, want 1: the dial must use the checked answer, not look up again", n)
	}
	if got := h.fence.addrs(); len(got) != 1 || got[0] != "93.184.216.34:"+port {
		t.Errorf("dialed %v, want only the checked 93.184.216.34:%s", got, port)
	}
	if h.fence.dialedHost("127.0.0.1") || hs.count() != 0 {
		t.Errorf("loopback was reached: dials %v, requests %d", h.fence.addrs(), hs.count())
	}

	// The second visit looks up again (cache off) and now gets loopback: refused before any dial.
	dials := len(h.fence.addrs())
	failed(t, h.run(map[string]any{"url": "http://rebind.test:" + port + "/secret"}, nil), true, "127.0.0.1, a loopback address")
	if len(h.fence.addrs()) != dials || hs.count() != 0 {
		t.Errorf("dialed %v after a refused check", h.fence.addrs()[dials:])
	}
}

func TestPinnedDialUsesCheckedAnswer(t *testing.T) {
	_, hs, port := serve(t, echo)
	h := newHarness(t, with(func(o *Options) { o.DNSTTL = 0 }))
	// Checked answer loopback (allowed by name); any later lookup would say 10.9.9.9.
	h.dns.set("pinned.test", []string{"127.0.0.1"}, []string{"10.9.9.9"})
	resp := response(t, h.run(map[string]any{"url": "http://pinned.test:" + port + "/", "allowedHosts": []any{"pinned.test"}}, nil))
	if resp["body"].(map[string]any)["host"] != "pinned.test:"+port {
		t.Errorf("Host header %v", resp["body"])
	}
	if h.dns.count("pinned.test") != 1 || h.fence.dialedHost("10.9.9.9") || hs.count() != 1 {
		t.Errorf("lookups %d, dials %v", h.dns.count("pinned.test"), h.fence.addrs())
	}
}

// ---- redirects ----

func TestRedirectToPrivateBlocked(t *testing.T) {
	_, hs, port := serve(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/to-loopback":
			http.Redirect(w, r, "http://127.0.0.1:"+r.URL.Query().Get("port")+"/secret", http.StatusFound)
		case "/to-metadata":
			http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusTemporaryRedirect)
		case "/to-name":
			http.Redirect(w, r, "http://inner.test:"+r.URL.Query().Get("port")+"/secret", http.StatusMovedPermanently)
		case "/to-public":
			http.Redirect(w, r, "/final", http.StatusSeeOther)
		default:
			echo(w, r)
		}
	})
	h := newHarness(t, with(func(o *Options) { o.BlockPrivate = true }))
	// public.test plays a public server: 93.184.216.34 is served by the loopback test server.
	h.dns.set("public.test", []string{"93.184.216.34"})
	h.dns.set("inner.test", []string{"192.168.0.10"})
	h.fence.virtual["93.184.216.34"] = true
	base := "http://public.test:" + port

	resp := response(t, h.run(map[string]any{"url": base + "/to-public"}, nil))
	if resp["url"] != base+"/final" {
		t.Errorf("final url %v", resp["url"])
	}
	failed(t, h.run(map[string]any{"url": base + "/to-loopback?port=" + port}, nil), true,
		"redirect 1 to http://127.0.0.1:"+port+"/secret: blocked: 127.0.0.1 is a loopback address (blockPrivateNetworks / PLAITA_HTTP_BLOCK_PRIVATE)")
	failed(t, h.run(map[string]any{"url": base + "/to-metadata"}, nil), true,
		"blocked: 169.254.169.254 is a link-local address (169.254.0.0/16, cloud metadata)")
	failed(t, h.run(map[string]any{"url": base + "/to-name?port=" + port}, nil), true,
		`blocked: host "inner.test" resolves to 192.168.0.10, a private address`)
	if hs.has("/secret") || h.fence.dialedHost("127.0.0.1") || h.fence.dialedHost("169.254.169.254") || h.fence.dialedHost("192.168.0.10") {
		t.Errorf("a blocked redirect target was contacted: dials %v", h.fence.addrs())
	}

	// allowedHosts is checked at every hop as well.
	h2 := newHarness(t, DefaultOptions())
	h2.dns.set("inner.test", []string{"127.0.0.1"})
	failed(t, h2.run(map[string]any{"url": "http://127.0.0.1:" + port + "/to-name?port=" + port, "allowedHosts": []any{"127.0.0.1"}}, nil), true,
		`redirect 1 to http://inner.test:`+port+`/secret: blocked: host "inner.test" is not in allowedHosts (allowedHosts)`)
}

func TestRedirectCount(t *testing.T) {
	big := strings.Repeat("x", 3<<20)
	_, hs, port := serve(t, func(w http.ResponseWriter, r *http.Request) {
		n, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/r/"))
		if err != nil || n == 0 {
			echo(w, r)
			return
		}
		// Each intermediate hop carries a body over the cap: it must be dropped unread.
		w.Header().Set("Location", fmt.Sprintf("/r/%d", n-1))
		w.WriteHeader(http.StatusFound)
		io.WriteString(w, big)
	})
	h := newHarness(t, with(func(o *Options) { o.MaxResponseBytes = 1 << 20 }))
	u := func(n int) string { return fmt.Sprintf("http://127.0.0.1:%s/r/%d", port, n) }

	resp := response(t, h.run(map[string]any{"url": u(5)}, nil)) // default maxRedirects 5
	if resp["url"] != u(0) {
		t.Errorf("final url %v", resp["url"])
	}
	failed(t, h.run(map[string]any{"url": u(6)}, nil), true, "too many redirects: more than 5 (maxRedirects)")
	response(t, h.run(map[string]any{"url": u(2), "maxRedirects": 2}, nil))
	failed(t, h.run(map[string]any{"url": u(3), "maxRedirects": 2}, nil), true, "too many redirects: more than 2 (maxRedirects)")

	// 0: not followed, the 3xx is the result (its body is read, and is over the cap here).
	failed(t, h.run(map[string]any{"url": u(1), "maxRedirects": 0}, nil), true, "(PLAITA_HTTP_MAX_RESPONSE_BYTES)")
	roomy := newHarness(t, with(func(o *Options) { o.MaxResponseBytes = 4 << 20 }))
	resp = response(t, roomy.run(map[string]any{"url": u(1), "maxRedirects": 0}, nil))
	if resp["status"] != float64(302) || resp["headers"].(map[string]any)["Location"] != "/r/0" {
		t.Errorf("maxRedirects 0: %v", resp["status"])
	}
	if hs.count() == 0 {
		t.Fatal("no requests")
	}
}

func TestRedirectMethodAndCredentials(t *testing.T) {
	_, _, port := serve(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/303":
			http.Redirect(w, r, "/final", http.StatusSeeOther)
		case "/307":
			http.Redirect(w, r, "/final", http.StatusTemporaryRedirect)
		case "/away":
			http.Redirect(w, r, "http://other.test:"+r.URL.Query().Get("port")+"/final", http.StatusFound)
		default:
			echo(w, r)
		}
	})
	h := newHarness(t, DefaultOptions())
	h.dns.set("other.test", []string{"127.0.0.1"})
	base := "http://127.0.0.1:" + port
	post := func(path string) map[string]any {
		resp := response(t, h.run(map[string]any{"method": "POST", "url": base + path, "body": map[string]any{"a": 1},
			"headers": map[string]any{"Authorization": "Bearer s3cret"}}, nil))
		return resp["body"].(map[string]any)
	}
	if b := post("/303"); b["method"] != "GET" || b["body"] != "" || b["ctype"] != "" || b["auth"] != "Bearer s3cret" {
		t.Errorf("303: %v", b)
	}
	if b := post("/307"); b["method"] != "POST" || b["body"] != `{"a":1}` || b["ctype"] != "application/json" {
		t.Errorf("307: %v", b)
	}
	if b := post("/away?port=" + port); b["auth"] != "" || b["host"] != "other.test:"+port {
		t.Errorf("cross-host redirect kept the credentials: %v", b)
	}
}

// ---- PLAITA_HTTP_MAX_RESPONSE_BYTES ----

func TestBodyCap(t *testing.T) {
	const total = 50 << 20
	var written atomic.Int64
	_, _, port := serve(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/declared" {
			w.Header().Set("Content-Length", strconv.Itoa(total))
		}
		chunk := make([]byte, 32<<10)
		f, _ := w.(http.Flusher)
		for n := 0; n < total; n += len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				return
			}
			written.Add(int64(len(chunk)))
			if f != nil {
				f.Flush()
			}
		}
	})
	h := newHarness(t, with(func(o *Options) { o.MaxResponseBytes = 1048576 }))
	for _, path := range []string{"/streamed", "/declared"} {
		written.Store(0)
		start := time.Now()
		failed(t, h.run(map[string]any{"url": "http://127.0.0.1:" + port + path}, nil), true,
			"response body over 1048576 bytes (PLAITA_HTTP_MAX_RESPONSE_BYTES)")
		t.Logf("%s: server wrote %d bytes before the client hung up (%s)", path, written.Load(), time.Since(start))
	}
	// The server stops once the client is gone: far less than 50 MiB was ever sent.
	deadline := time.Now().Add(5 * time.Second)
	for {
		w1 := written.Load()
		time.Sleep(50 * time.Millisecond)
		if written.Load() == w1 || time.Now().After(deadline) {
			break
		}
	}
	if w := written.Load(); w >= total/2 {
		t.Errorf("the server wrote %d of %d bytes: the client kept reading past the cap", w, total)
	}

	// Exactly at the cap is fine.
	_, _, port2 := serve(t, func(w http.ResponseWriter, r *http.Request) { w.Write(make([]byte, 1048576)) })
	resp := response(t, h.run(map[string]any{"url": "http://127.0.0.1:" + port2 + "/"}, nil))
	if len(resp["body"].(string)) != 1048576 {
		t.Errorf("body of %d bytes", len(resp["body"].(string)))
	}
}

// countingReader is an endless reader that counts what was taken from it.
type countingReader struct{ n int }

func (c *countingReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	c.n += len(p)
	return len(p), nil
}

func TestReadCappedBuffersAtMostCapPlusOne(t *testing.T) {
	for _, limit := range []int{0, 1, 511, 512, 1000, 1 << 20} {
		cr := &countingReader{}
		_, err := readCapped(cr, -1, limit)
		if !errors.Is(err, ErrResponseTooLarge) {
			t.Fatalf("limit %d: %v", limit, err)
		}
		if cr.n > limit+1 {
			t.Errorf("limit %d: read %d bytes, more than limit+1", limit, cr.n)
		}
		data, err := readCapped(io.LimitReader(&countingReader{}, int64(limit)), -1, limit)
		if err != nil || len(data) != limit || cap(data) > limit+1 {
			t.Errorf("limit %d: exactly the limit: len %d cap %d err %v", limit, len(data), cap(data), err)
		}
	}
	if _, err := readCapped(&countingReader{}, 2000, 1000); !errors.Is(err, ErrResponseTooLarge) {
		t.Errorf("declared length over the cap: %v", err)
	}
}

// ---- proxies ----

func TestProxyEnvIgnored(t *testing.T) {
	var proxied atomic.Int32
	pl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pl.Close()
	go func() {
		for {
			c, err := pl.Accept()
			if err != nil {
				return
			}
			proxied.Add(1)
			c.Close()
		}
	}()
	proxy := "http://" + pl.Addr().String()
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy"} {
		t.Setenv(k, proxy)
	}
	t.Setenv("NO_PROXY", "")
	t.Setenv("no_proxy", "")

	_, hs, port := serve(t, echo)
	h := newHarness(t, DefaultOptions())
	h.dns.set("public.test", []string{"127.0.0.1"})
	u := "http://public.test:" + port + "/"
	response(t, h.run(map[string]any{"url": u, "allowedHosts": []any{"public.test"}}, nil)) // policy: pinned
	response(t, h.run(map[string]any{"url": u}, nil))                                       // no policy: shared pool
	if proxied.Load() != 0 || hs.count() != 2 {
		t.Errorf("proxy connections %d, direct requests %d", proxied.Load(), hs.count())
	}
	if h.typ.shared.Proxy != nil || h.typ.newTransport(nil).Proxy != nil {
		t.Error("a transport has a Proxy function")
	}
	for _, a := range h.fence.addrs() {
		if a == pl.Addr().String() {
			t.Errorf("dialed the proxy %s", a)
		}
	}
}

// ---- TLS: the Host header and SNI stay the name, the certificate is checked against it ----

func TestTLSPinnedKeepsNameAndSNI(t *testing.T) {
	var mu sync.Mutex
	var host, sni string
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		host, sni = r.Host, r.TLS.ServerName
		mu.Unlock()
		io.WriteString(w, "tls ok")
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake below
	srv.StartTLS()
	defer srv.Close()
	su, _ := url.Parse(srv.URL)
	port := su.Port()
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())

	h := newHarness(t, DefaultOptions(), WithTLSConfig(&tls.Config{RootCAs: pool, ServerName: "ignored.test"}))
	// The test certificate is for example.com (and 127.0.0.1): pin example.com to 127.0.0.1.
	h.dns.set("example.com", []string{"127.0.0.1"})
	h.dns.set("other.test", []string{"127.0.0.1"})

	resp := response(t, h.run(map[string]any{"url": "https://example.com:" + port + "/", "allowedHosts": []any{"example.com"}}, nil))
	mu.Lock()
	if resp["body"] != "tls ok" || host != "example.com:"+port || sni != "example.com" {
		t.Errorf("body %v, Host %q, SNI %q", resp["body"], host, sni)
	}
	mu.Unlock()
	if got := h.fence.addrs(); len(got) != 1 || got[0] != "127.0.0.1:"+port {
		t.Errorf("dialed %v", got)
	}
	// A name the certificate does not cover fails verification although the IP is the same.
	failed(t, h.run(map[string]any{"url": "https://other.test:" + port + "/", "allowedHosts": []any{"other.test"}}, nil), false,
		"certificate")
}

// ---- PLAITA_HTTP_DNS_TTL ----

func TestDNSCacheTTL(t *testing.T) {
	_, _, port := serve(t, echo)
	h := newHarness(t, with(func(o *Options) { o.DNSTTL = 30 * time.Second }))
	h.dns.set("cached.test", []string{"127.0.0.1"})
	p := map[string]any{"url": "http://cached.test:" + port + "/", "allowedHosts": []any{"cached.test"}}

	response(t, h.run(p, nil))
	response(t, h.run(p, nil))
	if n := h.dns.count("cached.test"); n != 1 {
		t.Errorf("%d lookups within the TTL, want 1", n)
	}
	h.clock.advance(31 * time.Second)
	response(t, h.run(p, nil))
	if n := h.dns.count("cached.test"); n != 2 {
		t.Errorf("%d lookups after the TTL, want 2", n)
	}
	// 0 turns the cache off: every request looks the name up.
	off := newHarness(t, with(func(o *Options) { o.DNSTTL = 0 }))
	off.dns.set("cached.test", []string{"127.0.0.1"})
	response(t, off.run(p, nil))
	response(t, off.run(p, nil))
	if n := off.dns.count("cached.test"); n != 2 {
		t.Errorf("%d lookups with the cache off, want 2", n)
	}
}

func TestDNSCacheConcurrent(t *testing.T) {
	h := newHarness(t, with(func(o *Options) { o.DNSTTL = 30 * time.Second }))
	for i := range 20 {
		h.dns.set(fmt.Sprintf("h%d.test", i), []string{"127.0.0.1"})
	}
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				host := fmt.Sprintf("h%d.test", (g+i)%20)
				addrs, err := h.typ.lookup(context.Background(), host)
				if err != nil || len(addrs) != 1 || addrs[0].String() != "127.0.0.1" {
					t.Errorf("%s: %v %v", host, addrs, err)
					return
				}
				if i%50 == 0 {
					h.clock.advance(10 * time.Second)
				}
			}
		}()
	}
	wg.Wait()
}

// ---- PLAITA_HTTP_CONNECTOR_LIMIT ----

func TestConnectorLimit(t *testing.T) {
	var cur, peak atomic.Int32
	release := make(chan struct{})
	_, _, port := serve(t, func(w http.ResponseWriter, r *http.Request) {
		n := cur.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		<-release
		cur.Add(-1)
		io.WriteString(w, "ok")
	})
	h := newHarness(t, with(func(o *Options) { o.ConnectorLimit = 2 }))
	f := h.flow(map[string]any{"url": "http://127.0.0.1:" + port + "/"})
	var wg sync.WaitGroup
	results := make([]*state.Execution, 6)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := h.ex.Start(context.Background(), f, engine.StartRequest{})
			if err != nil {
				t.Errorf("start: %v", err)
			}
			results[i] = st
		}()
	}
	// Wait until the limit is reached; the other four are then held by the limiter, and the
	// server's peak (below) says whether any got past it before the two were released.
	for deadline := time.Now().Add(10 * time.Second); cur.Load() < 2 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	if got := cur.Load(); got != 2 {
		t.Errorf("%d requests in flight, want the limit 2", got)
	}
	close(release)
	wg.Wait()
	if peak.Load() != 2 {
		t.Errorf("peak %d in flight, want 2", peak.Load())
	}
	for _, st := range results {
		if st != nil {
			response(t, st)
		}
	}
}

// ---- PLAITA_HTTP_COOKIES ----

func TestCookies(t *testing.T) {
	_, _, port := serve(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/set" {
			http.SetCookie(w, &http.Cookie{Name: "sid", Value: "abc", Path: "/"})
		}
		echo(w, r)
	})
	def := fmt.Sprintf(`{"id": "cookies", "start": "login", "nodes": [
		{"id": "login", "type": "http", "params": {"url": "http://127.0.0.1:%[1]s/set"}, "next": "fetch"},
		{"id": "fetch", "type": "http", "params": {"url": "http://127.0.0.1:%[1]s/check"}, "next": "done"},
		{"id": "done", "type": "end", "params": {"output": "{{ NODE.fetch.RESPONSE.body.cookie }}"}}]}`, port)
	for _, c := range []struct {
		on   bool
		want string
	}{{true, "sid=abc"}, {false, ""}} {
		h := newHarness(t, with(func(o *Options) { o.Cookies = c.on }))
		f, err := engine.Parse([]byte(def), h.reg, engine.DefaultExprLimits)
		if err != nil {
			t.Fatal(err)
		}
		st := h.start(context.Background(), f, nil)
		if st.Output != c.want {
			t.Errorf("Cookies %v: cookie %q, want %q", c.on, st.Output, c.want)
		}
		// A jar belongs to one execution: a new one starts empty.
		if c.on {
			one := fmt.Sprintf(`{"id": "c2", "start": "fetch", "nodes": [
				{"id": "fetch", "type": "http", "params": {"url": "http://127.0.0.1:%s/check"}, "next": "done"},
				{"id": "done", "type": "end", "params": {"output": "{{ NODE.fetch.RESPONSE.body.cookie }}"}}]}`, port)
			f2, _ := engine.Parse([]byte(one), h.reg, engine.DefaultExprLimits)
			if st := h.start(context.Background(), f2, nil); st.Output != "" {
				t.Errorf("a new execution sent %q", st.Output)
			}
		}
	}
}

// ---- timeouts and cancellation ----

func TestTimeoutIsRetryable(t *testing.T) {
	_, _, port := serve(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(5 * time.Second):
		case <-r.Context().Done():
		}
	})
	h := newHarness(t, DefaultOptions())
	start := time.Now()
	failed(t, h.run(map[string]any{"url": "http://127.0.0.1:" + port + "/", "timeout": 0.2}, nil), false,
		"no response within 200ms (timeout)")
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("took %s", d)
	}
}

func TestRunContextCancelled(t *testing.T) {
	_, _, port := serve(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(5 * time.Second):
		case <-r.Context().Done():
		}
	})
	h := newHarness(t, DefaultOptions())
	f := h.flow(map[string]any{"url": "http://127.0.0.1:" + port + "/"})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := h.ex.Start(ctx, f, engine.StartRequest{})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Start: %v, want the context's error", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("took %s", d)
	}
}

// ---- every rejection names its rule and the variable or param that controls it ----

func TestRejectionMessagesNameTheirRule(t *testing.T) {
	_, _, port := serve(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/loop":
			http.Redirect(w, r, "/loop", http.StatusFound)
		case "/big":
			w.Write(make([]byte, 2048))
		case "/ftp":
			http.Redirect(w, r, "ftp://files.test/x", http.StatusFound)
		}
	})
	h := newHarness(t, with(func(o *Options) { o.MaxResponseBytes = 1024 }))
	h.dns.set("n.test", []string{"127.0.0.1"})
	base := "http://127.0.0.1:" + port
	cases := []struct {
		params map[string]any
		input  any
		want   []string
	}{
		{map[string]any{"url": base + "/", "blockPrivateNetworks": true}, nil,
			[]string{"blocked: ", "loopback", "(blockPrivateNetworks / PLAITA_HTTP_BLOCK_PRIVATE)"}},
		{map[string]any{"url": base + "/", "allowedHosts": []any{"x.test"}}, nil,
			[]string{"blocked: ", "(allowedHosts)"}},
		{map[string]any{"url": "http://n.test:" + port + "/", "deniedHosts": []any{"n.test"}}, nil,
			[]string{"blocked: ", "(deniedHosts)"}},
		{map[string]any{"url": base + "/loop", "maxRedirects": 1}, nil,
			[]string{"too many redirects", "(maxRedirects)"}},
		{map[string]any{"url": base + "/big"}, nil,
			[]string{"response body over 1024 bytes (PLAITA_HTTP_MAX_RESPONSE_BYTES)"}},
		{map[string]any{"url": "{{ INPUT.u }}"}, map[string]any{"u": "ftp://x.test/"},
			[]string{`invalid url "ftp://x.test/": scheme "ftp" is not http or https (url)`}},
		{map[string]any{"url": "{{ INPUT.u }}"}, map[string]any{"u": "/relative"},
			[]string{"invalid url", "not an absolute URL", "(url)"}},
		{map[string]any{"url": "{{ INPUT.u }}"}, map[string]any{"u": 5},
			[]string{"invalid url", "(url)"}},
		{map[string]any{"url": base + "/ftp"}, nil,
			[]string{"redirect 1 from", `invalid url "ftp://files.test/x"`, "(url)"}},
		{map[string]any{"url": base + "/", "headers": map[string]any{"X-A": "{{ INPUT.v }}"}}, map[string]any{"v": "a\r\nB: c"},
			[]string{"headers.X-A", "line break", "(headers)"}},
		{map[string]any{"url": base + "/", "query": map[string]any{"q": "{{ INPUT.v }}"}}, map[string]any{"v": map[string]any{}},
			[]string{"query.q", "(query)"}},
	}
	for _, c := range cases {
		failed(t, h.run(c.params, c.input), true, c.want...)
	}
}

// ---- Prepare validation ----

func TestPrepareProblems(t *testing.T) {
	h := newHarness(t, DefaultOptions())
	cases := []struct {
		params map[string]any
		path   string
		want   string
	}{
		{map[string]any{}, "params.url", "is required"},
		{map[string]any{"url": 5}, "params.url", "must be a string"},
		{map[string]any{"url": "ftp://x.test/"}, "params.url", `scheme "ftp" is not http or https`},
		{map[string]any{"url": "http://"}, "params.url", "no host"},
		{map[string]any{"url": "http://x.test:0/"}, "params.url", "port"},
		{map[string]any{"url": "http://x.test/{{ INPUT. }}"}, "params.url", ""},
		{map[string]any{"url": "http://x.test/", "method": "FETCH"}, "params.method", "use one of GET, HEAD"},
		{map[string]any{"url": "http://x.test/", "headers": map[string]any{"Bad Name": "x"}}, "params.headers.Bad Name", "not a valid header name"},
		{map[string]any{"url": "http://x.test/", "headers": map[string]any{"host": "x"}}, "params.headers.host", "set by the client"},
		{map[string]any{"url": "http://x.test/", "headers": map[string]any{"X-N": 5}}, "params.headers.X-N", "must be a string"},
		{map[string]any{"url": "http://x.test/", "headers": []any{}}, "params.headers", "must be an object"},
		{map[string]any{"url": "http://x.test/", "query": map[string]any{"a": []any{1}}}, "params.query.a[0]", "must be a string"},
		{map[string]any{"url": "http://x.test/", "timeout": 0}, "params.timeout", "more than 0"},
		{map[string]any{"url": "http://x.test/", "timeout": -1}, "params.timeout", "non-negative"},
		{map[string]any{"url": "http://x.test/", "timeout": 1e9}, "params.timeout", "at most"},
		{map[string]any{"url": "http://x.test/", "maxRedirects": -1}, "params.maxRedirects", "between 0"},
		{map[string]any{"url": "http://x.test/", "maxRedirects": 1.5}, "params.maxRedirects", "an integer"},
		{map[string]any{"url": "http://x.test/", "allowedHosts": []any{}}, "params.allowedHosts", "at least one host"},
		{map[string]any{"url": "http://x.test/", "allowedHosts": "x.test"}, "params.allowedHosts", "array of strings"},
		{map[string]any{"url": "http://x.test/", "allowedHosts": []any{"http://x.test"}}, "params.allowedHosts[0]", "not a host name"},
		{map[string]any{"url": "http://x.test/", "deniedHosts": []any{"ok.test", "a.*.test"}}, "params.deniedHosts[1]", "wildcard"},
		{map[string]any{"url": "http://x.test/", "deniedHosts": []any{"*"}}, "params.deniedHosts[0]", "wildcard"},
		{map[string]any{"url": "http://x.test/", "deniedHosts": []any{"x.test:80"}}, "params.deniedHosts[0]", "host:port"},
		{map[string]any{"url": "http://x.test/", "blockPrivateNetworks": "yes"}, "params.blockPrivateNetworks", "true or false"},
		{map[string]any{"url": "http://x.test/", "method": "HEAD", "body": "x"}, "params.body", "HEAD"},
		{map[string]any{"url": "http://x.test/", "redirects": 3}, "params.redirects", "unknown field"},
	}
	for _, c := range cases {
		_, err := h.parse(c.params)
		var ve *engine.ValidationError
		if !errors.As(err, &ve) {
			t.Errorf("%v: err %v, want a validation error", c.params, err)
			continue
		}
		found := false
		for _, p := range ve.Problems {
			if strings.HasPrefix(p.Path, "nodes[0]."+c.path) && strings.Contains(p.Message, c.want) {
				found = true
			}
		}
		if !found {
			t.Errorf("%v: no problem at %s containing %q in %v", c.params, c.path, c.want, ve.Problems)
		}
	}
	// Valid params parse.
	if _, err := h.parse(map[string]any{"url": "https://api.test/{{ INPUT.id }}", "method": "delete", "timeout": 2.5,
		"maxRedirects": 0, "allowedHosts": []any{"*.api.test", "api.test", "10.0.0.1"}, "deniedHosts": []any{"admin.api.test"},
		"blockPrivateNetworks": true, "query": map[string]any{"a": []any{"1", "2"}}, "body": nil}); err != nil {
		t.Errorf("valid params: %v", err)
	}
}

// ---- Options ----

func TestZeroOptionsTakeTheDefaults(t *testing.T) {
	for _, o := range []Options{{}, {MaxResponseBytes: -1, DNSTTL: -time.Second, ConnectorLimit: -1}} {
		typ := New(o, zerolog.Nop())
		want := DefaultOptions()
		want.DNSTTL = 0 // 0 and below turn the cache off: there is no default to fall back to
		if typ.opts != want {
			t.Errorf("%+v runs with %+v, want %+v", o, typ.opts, want)
		}
		if cap(typ.conns) != DefaultConnectorLimit || typ.maxBody != DefaultMaxResponseBytes {
			t.Errorf("%+v: %d connection slots, body cap %d", o, cap(typ.conns), typ.maxBody)
		}
		typ.CloseIdleConnections()
	}
	if d := DefaultOptions(); d.MaxResponseBytes != 10485760 || d.DNSTTL != 30*time.Second || d.ConnectorLimit != 100 || d.Cookies || d.BlockPrivate {
		t.Errorf("DefaultOptions %+v", d)
	}
}
