package httpnode

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// flood answers with n headers X-Flood-0000 … of size bytes each (name, value and framing
// together about size+20 bytes on the wire), then a short body.
func flood(n, size int) http.HandlerFunc {
	value := strings.Repeat("v", size)
	return func(w http.ResponseWriter, r *http.Request) {
		for i := range n {
			w.Header().Set(fmt.Sprintf("X-Flood-%04d", i), value)
		}
		io.WriteString(w, "body")
	}
}

// A server that sends a megabyte of headers is refused with the cap in the message, whether
// the request runs on the shared transport or on one built for a host policy.
func TestResponseHeadersCapped(t *testing.T) {
	_, _, port := serve(t, flood(1024, 1024))
	h := newHarness(t, DefaultOptions())
	h.dns.set("flood.test", []string{"127.0.0.1"})
	for _, params := range []map[string]any{
		{"url": "http://127.0.0.1:" + port + "/"},
		{"url": "http://flood.test:" + port + "/", "allowedHosts": []any{"flood.test"}},
	} {
		msg := failed(t, h.run(params, nil), true, "response headers too large", "65536 bytes")
		t.Log(msg)
	}
}

func TestResponseHeadersCapOption(t *testing.T) {
	_, _, port := serve(t, flood(8, 1024))
	// Under the default cap: 8 KiB of headers pass.
	resp := response(t, newHarness(t, DefaultOptions()).run(map[string]any{"url": "http://127.0.0.1:" + port + "/"}, nil))
	if resp["body"] != "body" {
		t.Errorf("body %v", resp["body"])
	}
	h := newHarness(t, DefaultOptions(), WithHeaderLimits(HeaderLimits{MaxBytes: 4096}))
	h.dns.set("flood.test", []string{"127.0.0.1"})
	for _, params := range []map[string]any{
		{"url": "http://127.0.0.1:" + port + "/"},
		{"url": "http://flood.test:" + port + "/", "allowedHosts": []any{"flood.test"}},
	} {
		failed(t, h.run(params, nil), true, "response headers too large", "4096 bytes")
	}
}

// Over HTTP/2 the cap is the header list size the client advertises. A server a little over
// it gets the same clear, permanent error; a flood far over it makes net/http close the
// connection before decoding the headers, which surfaces as a plain (retryable) protocol
// error: either way nothing of the headers reaches the result.
func TestResponseHeadersCappedHTTP2(t *testing.T) {
	for _, tc := range []struct {
		headers   int
		permanent bool
		want      string
	}{
		{70, true, "response headers too large"}, // 70 × 1 KiB: just over 64 KiB
		{1024, false, "PROTOCOL_ERROR"},          // 1 MiB
	} {
		srv := httptest.NewUnstartedServer(flood(tc.headers, 1000))
		srv.EnableHTTP2 = true
		srv.Config.ErrorLog = log.New(io.Discard, "", 0)
		srv.StartTLS()
		t.Cleanup(srv.Close)
		su, _ := url.Parse(srv.URL)
		pool := x509.NewCertPool()
		pool.AddCert(srv.Certificate())
		h := newHarness(t, DefaultOptions(), WithTLSConfig(&tls.Config{RootCAs: pool}))
		h.dns.set("example.com", []string{"127.0.0.1"})
		st := h.run(map[string]any{"url": "https://example.com:" + su.Port() + "/", "allowedHosts": []any{"example.com"}}, nil)
		failed(t, st, tc.permanent, tc.want)
		if out := st.Nodes()["fetch"]; out != nil {
			t.Errorf("%d headers: the node has a result: %v", tc.headers, out)
		}
	}
}

