package queue

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/redis/rueidis"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"plaita/engine/state"
	"plaita/internal/tracing"
	"plaita/model"
	"plaita/store/keys"
)

// SchemaVersion is the task schema this build writes and reads (config_family hashes the same
// number as config.TaskSchemaVersion; a test keeps them equal).
const SchemaVersion = 1

// PayloadField is the one stream field that carries the envelope JSON.
const PayloadField = "payload"

// Kind says whether a task starts an execution or resumes one.
type Kind string

const (
	KindStart  Kind = "start"
	KindResume Kind = "resume"
)

var (
	// ErrInvalidEnvelope is what Enqueue returns for an envelope it refuses to write.
	ErrInvalidEnvelope = model.New(model.Invalid, "", "invalid task envelope")
	// ErrMissingExecutionID: a start without execution_id. Producers mint one with
	// engine.NewExecutionID() so that a redelivered start finds the state it created.
	ErrMissingExecutionID = model.New(model.Invalid, "", "start task without execution_id")
	// ErrMalformed is what decoding returns for an entry no worker can run: no payload field,
	// not a JSON object, a known field of the wrong type, a missing or invalid required field.
	ErrMalformed = model.New(model.Invalid, "", "malformed task")
	// ErrNewerSchema: the envelope's schema_version is newer than SchemaVersion.
	ErrNewerSchema = model.New(model.Invalid, "", "task schema_version is newer than this build")
	// ErrInputTooLarge: a fresh task's input or resume data is above the producer's bound
	// (PLAITA_EXECUTION_STATE_MAX_BYTES); nothing was enqueued.
	ErrInputTooLarge = model.New(model.Invalid, "", "task input is too large")
	// ErrBadInput: a fresh task's input or resume data is a document no execution may take in
	// (nested too deeply, a number a float64 changes); nothing was enqueued.
	ErrBadInput = model.New(model.Invalid, "", "task input is not an acceptable document")
)

// Option adjusts one Enqueue.
type Option func(*enqueueOptions)

type enqueueOptions struct{ maxInput int }

// MaxInput refuses an envelope whose input or resume data is larger than n bytes (n < 1: no
// bound) with ErrInputTooLarge, or is a document state.CheckDocument refuses (ErrBadInput). Producers of fresh tasks pass PLAITA_EXECUTION_STATE_MAX_BYTES:
// an input the execution state could not hold is refused before it is enqueued. Copies of an
// existing message (requeue, replay) carry no bound: they were accepted once.
func MaxInput(n int) Option { return func(o *enqueueOptions) { o.maxInput = n } }

// CheckInput is the rule a fresh document from outside — a start's input, a resume's data —
// is held to before anything runs on it (maxInput < 1: no size bound): at most maxInput bytes
// (PLAITA_EXECUTION_STATE_MAX_BYTES: an input the execution state could not hold),
// ErrInputTooLarge; nested no deeper than a state can hold and numbers as the execution will
// read them (engine/state/document.go), ErrBadInput. Enqueue applies it with MaxInput; the
// console's local mode, which enqueues nothing, applies it itself. An empty document passes.
func CheckInput(what string, doc json.RawMessage, maxInput int) error {
	if len(doc) == 0 {
		return nil
	}
	if maxInput > 0 && len(doc) > maxInput {
		return fmt.Errorf("%w: the %s is %d bytes, above the %d-byte bound (PLAITA_EXECUTION_STATE_MAX_BYTES)", ErrInputTooLarge, what, len(doc), maxInput)
	}
	if err := state.CheckDocument(doc); err != nil {
		return fmt.Errorf("%w: the %s: %w", ErrBadInput, what, err)
	}
	return nil
}

