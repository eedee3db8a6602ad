package httpnode

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"plaita/engine"
	"plaita/engine/state"
)

// resolver is a tenant's credentials by name (a map: the node's side of the resolver, not the
// sealed store, which control/credentials_test.go covers).
type resolver map[string]string

func (r resolver) Resolve(_ context.Context, tenant, name string) ([]byte, error) {
	if tenant == "" {
		tenant = "default"
	}
	v, ok := r[tenant+"/"+name]
	if !ok {
		return nil, engine.Permanent(fmt.Errorf("credential %s not found in tenant %s", name, tenant))
	}
	return []byte(v), nil
}

const token = "ghp_s3cr3t-VALUE/with+chars"

// The credential goes into its header, prefixed; a server that echoes it back (body and a
// header) leaves no trace of it in the execution: the output shows "[credential NAME]".
func TestCredentialHeaderSentAndScrubbed(t *testing.T) {
	var mu sync.Mutex
	var got string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = r.Header.Get("Authorization")
		mu.Unlock()
		w.Header().Set("X-Echo", r.Header.Get("Authorization"))
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"you_sent": %q, "escaped": %q, "base64": %q}`, r.Header.Get("Authorization"), "a="+url.QueryEscape(token),
			base64.StdEncoding.EncodeToString([]byte(token)))
	}))
	defer srv.Close()
	h := newHarness(t, DefaultOptions())
	h.ex.Credentials = resolver{"default/github_token": token}
	st := h.run(map[string]any{"url": srv.URL + "/x",
		"credentialHeaders": map[string]any{"Authorization": map[string]any{"credential": "github_token", "prefix": "Bearer "}}}, nil)
	resp := response(t, st)
	mu.Lock()
	if got != "Bearer "+token {
		t.Fatalf("the server got %q", got)
	}
	mu.Unlock()
	body := fmt.Sprint(resp)
	if strings.Contains(body, "s3cr3t") || !strings.Contains(body, "[credential github_token]") {
		t.Fatalf("the output is not scrubbed: %s", body)
	}
	if strings.Contains(fmt.Sprint(st), "s3cr3t") {
		t.Fatalf("the state holds the value: %+v", st)
	}
}

// Without a resolver, or with a credential the tenant lacks, the node fails naming the
// credential — permanent, and without any value.
func TestCredentialMissing(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") }))
	defer srv.Close()
	params := map[string]any{"url": srv.URL, "credentialHeaders": map[string]any{"X-Api-Key": map[string]any{"credential": "api"}}}
	h := newHarness(t, DefaultOptions())
	st := h.run(params, nil)
	msg := failed(t, st, true, "credential api for header X-Api-Key")
	if !strings.Contains(msg, "PLAITA_CREDENTIALS_KEY") {
		t.Fatalf("message %q", msg)
	}
	h.ex.Credentials = resolver{"other/api": "theirs-value"}
	st = h.run(params, nil)
	if msg := failed(t, st, true, "credential api", "not found"); strings.Contains(msg, "theirs") {
		t.Fatalf("another tenant's value: %q", msg)
	}
}

// A redirect to another host does not carry the credential header.
func TestCredentialHeaderNotFollowingARedirectElsewhere(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]string{}
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.Host+r.URL.Path] = r.Header.Get("X-Api-Key")
		mu.Unlock()
		if r.URL.Path == "/first" {
			http.Redirect(w, r, strings.Replace(srv.URL, "127.0.0.1", "localhost", 1)+"/second", http.StatusFound)
			return
		}
		fmt.Fprint(w, "ok")
	}))
	defer srv.Close()
	h := newHarness(t, DefaultOptions())
	h.dns.set("localhost", []string{"127.0.0.1"})
	h.ex.Credentials = resolver{"default/api": token}
	st := h.run(map[string]any{"url": srv.URL + "/first", "credentialHeaders": map[string]any{"X-Api-Key": map[string]any{"credential": "api"}}}, nil)
	if st.Status != state.Completed {
		t.Fatalf("status %s: %+v", st.Status, st.Error)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 2 {
		t.Fatalf("the requests: %v (status %s, %+v)", seen, st.Status, st.Error)
	}
	for where, v := range seen {
		if strings.HasPrefix(where, "localhost") && v != "" {
			t.Fatalf("the credential followed the redirect to %s", where)
		}
		if strings.HasPrefix(where, "127.0.0.1") && v != token {
			t.Fatalf("the first host got %q", v)
		}
	}
}

// Bad params are refused when the flow is parsed.
func TestCredentialHeadersRefused(t *testing.T) {
	h := newHarness(t, DefaultOptions())
	for name, creds := range map[string]any{
		"not an object":   "Authorization",
		"no name":         map[string]any{"Authorization": map[string]any{"prefix": "Bearer "}},
		"bad name":        map[string]any{"Authorization": map[string]any{"credential": "1 bad"}},
		"unknown field":   map[string]any{"Authorization": map[string]any{"credential": "a", "value": "x"}},
		"forbidden":       map[string]any{"Host": map[string]any{"credential": "a"}},
		"also a template": map[string]any{"X-Key": map[string]any{"credential": "a"}},
	} {
		params := map[string]any{"url": "http://example.com", "credentialHeaders": creds, "headers": map[string]any{"x-key": "v"}}
		if _, err := h.parse(params); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
}
