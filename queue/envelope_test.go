package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"plaita/test/redistest"
)

func TestValidate(t *testing.T) {
	ok := Envelope{SchemaVersion: 1, Kind: KindStart, FlowID: "f", ExecutionID: "ex_1"}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	resume := Envelope{SchemaVersion: 1, Kind: KindResume, ExecutionID: "ex_1", ResumeType: "approval"}
	if err := resume.Validate(); err != nil {
		t.Fatal(err)
	}
	cases := map[string]func(e *Envelope){
		"no kind":          func(e *Envelope) { e.Kind = "" },
		"bad kind":         func(e *Envelope) { e.Kind = "stop" },
		"no flow":          func(e *Envelope) { e.FlowID = "" },
		"no execution id":  func(e *Envelope) { e.ExecutionID = "" },
		"bad execution id": func(e *Envelope) { e.ExecutionID = "a}b" },
		"resume type":      func(e *Envelope) { e.ResumeType = "event" },
		"bad tenant":       func(e *Envelope) { e.TenantID = "Acme Corp" },
		"reserved tenant":  func(e *Envelope) { e.TenantID = "execution" },
		"schema 0":         func(e *Envelope) { e.SchemaVersion = 0 },
		"newer schema":     func(e *Envelope) { e.SchemaVersion = SchemaVersion + 1 },
		"negative defer":   func(e *Envelope) { e.QuotaDeferCount = -1 },
	}
	for name, mutate := range cases {
		e := ok
		mutate(&e)
		if err := e.Validate(); !errors.Is(err, ErrInvalidEnvelope) {
			t.Errorf("%s: %v", name, err)
		}
	}
	for name, mutate := range map[string]func(e *Envelope){
		"no resume type":  func(e *Envelope) { e.ResumeType = "" },
		"bad resume type": func(e *Envelope) { e.ResumeType = "wake" },
		"no execution id": func(e *Envelope) { e.ExecutionID = "" },
	} {
		e := resume
		mutate(&e)
		if err := e.Validate(); !errors.Is(err, ErrInvalidEnvelope) {
			t.Errorf("resume %s: %v", name, err)
		}
	}
}

func TestDecode(t *testing.T) {
	const stream, id = "s", "1700000000000-0"
	cases := []struct {
		payload string
		err     error // nil, ErrMalformed or ErrNewerSchema
	}{
		{`{"schema_version":1,"kind":"start","flow_id":"f","execution_id":"ex_1"}`, nil},
		{`{"schema_version":1,"kind":"start","flow_id":"f","execution_id":"ex_1","tenant_id":null,"input":null}`, nil},
		{`{"schema_version":1,"kind":"start","flow_id":"f","execution_id":"ex_1","unknown":1}`, nil},
		{`{"schema_version":1,"kind":"start","flow_id":"f","execution_id":"ex_1","created_at":"2026-01-02T03:04:05Z"}`, nil},
		{`{"schema_version":1,"kind":"start","flow_id":"f","execution_id":"ex_1","created_at":1700000000.25}`, nil},
		{`{"schema_version":2,"kind":"whatever","flow_id":7}`, ErrNewerSchema},
		{``, ErrMalformed},
		{`null`, ErrMalformed},
		{`"start"`, ErrMalformed},
		{`{}`, ErrMalformed},
		{`{"schema_version":1.5,"kind":"start","flow_id":"f","execution_id":"ex_1"}`, ErrMalformed},
		{`{"schema_version":0,"kind":"start","flow_id":"f","execution_id":"ex_1"}`, ErrMalformed},
		{`{"schema_version":1,"Kind":"start","flow_id":"f","execution_id":"ex_1"}`, ErrMalformed}, // names are exact
		{`{"schema_version":1,"kind":"start","flow_id":["f"],"execution_id":"ex_1"}`, ErrMalformed},
		{`{"schema_version":1,"kind":"start","flow_id":"f","execution_id":"ex_1","quota_bypass":"yes"}`, ErrMalformed},
		{`{"schema_version":1,"kind":"start","flow_id":"f","execution_id":"ex_1","created_at":"yesterday"}`, ErrMalformed},
		{`{"schema_version":1,"kind":"start","flow_id":"f","execution_id":"ex_1","config_family":5}`, ErrMalformed},
		{`{"schema_version":1,"kind":"resume","execution_id":"ex_1"}`, ErrMalformed},
		{`{"schema_version":1,"kind":"resume","execution_id":"ex_1","resume_type":"event","tenant_id":"A B"}`, ErrMalformed},
	}
	for _, tc := range cases {
		_, _, err := Decode(stream, id, []byte(tc.payload))
		if tc.err == nil && err != nil || tc.err != nil && !errors.Is(err, tc.err) {
			t.Errorf("%s: got %v, want %v", tc.payload, err, tc.err)
		}
	}
}