// Envelope is the task message. Fields are only ever added; a change of meaning
// bumps schema_version. Unknown fields of a payload are kept in Extra and written back when
// the envelope is re-enqueued, so a copy made by an older worker does not strip what a newer
// producer added.
type Envelope struct {
	SchemaVersion     int              `json:"schema_version"`
	Kind              Kind             `json:"kind"`
	TenantID          string           `json:"tenant_id,omitempty"` // "" or "default": the default tenant
	FlowID            string           `json:"flow_id,omitempty"`
	FlowVersion       string           `json:"flow_version,omitempty"`
	ExecutionID       string           `json:"execution_id,omitempty"`
	Input             json.RawMessage  `json:"input,omitempty"`
	ResumeType        state.ResumeType `json:"resume_type,omitempty"`
	ResumeData        json.RawMessage  `json:"resume_data,omitempty"`
	CreatedAt         time.Time        `json:"created_at,omitzero"`
	TargetInstanceID  string           `json:"target_instance_id,omitempty"`
	Repo              string           `json:"repo,omitempty"`
	QuotaDeferCount   int              `json:"quota_defer_count,omitempty"`
	QuotaBypass       bool             `json:"quota_bypass,omitempty"`
	SourceMessageID   string           `json:"source_message_id,omitempty"`
	ConfigFamily      string           `json:"config_family,omitempty"`
	ConfigGeneration  string           `json:"config_generation,omitempty"`
	BudgetGeneration  string           `json:"budget_generation,omitempty"`
	ConfigEffectiveAt time.Time        `json:"config_effective_at,omitzero"`
	// TraceParent and TraceState are the W3C trace context of the span that sent the task
	// (internal/tracing): the worker's span of its run continues that trace. A malformed one
	// is ignored, never a reason to refuse the task.
	TraceParent string `json:"traceparent,omitempty"`
	TraceState  string `json:"tracestate,omitempty"`

	// Extra holds payload fields this build does not know (added by a newer producer).
	Extra map[string]json.RawMessage `json:"-"`
}

// knownFields are the envelope's JSON names; everything else goes to Extra.
var knownFields = []string{"schema_version", "kind", "tenant_id", "flow_id", "flow_version", "execution_id",
	"input", "resume_type", "resume_data", "created_at", "target_instance_id", "repo", "quota_defer_count",
	"quota_bypass", "source_message_id", "config_family", "config_generation", "budget_generation",
	"config_effective_at", "traceparent", "tracestate"}

// Tenant is the envelope's tenant, "default" when the field is missing.
func (e Envelope) Tenant() string {
	if e.TenantID == "" {
		return keys.DefaultTenant
	}
	return e.TenantID
}

// Trace is the trace context the task carries.
func (e Envelope) Trace() tracing.Parent {
	return tracing.Parent{TraceParent: e.TraceParent, TraceState: e.TraceState}
}

// Legacy reports whether the envelope carries no config generation (never gated).
func (e Envelope) Legacy() bool { return e.ConfigFamily == "" && e.BudgetGeneration == "" }

// Stamp writes a producer's config generations into a fresh envelope. Copies of an existing
// message never call it: they inherit the source's values, or stay legacy.
func (e *Envelope) Stamp(g Generations, effectiveAt time.Time) {
	e.ConfigFamily, e.ConfigGeneration, e.BudgetGeneration = g.Family, g.Config, g.Budget
	e.ConfigEffectiveAt = effectiveAt.UTC()
}

// inheritFrom copies what a redelivery, handover or replay must keep from its source.
func (e *Envelope) inheritFrom(src Envelope) {
	e.SchemaVersion = src.SchemaVersion
	e.ConfigFamily, e.ConfigGeneration, e.BudgetGeneration = src.ConfigFamily, src.ConfigGeneration, src.BudgetGeneration
	e.ConfigEffectiveAt = src.ConfigEffectiveAt
}

// Clone returns a deep copy.
func (e Envelope) Clone() Envelope {
	c := e
	c.Input = bytes.Clone(e.Input)
	c.ResumeData = bytes.Clone(e.ResumeData)
	if e.Extra != nil {
		c.Extra = make(map[string]json.RawMessage, len(e.Extra))
		for k, v := range e.Extra {
			c.Extra[k] = bytes.Clone(v)
		}
	}
	return c
}