// Many small headers fit the transport's cap; the result keeps at most DefaultKeepHeaderFields
// of them and DefaultKeepHeaderBytes of names and values, in name order, and says so.
func TestResponseHeadersKeptWithinTheCap(t *testing.T) {
	_, _, port := serve(t, flood(1000, 8))
	h := newHarness(t, DefaultOptions())
	resp := response(t, h.run(map[string]any{"url": "http://127.0.0.1:" + port + "/"}, nil))
	headers := resp["headers"].(map[string]any)
	fields, bytes := 0, 0
	for k, v := range headers {
		vals, ok := v.([]any)
		if !ok {
			vals = []any{v}
		}
		for _, s := range vals {
			fields++
			bytes += len(k) + len(s.(string))
		}
	}
	if fields > DefaultKeepHeaderFields || bytes > DefaultKeepHeaderBytes {
		t.Errorf("kept %d header fields, %d bytes: over %d / %d", fields, bytes, DefaultKeepHeaderFields, DefaultKeepHeaderBytes)
	}
	if fields < DefaultKeepHeaderFields/2 {
		t.Errorf("kept only %d header fields", fields)
	}
	if resp["headers_truncated"] != true {
		t.Errorf("headers_truncated = %v", resp["headers_truncated"])
	}
	if d, _ := resp["headers_dropped"].(float64); int(d)+fields != 1000+3 { // + Content-Type, Content-Length, Date
		t.Errorf("headers_dropped = %v with %d kept, want %d in all", resp["headers_dropped"], fields, 1003)
	}
	// The kept ones are the first in name order: the same on every run.
	if headers["Content-Length"] != "4" || headers["X-Flood-0000"] != "vvvvvvvv" || headers["X-Flood-0999"] != nil {
		t.Errorf("kept %v", headers)
	}
	if resp["body"] != "body" {
		t.Errorf("body %v", resp["body"])
	}

	// Fewer, larger headers: the byte bound applies first.
	_, _, port2 := serve(t, flood(50, 1000))
	resp = response(t, h.run(map[string]any{"url": "http://127.0.0.1:" + port2 + "/"}, nil))
	bytes = 0
	for k, v := range resp["headers"].(map[string]any) {
		bytes += len(k) + len(v.(string))
	}
	if bytes > DefaultKeepHeaderBytes || bytes < DefaultKeepHeaderBytes-1100 || resp["headers_truncated"] != true {
		t.Errorf("kept %d bytes of headers (bound %d), truncated %v", bytes, DefaultKeepHeaderBytes, resp["headers_truncated"])
	}

	// A response within the limits is kept whole, with no truncation mark.
	_, _, port3 := serve(t, flood(10, 8))
	resp = response(t, h.run(map[string]any{"url": "http://127.0.0.1:" + port3 + "/"}, nil))
	_, marked := resp["headers_truncated"]
	_, counted := resp["headers_dropped"]
	if marked || counted || len(resp["headers"].(map[string]any)) != 13 {
		t.Errorf("a small response: %v", resp)
	}
}

func TestKeptHeadersLimits(t *testing.T) {
	hdr := http.Header{
		"A":   {"1", "22", "333"},
		"B":   {"4444"},
		"C-D": {"55555"},
	}
	for _, tc := range []struct {
		fields, bytes int
		want          string
		dropped       int
	}{
		{100, 1000, "map[A:[1 22 333] B:4444 C-D:55555]", 0},
		{2, 1000, "map[A:[1 22]]", 3},
		{1, 1000, "map[A:[1]]", 4},
		{100, 9, "map[A:[1 22 333]]", 2},         // A+1, A+22, A+333 = 9 bytes
		{100, 14, "map[A:[1 22 333] B:4444]", 1}, // + B4444 = 14
		{100, 13, "map[A:[1 22 333]]", 2},        // B does not fit, and nothing after it is kept
		{3, 1000, "map[A:[1 22 333]]", 2},        // a list cut at the field bound stays a list
		{100, 1, "map[]", 5},
	} {
		got, dropped := keptHeaders(hdr, HeaderLimits{KeepFields: tc.fields, KeepBytes: tc.bytes}.withDefaults())
		if fmt.Sprint(got) != tc.want || dropped != tc.dropped {
			t.Errorf("fields %d bytes %d: got %v, %d dropped; want %s, %d", tc.fields, tc.bytes, got, dropped, tc.want, tc.dropped)
		}
	}
	var err error = fmt.Errorf("x: %w", errors.New("net/http: server response headers exceeded 65536 bytes; aborted"))
	if !headersTooLarge(err) || headersTooLarge(errors.New("EOF")) || headersTooLarge(nil) {
		t.Error("headersTooLarge")
	}
}
