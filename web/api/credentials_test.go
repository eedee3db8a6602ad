package api_test

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"plaita/store/sqlite"
	"plaita/test/webtest"
	"plaita/web/api"
)

// Credentials over real HTTP, on Redis and in local mode: created, listed, read, replaced and
// deleted by a tenant admin; the value goes in and never comes back — in no answer, no audit
// row — and a viewer may list but not write.
func TestCredentialsOverHTTP(t *testing.T) {
	t.Parallel()
	for name, opts := range map[string][]webtest.Option{"redis": nil, "local": {webtest.WithLocal()}} {
		t.Run(name, func(t *testing.T) {
			f := webtest.New(t, opts...)
			f.Tenant(t, "acme")
			admin := f.Key(f.APIKey(t, "acme", sqlite.RoleAdmin))
			viewer := f.Key(f.APIKey(t, "acme", sqlite.RoleViewer))
			const value = "ghp_0123456789abcdefSECRET"
			var raw []string
			r := admin.Want(t, http.StatusCreated, http.MethodPost, "/api/credentials", map[string]any{"name": "github_token", "value": value})
			raw = append(raw, string(r.Raw))
			if r.Body["name"] != "github_token" || r.Body["rev"] != 1.0 || !strings.HasPrefix(fmt.Sprint(r.Body["fingerprint"]), "hmac-sha256:") ||
				r.Body["key_id"] != f.CredentialsKey.ID() || r.Body["value"] != nil {
				t.Fatalf("create: %s", r.Raw)
			}
			first := r.Body["fingerprint"]
			if p := admin.Want(t, http.StatusConflict, http.MethodPost, "/api/credentials", map[string]any{"name": "github_token", "value": "x-other"}).Problem(t); p.Code != "credential_exists" {
				t.Fatalf("a second create: %+v", p)
			}
			if p := admin.Want(t, http.StatusBadRequest, http.MethodPost, "/api/credentials", map[string]any{"name": "1 bad", "value": "x"}).Problem(t); p.Code != "invalid_credential" {
				t.Fatalf("a bad name: %+v", p)
			}
			viewer.Want(t, http.StatusForbidden, http.MethodPost, "/api/credentials", map[string]any{"name": "mine", "value": "x"})
			// Another tenant's admin is refused in acme, to read as to write.
			f.Tenant(t, "beta")
			other := f.Key(f.APIKey(t, "beta", sqlite.RoleAdmin))
			other.Want(t, http.StatusForbidden, http.MethodGet, "/api/credentials", nil, api.HeaderTenant, "acme")
			other.Want(t, http.StatusForbidden, http.MethodPost, "/api/credentials", map[string]any{"name": "mine", "value": "x"}, api.HeaderTenant, "acme")
			if r := other.Want(t, http.StatusOK, http.MethodGet, "/api/credentials", nil); len(r.Body["items"].([]any)) != 0 {
				t.Fatalf("beta sees acme's credentials: %s", r.Raw)
			}
			r = viewer.Want(t, http.StatusOK, http.MethodGet, "/api/credentials", nil)
			raw = append(raw, string(r.Raw))
			if items, _ := r.Body["items"].([]any); len(items) != 1 || items[0].(map[string]any)["name"] != "github_token" {
				t.Fatalf("list: %s", r.Raw)
			}
			r = admin.Want(t, http.StatusOK, http.MethodPut, "/api/credentials/github_token", map[string]any{"value": value + "-2"})
			raw = append(raw, string(r.Raw))
			if r.Body["rev"] != 2.0 || r.Body["fingerprint"] == first {
				t.Fatalf("set: %s", r.Raw)
			}
			r = viewer.Want(t, http.StatusOK, http.MethodGet, "/api/credentials/github_token", nil)
			raw = append(raw, string(r.Raw))
			admin.Want(t, http.StatusNoContent, http.MethodDelete, "/api/credentials/github_token", nil)
			if p := admin.Want(t, http.StatusNotFound, http.MethodGet, "/api/credentials/github_token", nil).Problem(t); p.Code != "credential_not_found" {
				t.Fatalf("read after the delete: %+v", p)
			}
			created := false
			for _, row := range f.AuditRows(t) {
				raw = append(raw, fmt.Sprintf("%+v %s", row, row.Details))
				created = created || row.Action == "credential.create" && row.Target == "github_token" && row.Outcome == "allow" &&
					strings.Contains(string(row.Details), "hmac-sha256:")
			}
			if !created {
				t.Fatal("no audit row of the create with its fingerprint")
			}
			for _, s := range raw {
				for _, form := range []string{"0123456789abcdefSECRET", base64.StdEncoding.EncodeToString([]byte(value))} {
					if strings.Contains(s, form) {
						t.Fatalf("the value shows: %s", s)
					}
				}
			}
		})
	}
}