// Validate checks what every written envelope must satisfy. Enqueue calls it after stamping
// schema_version and created_at.
func (e Envelope) Validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidEnvelope, fmt.Sprintf(format, a...))
	}
	switch {
	case e.SchemaVersion < 1:
		return bad("schema_version %d (must be at least 1)", e.SchemaVersion)
	case e.SchemaVersion > SchemaVersion:
		return fmt.Errorf("%w: %w: %d > %d", ErrInvalidEnvelope, ErrNewerSchema, e.SchemaVersion, SchemaVersion)
	}
	if err := keys.ValidTenant(e.TenantID); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidEnvelope, err)
	}
	switch e.Kind {
	case KindStart:
		if e.FlowID == "" {
			return bad("start without flow_id")
		}
		if e.ResumeType != "" {
			return bad("start with resume_type %q (only a resume has one)", e.ResumeType)
		}
		if e.ExecutionID == "" {
			return fmt.Errorf("%w: %w (mint it with engine.NewExecutionID())", ErrInvalidEnvelope, ErrMissingExecutionID)
		}
	case KindResume:
		if e.ExecutionID == "" {
			return bad("resume without execution_id")
		}
		if _, err := state.ParseResumeType(string(e.ResumeType)); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidEnvelope, err)
		}
	default:
		return bad("kind %q (start or resume)", e.Kind)
	}
	if err := keys.ValidID(e.ExecutionID); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidEnvelope, err)
	}
	if e.QuotaDeferCount < 0 {
		return bad("negative quota_defer_count %d", e.QuotaDeferCount)
	}
	return nil
}

// envelopeJSON has Envelope's fields without its methods, so MarshalJSON can use the default
// encoding.
type envelopeJSON Envelope

// MarshalJSON writes the known fields and then the Extra fields the known ones do not shadow.
func (e Envelope) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(envelopeJSON(e))
	if err != nil || len(e.Extra) == 0 {
		return b, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	for k, v := range e.Extra {
		if !slices.Contains(knownFields, k) {
			m[k] = v
		}
	}
	return json.Marshal(m)
}

// Enqueue is the one way a task enters a stream: it stamps schema_version (when absent) and
// created_at (when zero), validates, and XADDs the JSON in the field "payload". A copy of an
// existing message keeps its source's schema_version and generations (see Queue.Requeue); a
// fresh envelope gets the producer's generations from Envelope.Stamp.
func Enqueue(ctx context.Context, d Driver, stream string, env Envelope, opts ...Option) (id string, err error) {
	if stream == "" {
		return "", fmt.Errorf("%w: empty stream name", ErrInvalidEnvelope)
	}
	var o enqueueOptions
	for _, opt := range opts {
		opt(&o)
	}
	if o.maxInput > 0 {
		what, doc := "input", env.Input
		if len(env.ResumeData) > len(env.Input) {
			what, doc = "resume data", env.ResumeData
		}
		if err := CheckInput(what, doc, o.maxInput); errors.Is(err, ErrInputTooLarge) {
			return "", fmt.Errorf("%w: %w", ErrInvalidEnvelope, err)
		}
		for _, d := range []struct {
			what string
			doc  json.RawMessage
		}{{"input", env.Input}, {"resume data", env.ResumeData}} {
			if err := CheckInput(d.what, d.doc, o.maxInput); err != nil {
				return "", fmt.Errorf("%w: %w", ErrInvalidEnvelope, err)
			}
		}
	}
	var span trace.Span
	if tracing.Enabled() {
		ctx, span = sendSpan(ctx, stream, &env)
		defer func() {
			tracing.Fail(span, "enqueue", err)
			span.End()
		}()
	}
	payload, err := env.encode(time.Now())
	if err != nil {
		return "", err
	}
	id, err = d.Add(ctx, stream, PayloadField, string(payload))
	if err != nil {
		return "", fmt.Errorf("enqueue: %w", err)
	}
	if span != nil && span.IsRecording() {
		span.SetAttributes(attribute.String(tracing.AttrMessageID, id))
	}
	return id, nil
}

