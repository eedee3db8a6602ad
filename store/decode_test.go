package store_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"plaita/engine/state"
	"plaita/store"
)

// FuzzDecodeState: Decode reads a state as encoding/json's Unmarshal reads it — the same
// values, and an error exactly when Unmarshal has one (or the state has no execution_id).
func FuzzDecodeState(f *testing.F) {
	for _, seed := range []string{
		`{"execution_id":"ex_1","status":"completed","input":{},"context":{"$NODE":{"s1":"ok"}},"node_timings":{"s1":{"runs":1,"first_started":"2026-12-06T03:19:51.266822016Z","last_started":"2026-12-06T03:19:51.266822016Z","last_ended":"2026-12-06T03:19:51.266822798Z","total_ms":0}},"step_count":1,"output":"ok","start_time":"2026-12-06T03:19:51.266816176Z","last_update_time":"2026-12-06T03:19:51.266822798Z","end_time":"2026-12-06T03:19:51.266825543Z","timeline":[{"seq":1,"time":"2026-12-06T03:19:51.266816176Z","node":"s1","event":"started"}],"branches":{}}`,
		`{"execution_id":"ex_2","status":"suspended","input":{"order":{"id":"o-1","lines":[{"sku":"a","qty":2,"price":9.99}],"note":"<b>&amp;</b> \u2028 \ud83d\ude00 \ud800"}},"context":{"$NODE":{"h":{"RESPONSE":{"status":200,"body":{"ok":true,"v":[1,2.5e-7,1e21,null,-0]}}}},"$VARS":{"n":3}},"suspend":{"kind":"event","node":"w","since":"2026-01-02T03:04:05+01:00","due":"2026-01-02T04:04:05-05:30","event_type":"payment","match":"EVENT.id == INPUT.order.id","correlation":[{"path":["id"],"value":"\"o-1\""}]},"error":{"type":"http","message":"boom","node":"h","permanent":true},"index":{"order":"\"o-1\""},"last_resume":{"type":"event","node":"w","key":"1-0","at":"2026-01-02T03:04:05Z"},"node_attempts":{"h":2},"timeline_dropped":4,"branches":{"c":{"true":1,"case 2":3}},"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01","tracestate":"a=b"}`,
		`{"Execution_ID":"ex_3","STATUS":"running","execution_id":"ex_4","step_count":1e2,"context":null,"branches":null} `,
		`{"execution_id":"ex_5","step_count":1.5,"input":1e400}`,
		`{"execution_id":"ex_6","start_time":"2026-13-01T00:00:00Z","end_time":null,"suspend":{"due":"x"}}`,
		`{"execution_id":"ex_7","input":"\xff\xfe"}`,
		`{"execution_id":"ex_8"} {"execution_id":"ex_9"}`,
		`[]`, `null`, ``, `{"execution_id":""}`, `{"execution_id":7}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var want state.Execution
		wantErr := json.Unmarshal(raw, &want)
		if wantErr == nil && want.ExecutionID == "" {
			wantErr = errors.New("no execution_id")
		}
		got, err := store.Decode(raw)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("Decode error %v, encoding/json's %v", err, wantErr)
		}
		if err != nil {
			if !errors.Is(err, store.ErrStateCorrupt) {
				t.Fatalf("Decode error %v is not ErrStateCorrupt", err)
			}
			return
		}
		if !reflect.DeepEqual(*got, want) {
			t.Fatalf("Decode read\n%#v\nencoding/json reads\n%#v", *got, want)
		}
	})
}
