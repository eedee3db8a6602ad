package api_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/danielgtaylor/huma/v2"

	"plaita/control"
	"plaita/test/webtest"
)

// executionSideRoutes are the routes over the executions, flows, events, schedules,
// approvals, dead letters and bulk jobs: their bodies are the console's own wire types.
var executionSideRoutes = []string{
	"flow-list", "flow-get", "flow-validate", "flow-publish",
	"draft-list", "draft-create", "draft-get", "draft-save", "draft-delete", "draft-publish",
	"execution-start", "execution-list", "execution-get", "execution-resume", "execution-cancel", "execution-delete",
	"execution-events", "execution-stream", "execution-timeline",
	"event-publish", "event-list",
	"dead-letter-list", "dead-letter-get", "dead-letter-replay",
	"schedule-list", "schedule-create", "schedule-get", "schedule-update", "schedule-delete", "schedule-enable", "schedule-disable",
	"approval-list", "approval-answer",
	"job-create", "job-list", "job-get", "job-items", "job-cancel",
}

// storagePackages are what a wire type must not reach: a change of storage would change the API.
var storagePackages = []string{"plaita/store", "plaita/queue"}

// TestBodiesAreNoStorageTypes: every request and response body (and every live event's data)
// of those routes is built of the console's, control's and the engine's types, never of a type
// of storage or of the queue, at any depth.
func TestBodiesAreNoStorageTypes(t *testing.T) {
	t.Parallel()
	f := webtest.New(t, webtest.WithoutRedis())
	doc := f.Srv.OpenAPI()
	reg := doc.Components.Schemas
	ops := map[string]*huma.Operation{}
	for _, item := range doc.Paths {
		for _, op := range []*huma.Operation{item.Get, item.Post, item.Put, item.Patch, item.Delete} {
			if op != nil {
				ops[op.OperationID] = op
			}
		}
	}
	for _, id := range executionSideRoutes {
		op := ops[id]
		if op == nil {
			t.Errorf("no operation %s", id)
			continue
		}
		var refs []string
		if op.RequestBody != nil {
			for _, mt := range op.RequestBody.Content {
				refs = append(refs, schemaRefs(mt.Schema)...)
			}
		}
		for status, res := range op.Responses {
			if status[0] != '2' {
				continue
			}
			for _, mt := range res.Content {
				refs = append(refs, schemaRefs(mt.Schema)...)
			}
		}
		for _, ref := range refs {
			typ := reg.TypeFromRef(ref)
			if typ == nil {
				t.Errorf("%s: %s has no Go type", id, ref)
				continue
			}
			if path := storageField(typ, typ.String(), map[reflect.Type]bool{}); path != "" {
				t.Errorf("%s: its body reaches a storage type: %s", id, path)
			}
		}
		// A JSON answer is a type of the console's own, not a type it borrowed.
		for status, res := range op.Responses {
			if mt := res.Content["application/json"]; status[0] == '2' && mt != nil && mt.Schema != nil && mt.Schema.Ref != "" {
				if typ := reg.TypeFromRef(mt.Schema.Ref); typ != nil && typ.PkgPath() != "plaita/web/api" {
					t.Errorf("%s: answers %s, not a wire type of the console's", id, typ)
				}
			}
		}
	}
}

// TestListLimitsAreThePolicy: each list's limit is bounded by the policy of control/pages.go,
// and defaults to it where the list has no default of its own (huma's tags are literals: this
// pins them to the constants).
func TestListLimitsAreThePolicy(t *testing.T) {
	t.Parallel()
	f := webtest.New(t, webtest.WithoutRedis())
	doc := f.Srv.OpenAPI()
	type limit struct {
		op, param string
		max, def  int
	}
	for _, l := range []limit{
		{"flow-list", "limit", control.MaxFlowList, 100},
		{"draft-list", "limit", control.MaxListLimit, control.DefaultListLimit},
		{"execution-list", "limit", control.MaxListLimit, control.DefaultListLimit},
		{"execution-timeline", "limit", control.MaxTimelineLimit, control.DefaultTimelineLimit},
		{"event-list", "limit", control.MaxEventList, control.DefaultListLimit},
		{"dead-letter-list", "limit", control.MaxListLimit, control.DefaultListLimit},
		{"schedule-list", "limit", control.MaxScheduleList, 100},
		{"approval-list", "limit", control.MaxListLimit, control.DefaultListLimit},
		{"job-list", "limit", control.MaxListLimit, control.DefaultListLimit},
		{"job-get", "failures_limit", control.MaxListLimit, control.DefaultListLimit},
		{"job-items", "limit", control.MaxListLimit, control.DefaultListLimit},
	} {
		var param *huma.Param
		for _, item := range doc.Paths {
			if item.Get != nil && item.Get.OperationID == l.op {
				for _, p := range item.Get.Parameters {
					if p.Name == l.param && p.In == "query" {
						param = p
					}
				}
			}
		}
		if param == nil || param.Schema == nil {
			t.Errorf("%s: no query parameter %s", l.op, l.param)
			continue
		}
		if m := param.Schema.Maximum; m == nil || *m != float64(l.max) {
			t.Errorf("%s: %s's maximum is %v, the policy's %d", l.op, l.param, deref(m), l.max)
		}
		if param.Schema.Default != float64(l.def) && param.Schema.Default != int64(l.def) && param.Schema.Default != l.def {
			t.Errorf("%s: %s's default is %v (%T), the policy's %d", l.op, l.param, param.Schema.Default, param.Schema.Default, l.def)
		}
	}
}

// schemaRefs are the component references of a schema, a stream's events' data included.
func schemaRefs(s *huma.Schema) []string {
	if s == nil {
		return nil
	}
	var out []string
	if s.Ref != "" {
		out = append(out, s.Ref)
	}
	out = append(out, schemaRefs(s.Items)...)
	for _, p := range s.Properties {
		out = append(out, schemaRefs(p)...)
	}
	if one, ok := s.Extensions["oneOf"].([]*huma.Schema); ok {
		for _, o := range one {
			out = append(out, schemaRefs(o)...)
		}
	}
	return out
}

// storageField is the path to the first field of t (named path) whose type is storage's, or "".
func storageField(t reflect.Type, path string, seen map[reflect.Type]bool) string {
	if seen[t] {
		return ""
	}
	seen[t] = true
	if pkg := t.PkgPath(); pkg != "" && slices.ContainsFunc(storagePackages, func(s string) bool { return pkg == s || strings.HasPrefix(pkg, s+"/") }) {
		return path + " (" + t.String() + ")"
	}
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return storageField(t.Elem(), path+"[]", seen)
	case reflect.Map:
		if p := storageField(t.Key(), path+"{key}", seen); p != "" {
			return p
		}
		return storageField(t.Elem(), path+"{}", seen)
	case reflect.Struct:
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() || f.Tag.Get("json") == "-" {
				continue
			}
			if p := storageField(f.Type, path+"."+f.Name, seen); p != "" {
				return p
			}
		}
	}
	return ""
}

// deref is *p, or nil when p is nil (for a message).
func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}