// sendSpan begins the producer span of one task and writes its context into the envelope, so
// the worker's run of the task is its child. The span continues the trace the envelope already
// carries — a resume of an execution carries the execution's trace — and links the caller's
// span (the request, the event that woke it) when that is another; a fresh task with no trace
// of its own is sent under the caller's span, or begins a trace.
func sendSpan(ctx context.Context, stream string, env *Envelope) (context.Context, trace.Span) {
	parent := ctx
	var links []trace.SpanContext
	if own := env.Trace().SpanContext(); own.IsValid() {
		if caller := trace.SpanContextFromContext(ctx); caller.IsValid() && caller.TraceID() != own.TraceID() {
			links = append(links, caller)
		}
		parent = trace.ContextWithRemoteSpanContext(ctx, own)
	}
	name := "send " + string(env.Kind)
	if env.Kind == KindResume {
		name += " " + string(env.ResumeType)
	}
	sctx, span := tracing.Start(parent, name, trace.SpanKindProducer, links...)
	if span.IsRecording() {
		span.SetAttributes(attribute.String(tracing.AttrSystem, "redis"), attribute.String(tracing.AttrOperation, "send"),
			attribute.String(tracing.AttrDestination, stream), attribute.String(tracing.AttrExecution, env.ExecutionID),
			attribute.String(tracing.AttrTenant, env.Tenant()), attribute.String(tracing.AttrFlow, env.FlowID),
			attribute.String(tracing.AttrKind, string(env.Kind)))
		if env.ResumeType != "" {
			span.SetAttributes(attribute.String(tracing.AttrResumeType, string(env.ResumeType)))
		}
	}
	if p := tracing.Of(sctx); p.TraceParent != "" {
		env.TraceParent, env.TraceState = p.TraceParent, p.TraceState
	}
	return sctx, span
}

// IsConnectionFailure reports whether an Enqueue error is a failure of the connection — the
// XADD may or may not have reached Redis, and rueidis does not retry a write (the first XADD
// on a connection Redis closed by restarting fails with EOF) — rather than Redis's answer (an
// error reply), a refused envelope or the caller's context. A producer whose task carries its
// own identity (an execution id: a worker given a start twice continues the execution it
// created) may send it again; nothing else should.
func IsConnectionFailure(err error) bool {
	if err == nil || errors.Is(err, ErrInvalidEnvelope) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var reply *rueidis.RedisError // rueidis.IsRedisErr does not look through wrapping
	return !errors.As(err, &reply)
}

// encode stamps what Enqueue stamps (schema_version when absent, created_at when zero),
// validates and serializes: the value of the "payload" field. The delay queue's mover writes
// the same bytes from inside its script.
func (env Envelope) encode(now time.Time) ([]byte, error) {
	if env.SchemaVersion == 0 {
		env.SchemaVersion = SchemaVersion
	}
	if env.CreatedAt.IsZero() {
		env.CreatedAt = now.UTC()
	}
	if err := env.Validate(); err != nil {
		return nil, err
	}
	// MarshalJSON's own bytes, which are json.Marshal's without its second pass over them (a
	// check and a copy of what encoding/json just wrote compact; FuzzDecode holds the two equal).
	payload, err := env.MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidEnvelope, err)
	}
	return payload, nil
}

// DeterministicExecutionID is the execution id of a legacy start that carries none: the same
// for every delivery and every DLQ replay of one source message, so a redelivered or replayed
// start resumes the execution its first delivery created. The stream name is part of the hash
// because stream ids repeat across streams.
func DeterministicExecutionID(stream, sourceID string) string {
	sum := sha256.Sum256([]byte(stream + "\x00" + sourceID))
	return "ex_" + hex.EncodeToString(sum[:])[:24]
}