// TestDecodeMemberGivenTwice: a member given twice keeps its last value, known or not, on the
// fast split (plain keys) and on encoding/json's (an escaped key sends a payload there).
func TestDecodeMemberGivenTwice(t *testing.T) {
	for _, payload := range []string{
		`{"schema_version":1,"kind":"start","flow_id":"f","execution_id":"ex_1","flow_id":"g","x":1,"x":[2]}`,
		`{"schema_version":1,"kind":"start","flow_id":"f","execution_id":"ex_1","flow_id":"g","x":1,"x":[2],"\u0079":0}`,
	} {
		env, _, err := Decode("s", "1-1", []byte(payload))
		if err != nil || env.FlowID != "g" || string(env.Extra["x"]) != "[2]" {
			t.Errorf("%s: flow %q, extra %s, %v", payload, env.FlowID, env.Extra["x"], err)
		}
	}
}

func TestDecodeKeepsGatingFieldsOfBadPayloads(t *testing.T) {
	env, _, err := Decode("s", "1-1", []byte(`{"schema_version":9,"config_family":"cf1-x","budget_generation":"bg1-y","execution_id":"ex_9","tenant_id":"acme"}`))
	if !errors.Is(err, ErrNewerSchema) || env.ConfigFamily != "cf1-x" || env.BudgetGeneration != "bg1-y" ||
		env.ExecutionID != "ex_9" || env.Tenant() != "acme" || env.SchemaVersion != 9 {
		t.Fatalf("%+v %v", env, err)
	}
	env, _, err = Decode("s", "1-1", []byte(`{"schema_version":1,"config_family":"cf1-x","kind":"start"}`))
	if !errors.Is(err, ErrMalformed) || env.ConfigFamily != "cf1-x" {
		t.Fatalf("%+v %v", env, err)
	}
}

func TestDecodeDerivesLegacyStartID(t *testing.T) {
	p := []byte(`{"schema_version":1,"kind":"start","flow_id":"f"}`)
	a, derived, err := Decode("q1", "1700000000000-0", p)
	if err != nil || !derived || a.ExecutionID != DeterministicExecutionID("q1", "1700000000000-0") {
		t.Fatalf("%+v %v %v", a, derived, err)
	}
	if !strings.HasPrefix(a.ExecutionID, "ex_") || len(a.ExecutionID) != 27 {
		t.Fatalf("id %q", a.ExecutionID)
	}
	b, _, _ := Decode("q2", "1700000000000-0", p)
	c, _, _ := Decode("q1", "1700000000000-1", p)
	if b.ExecutionID == a.ExecutionID || c.ExecutionID == a.ExecutionID {
		t.Fatal("ids collide across streams or entries")
	}
	// Without a source id there is nothing to derive from.
	if _, _, err := Decode("q1", "", p); !errors.Is(err, ErrMalformed) {
		t.Fatalf("%v", err)
	}
}

