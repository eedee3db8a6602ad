package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"plaita/store"
	"plaita/store/sqlite"
	"plaita/test/webtest"
	"plaita/web/api"
)

// FuzzRequestBodies feeds arbitrary bodies to the routes that decode one, through the whole
// handler (access check, huma's decoding and validation, the operation): whatever arrives is
// answered, as a Problem when refused, and never with a 500.
func FuzzRequestBodies(f *testing.F) {
	fx := webtest.New(f)
	fx.Tenant(f, "acme")
	// A schedule for the schedule writes to act on (the fuzzer's bodies may change it: every
	// change is checked, and none may answer 500).
	if _, err := fx.Plane.AddSchedule(context.Background(), store.Schedule{ID: "s1", TenantID: "acme", Cron: "@daily", FlowID: "ask"}); err != nil {
		f.Fatal(err)
	}
	key := fx.APIKey(f, "acme", sqlite.RoleAdmin)
	routes := []string{
		"POST /api/executions", "POST /api/flows", "POST /api/flows/validate", "POST /api/executions/ex_1/resume",
		"PUT /api/members", "POST /api/api-keys", "POST /api/login", "POST /api/tenants", "POST /api/users", "PATCH /api/users/usr_1",
		"POST /api/jobs",
		"POST /api/events", "POST /api/schedules", "PATCH /api/schedules/s1", "POST /api/schedules/s1/enable", "POST /api/approvals/ex_1",
		"POST /api/dead-letters/1-1/replay", "POST /api/cluster/tenant-status/reconcile",
		"POST /api/flows/drafts", "PUT /api/flows/drafts/ask", "POST /api/flows/drafts/ask/publish",
	}
	for _, seed := range []string{
		`{"flow_id":"ask","input":{"a":1}}`, `{"definition":` + webtest.ApprovalFlow + `}`, `{"type":"approval","data":{"approved":true}}`,
		`{"login":"x","role":"viewer"}`, `{"name":"k","role":"admin"}`, `{"login":"a","password":"b"}`, `{"slug":"t1"}`,
		`{"action":"cancel","filter":{"status":"running","flow_id":"ask"},"dry_run":true}`, `{"action":"replay","filter":{"reason":"poison","kind":"start"},"max_items":3}`,
		`{"action":"delete","filter":{"started_after":"2020-01-01T00:00:00Z","started_before":"2030-01-01T00:00:00Z","force":true},"dry_run":true}`,
		`{"flow_id":`, `[]`, `null`, `{"flow_id":"a","flow_id":"b"}`, `{"n":1e999}`, "\xff\xfe", `{"definition":{"id":"x","nodes":[{}]}}`,
		`{"type":"order.paid","data":{"order":1}}`, `{"type":"a","id":"evt 1","data":null}`, `{"cron":"*/5 * * * *","flow_id":"ask","input":[1]}`,
		`{"cron":"@every 1s","time_zone":"Mars/Olympus"}`, `{"approved":true,"comment":"ok"}`, `{"approved":"yes"}`, `{"enabled":false}`,
		`{"flow_id":"ask","definition":{"id":"ask","start":"a"}}`, `{"definition":{"id":"other"}}`, `{"version":"2"}`, `{"version":"a:b"}`,
		`{"type":"continue","allow_flow_hash_change":true,"data":[1]}`,
	} {
		for i := range routes {
			f.Add(uint8(i), []byte(seed))
		}
	}
	h := fx.Srv.Handler()
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		method, path, _ := strings.Cut(routes[int(which)%len(routes)], " ")
		req := httptest.NewRequest(method, path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if path == "/api/tenants" || path == "/api/users" || strings.HasPrefix(path, "/api/users/") || strings.HasPrefix(path, "/api/cluster/") {
			req.Header.Set(api.HeaderAdminKey, webtest.AdminKey)
		} else {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code >= http.StatusInternalServerError {
			t.Fatalf("%s %s %q: %d %s", method, path, body, rec.Code, rec.Body.Bytes())
		}
		if rec.Code >= 400 {
			var p api.Problem
			if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil || p.Code == "" || p.Status != rec.Code {
				t.Fatalf("%s %s %q: %d is not a Problem: %s", method, path, body, rec.Code, rec.Body.Bytes())
			}
		}
	})
}