// Decode parses one stream entry's payload.
//
// Policy: unknown fields are tolerated at every schema version (fields are only ever
// added, so a newer producer may add one without bumping the schema) and are kept in Extra.
// Known fields are strict: a wrong JSON type, a missing or invalid required field is
// ErrMalformed. A schema_version newer than this build is ErrNewerSchema and nothing past the
// gating fields is interpreted, since the newer schema may have changed their meaning.
//
// The returned envelope carries whatever could be read even on error (at least the gating
// fields config_family and budget_generation when they were well-formed), which is what Gate
// needs. A legacy start without execution_id gets DeterministicExecutionID(stream, id) and
// derived = true.
func Decode(stream, id string, payload []byte) (env Envelope, derived bool, err error) {
	malformed := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, a...))
	}
	raw, ok := members(payload)
	if !ok {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(payload, &m); err != nil {
			return env, false, malformed("payload is not a JSON object: %v", err)
		}
		if m == nil {
			return env, false, malformed("payload is null")
		}
		raw = make(objectMembers, 0, len(m))
		for k, v := range m {
			raw = append(raw, member{key: k, value: v})
		}
	}
	d := fieldDecoder{raw: raw}
	// Gating fields first, each on its own, so a bad field elsewhere does not hide them.
	d.str("config_family", &env.ConfigFamily)
	d.str("budget_generation", &env.BudgetGeneration)
	d.str("config_generation", &env.ConfigGeneration)
	// Best effort, for dead-letter records of entries we will not run.
	probe := fieldDecoder{raw: raw}
	probe.str("tenant_id", &env.TenantID)
	probe.str("execution_id", &env.ExecutionID)
	probe.str("kind", (*string)(&env.Kind))
	// Best effort too: a trace context of the wrong type is dropped, the task still runs.
	trace := fieldDecoder{raw: raw}
	trace.str("traceparent", &env.TraceParent)
	trace.str("tracestate", &env.TraceState)
	if trace.err != nil {
		env.TraceParent, env.TraceState = "", ""
	}

	if _, ok := raw.get("schema_version"); !ok {
		return env, false, malformed("no schema_version")
	}
	d.int("schema_version", &env.SchemaVersion)
	if d.err != nil {
		return env, false, malformed("%v", d.err)
	}
	if env.SchemaVersion > SchemaVersion {
		return env, false, fmt.Errorf("%w: %d > %d", ErrNewerSchema, env.SchemaVersion, SchemaVersion)
	}

	env.TenantID, env.ExecutionID, env.Kind = "", "", ""
	d.str("kind", (*string)(&env.Kind))
	d.str("tenant_id", &env.TenantID)
	d.str("flow_id", &env.FlowID)
	d.version("flow_version", &env.FlowVersion)
	d.str("execution_id", &env.ExecutionID)
	d.rawJSON("input", &env.Input)
	d.str("resume_type", (*string)(&env.ResumeType))
	d.rawJSON("resume_data", &env.ResumeData)
	d.time("created_at", &env.CreatedAt)
	d.str("target_instance_id", &env.TargetInstanceID)
	d.str("repo", &env.Repo)
	d.int("quota_defer_count", &env.QuotaDeferCount)
	d.bool("quota_bypass", &env.QuotaBypass)
	d.str("source_message_id", &env.SourceMessageID)
	d.time("config_effective_at", &env.ConfigEffectiveAt)
	if d.err != nil {
		return env, false, malformed("%v", d.err)
	}
	for _, m := range raw { // in order: a member given twice keeps its last value
		if !slices.Contains(knownFields, m.key) {
			if env.Extra == nil {
				env.Extra = map[string]json.RawMessage{}
			}
			env.Extra[m.key] = bytes.Clone(m.value) // members' values alias the payload
		}
	}
	if env.Kind == KindStart && env.ExecutionID == "" && id != "" {
		env.ExecutionID, derived = DeterministicExecutionID(stream, id), true
	}
	if err := env.Validate(); err != nil {
		return env, derived, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	return env, derived, nil
}