func TestMarshalRoundTrip(t *testing.T) {
	e := Envelope{
		SchemaVersion: 1, Kind: KindResume, TenantID: "acme", FlowID: "f", FlowVersion: "2", ExecutionID: "ex_1",
		ResumeType: "event", ResumeData: json.RawMessage(`{"a":1}`), CreatedAt: time.Date(2026, 5, 6, 7, 8, 9, 123, time.UTC),
		TargetInstanceID: "w-1", Repo: "shop", QuotaDeferCount: 3, QuotaBypass: true, SourceMessageID: "1-1",
		ConfigFamily: "cf1-a", ConfigGeneration: "cfg1-b", BudgetGeneration: "bg1-c",
		ConfigEffectiveAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
		Extra:             map[string]json.RawMessage{"later": json.RawMessage(`[1]`), "kind": json.RawMessage(`"start"`)},
	}
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	got, derived, err := Decode("s", "1-1", b)
	if err != nil || derived {
		t.Fatal(err)
	}
	b2, _ := json.Marshal(got)
	if string(b) != string(b2) {
		t.Fatalf("round trip:\n%s\n%s", b, b2)
	}
	if got.Kind != KindResume || string(got.Extra["later"]) != "[1]" || len(got.Extra) != 1 {
		t.Fatalf("an Extra field shadowed a known one or was lost: %+v", got)
	}
}

func TestCloneIsDeep(t *testing.T) {
	e := Envelope{Input: json.RawMessage(`{"a":1}`), Extra: map[string]json.RawMessage{"x": json.RawMessage(`1`)}}
	c := e.Clone()
	c.Input[1] = 'X'
	c.Extra["x"] = json.RawMessage(`2`)
	if string(e.Input) != `{"a":1}` || string(e.Extra["x"]) != "1" {
		t.Fatal("clone shares memory")
	}
}

// A fresh task whose input or resume data is above the producer's bound is refused at enqueue,
// with nothing written.
func TestEnqueueRefusesAnInputOverTheBound(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	big := json.RawMessage(`"` + strings.Repeat("x", 2000) + `"`)
	start := startEnv("f")
	start.Input = big
	resume := Envelope{Kind: KindResume, ExecutionID: "ex_1", ResumeType: "event", ResumeData: big}
	for _, env := range []Envelope{start, resume} {
		_, err := Enqueue(testCtx(t), Redis(b.c), b.q.Stream(), env, MaxInput(1024))
		if !errors.Is(err, ErrInputTooLarge) || !errors.Is(err, ErrInvalidEnvelope) || !strings.Contains(err.Error(), "PLAITA_EXECUTION_STATE_MAX_BYTES") {
			t.Errorf("%s: %v", env.Kind, err)
		}
	}
	if n := b.xlen(t, b.q.Stream()); n != 0 {
		t.Fatalf("%d entries written", n)
	}
	if _, err := Enqueue(testCtx(t), Redis(b.c), b.q.Stream(), start, MaxInput(4096)); err != nil {
		t.Fatalf("under the bound: %v", err)
	}
}

// TestIsConnectionFailure: only a failure of the connection is one a producer may retry with
// the same task: not Redis's answer, a refused envelope or the caller's context.
func TestIsConnectionFailure(t *testing.T) {
	c := redistest.Client(t)
	key := redistest.Root(t, c) + ":not-a-stream"
	ctx := context.Background()
	if err := c.Do(ctx, c.B().Set().Key(key).Value("x").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	_, wrongType := Enqueue(ctx, Redis(c), key, Envelope{Kind: KindStart, FlowID: "f", ExecutionID: "ex_1"})
	_, invalid := Enqueue(ctx, Redis(c), "", Envelope{})
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, ctxErr := Enqueue(cancelled, Redis(c), key+"2", Envelope{Kind: KindStart, FlowID: "f", ExecutionID: "ex_1"})
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false}, {"a WRONGTYPE reply", wrongType, false}, {"a refused envelope", invalid, false},
		{"a cancelled context", ctxErr, false}, {"EOF", fmt.Errorf("enqueue to s: %w", io.EOF), true},
	} {
		if got := IsConnectionFailure(tc.err); got != tc.want {
			t.Errorf("%s (%v): %t, want %t", tc.name, tc.err, got, tc.want)
		}
	}
}