// member is one member of a JSON object: its key and its raw value.
type member struct {
	key   string
	value json.RawMessage
}

// objectMembers are an object's members in the order written. An envelope has a dozen: a
// look-up walks them, which is cheaper than building a map for the two dozen reads a decode
// makes.
type objectMembers []member

// get returns the value of the member named key; a member given twice keeps its last value,
// as encoding/json has it.
func (m objectMembers) get(key string) (json.RawMessage, bool) {
	for i := len(m) - 1; i >= 0; i-- {
		if m[i].key == key {
			return m[i].value, true
		}
	}
	return nil, false
}

// members splits a JSON object into its members, whose raw values alias payload, without
// encoding/json's reflection: an envelope is a dozen short members read once per delivery, and
// decoding it into a map with encoding/json was two thirds of a delivery's decode (13 µs and
// 54 allocations). ok is false for anything but a valid JSON object whose keys are ASCII
// without escapes — the caller decodes that with encoding/json, which says what is wrong.
// Validity is json.Valid's, checked by encoding/json/v2's faster scanner told to accept the two
// things json.Valid accepts and it does not by default (a name given twice, invalid UTF-8). A
// known field's key is its name in knownFields, not a copy. FuzzMembers holds it to
// json.Unmarshal's map.
func members(payload []byte) (objectMembers, bool) {
	if !jsontext.Value(payload).IsValid(jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true)) {
		return nil, false
	}
	i := skipSpace(payload, 0)
	if payload[i] != '{' {
		return nil, false
	}
	m := make(objectMembers, 0, 16)
	if i = skipSpace(payload, i+1); payload[i] == '}' {
		return m, true
	}
	for {
		// The payload is valid JSON: a key string, ':', a value, then ',' or '}'.
		j := i + 1
		for ; payload[j] != '"'; j++ {
			if c := payload[j]; c == '\\' || c >= utf8.RuneSelf {
				return nil, false
			}
		}
		key := knownName(payload[i+1 : j])
		i = skipSpace(payload, skipSpace(payload, j+1)+1)
		start, depth := i, 0
	value:
		for ; ; i++ {
			switch payload[i] {
			case '"':
				for i++; payload[i] != '"'; i++ {
					if payload[i] == '\\' {
						i++
					}
				}
			case '{', '[':
				depth++
			case '}', ']':
				if depth == 0 {
					break value
				}
				depth--
			case ',':
				if depth == 0 {
					break value
				}
			}
		}
		end := i
		for end > start && isSpace(payload[end-1]) {
			end--
		}
		m = append(m, member{key: key, value: payload[start:end:end]})
		if payload[i] == '}' {
			return m, true
		}
		i = skipSpace(payload, i+1)
	}
}

// knownName is the key as a string: a known field's name without a copy (comparing
// string(b) does not allocate), any other key copied.
func knownName(b []byte) string {
	for _, k := range knownFields {
		if string(b) == k {
			return k
		}
	}
	return string(b)
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

// fieldDecoder reads known fields by their exact name (encoding/json matches struct fields
// case-insensitively, which would let "Kind" stand in for "kind"). null counts as absent. The
// first error sticks.
type fieldDecoder struct {
	raw objectMembers
	err error
}

func (d *fieldDecoder) get(name string) (json.RawMessage, bool) {
	v, ok := d.raw.get(name)
	if !ok || d.err != nil || string(bytes.TrimSpace(v)) == "null" {
		return nil, false
	}
	return v, true
}

func (d *fieldDecoder) fail(name, want string, v json.RawMessage) {
	if d.err == nil {
		s := string(v)
		if len(s) > 40 {
			s = s[:40] + "…"
		}
		d.err = fmt.Errorf("field %s: want %s, got %s", name, want, s)
	}
}

// decodeField reads one field of type T; want names the type in the error.
func decodeField[T any](d *fieldDecoder, name, want string, dst *T) {
	if v, ok := d.get(name); ok {
		if json.Unmarshal(v, dst) != nil {
			d.fail(name, want, v)
		}
	}
}

func (d *fieldDecoder) str(name string, dst *string) {
	if v, ok := d.get(name); ok {
		if s, ok := plainString(v); ok {
			*dst = s
			return
		}
		decodeField(d, name, "a string", dst)
	}
}

func (d *fieldDecoder) int(name string, dst *int) {
	if v, ok := d.get(name); ok {
		if n, ok := plainInt(v); ok {
			*dst = n
			return
		}
		decodeField(d, name, "an integer", dst)
	}
}

// plainString is the value of a JSON string without escapes, read without encoding/json:
// every envelope field this build writes is one, and a delivery reads a dozen. v is a valid
// JSON value (it comes out of the payload's parse); anything else (escapes, invalid UTF-8,
// which encoding/json would replace) is left to encoding/json. FuzzPlainScalars checks the two
// agree.
func plainString(v []byte) (string, bool) {
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return "", false
	}
	body := v[1 : len(v)-1]
	ascii := true
	for _, c := range body {
		if c == '\\' || c == '"' || c < 0x20 {
			return "", false
		}
		ascii = ascii && c < utf8.RuneSelf
	}
	if !ascii && !utf8.Valid(body) {
		return "", false
	}
	return string(body), true
}

// plainInt is the value of a JSON integer written as plain digits (as strconv.Atoi reads it:
// out of range is not plain); exponents, fractions and the rest are left to encoding/json.
func plainInt(v []byte) (int, bool) {
	if len(v) == 0 || len(v) > 18 {
		return 0, false
	}
	for i, c := range v {
		if (c < '0' || c > '9') && (i > 0 || c != '-') {
			return 0, false
		}
	}
	n, err := strconv.Atoi(string(v))
	return n, err == nil
}
func (d *fieldDecoder) bool(name string, dst *bool) { decodeField(d, name, "true or false", dst) }

func (d *fieldDecoder) rawJSON(name string, dst *json.RawMessage) {
	if v, ok := d.get(name); ok {
		*dst = bytes.Clone(v)
	}
}

// version accepts a string or an integer (older producers wrote numeric versions).
func (d *fieldDecoder) version(name string, dst *string) {
	v, ok := d.get(name)
	if !ok {
		return
	}
	if s, ok := plainString(v); ok {
		*dst = s
		return
	}
	if json.Unmarshal(v, dst) == nil {
		return
	}
	var n int64
	if json.Unmarshal(v, &n) == nil {
		*dst = strconv.FormatInt(n, 10)
		return
	}
	d.fail(name, "a string or an integer", v)
}

// time accepts RFC 3339 (what this build writes) or Unix seconds as a number (what the
// Python producers wrote).
func (d *fieldDecoder) time(name string, dst *time.Time) {
	v, ok := d.get(name)
	if !ok {
		return
	}
	s, ok := plainString(v)
	if ok || json.Unmarshal(v, &s) == nil {
		t, err := time.Parse(time.RFC3339Nano, s)
		if t = t.UTC(); err != nil || t.Year() < 1 || t.Year() > 9999 {
			d.fail(name, "an RFC 3339 time between years 1 and 9999 (UTC)", v)
			return
		}
		*dst = t
		return
	}
	var f float64
	if json.Unmarshal(v, &f) == nil && !math.IsNaN(f) && f >= 0 && f < 1e11 {
		sec, frac := math.Modf(f)
		*dst = time.Unix(int64(sec), int64(frac*1e9)).UTC()
		return
	}
	d.fail(name, "an RFC 3339 time or Unix seconds", v)
}
